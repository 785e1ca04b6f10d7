"""A hand-built release shared by the conversational tests (three POIs, one rejection dialogue)."""

from __future__ import annotations

import numpy as np

from recframe.conversational.schema import POI, Citation, Dialogue, Release, Review, Turn

LEXICON = {
    "cuisine": {"thai": ["thai", "pad thai"], "italian": ["italian"]},
    "price": {"cheap": ["cheap", "inexpensive"], "expensive": ["pricey"]},
    "atmosphere": {"quiet": ["quiet"], "lively": ["loud"]},
}


def tiny_release() -> Release:
    """A (thai, cheap, quiet) is the target, B (thai, expensive, quiet) is rejected for its price,
    C (italian, cheap, lively)."""
    pois = {
        "A": POI(
            "A",
            "Lotus",
            "Reno",
            39.5,
            -119.8,
            ("Restaurants", "Thai"),
            {"cuisine": "thai", "price": "cheap", "atmosphere": "quiet"},
        ),
        "B": POI(
            "B",
            "Orchid",
            "Reno",
            39.5,
            -119.8,
            ("Restaurants", "Thai"),
            {"cuisine": "thai", "price": "expensive", "atmosphere": "quiet"},
        ),
        "C": POI(
            "C",
            "Roma",
            "Reno",
            39.5,
            -119.8,
            ("Restaurants", "Italian"),
            {"cuisine": "italian", "price": "cheap", "atmosphere": "lively"},
        ),
    }
    reviews = {
        "rA1": Review("rA1", "A", "Prices are cheap here. A quiet room."),
        "rA2": Review("rA2", "A", "The pad thai was great."),
        "rB1": Review("rB1", "B", "It is pricey. The thai curry is good."),
        "rC1": Review("rC1", "C", "Loud and fun. The italian food is cheap."),
        "rC2": Review("rC2", "C", "Good pasta."),
    }
    turns = (
        Turn("user", "inform", "I want thai food.", aspects={"cuisine": "thai"}),
        Turn(
            "system",
            "recommend",
            "Try Orchid.",
            poi_id="B",
            citations=(Citation("rB1", "The thai curry is good.", 14, 37, "cuisine"),),
        ),
        Turn("user", "reject", "Too pricey, something cheap please.", aspects={"price": "cheap"}),
        Turn(
            "system",
            "recommend",
            "Try Lotus.",
            poi_id="A",
            citations=(Citation("rA1", "Prices are cheap here.", 0, 22, "price"),),
        ),
        Turn("user", "accept", "Great."),
    )
    dialogue = Dialogue("d1", "Reno", ("C", "A", "B"), "A", turns)
    return Release(pois, reviews, [dialogue], LEXICON)


def hash_embed(texts: list[str], dim: int = 64) -> np.ndarray:
    """A deterministic bag-of-words embedding (stable across processes: no Python hash)."""
    import zlib

    out = np.zeros((len(texts), dim), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in text.lower().replace(".", " ").replace(",", " ").split():
            out[i, zlib.crc32(word.encode()) % dim] += 1.0
    return out
