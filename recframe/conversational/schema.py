"""TRACE-style records: points of interest, reviews and multi-turn dialogues with citations.

A release is a folder of three JSONL files (one JSON object per line; field tables in
:mod:`recframe.conversational.validate`):

- ``pois.jsonl``      ``{"poi_id", "name", "city", "lat", "lon", "categories": [..],
  "attributes": {aspect: value}}``
- ``reviews.jsonl``   ``{"review_id", "poi_id", "text", "stars"?}``
- ``dialogues.jsonl`` ``{"dialogue_id", "city", "candidates": [poi_id, ..], "target": poi_id, "turns": [..]}``

and optionally ``lexicon.json`` (``{aspect: {value: [phrase, ..]}}``, how each aspect value is verbalised;
span-aspect relevance uses it, see :mod:`recframe.conversational.metrics`). Yelp field names are accepted
for POIs and reviews (``business_id``, ``latitude``, ``longitude``, comma-separated ``categories``).

A turn is ``{"role": "user"|"system", "act": ..., "text": ...}`` plus, by act:

- user ``inform``: ``aspects`` (``{aspect: value}``, the preferences this turn states);
- user ``reject``: rejects the system recommendation right before it; ``aspects`` as for inform (the
  preference the rejection reveals, may be empty);
- user ``accept``: ends the search;
- system ``recommend``: ``poi_id`` (a candidate) and ``citations``: ``[{"review_id", "text", "start"?,
  "end"?, "aspect"?}]``, verbatim spans of reviews of that POI (``text == review[start:end]`` when offsets
  are given).

Every system ``recommend`` turn is an evaluation point: a system under test sees the dialogue before it
(:class:`recframe.conversational.view.DialogueView`) and ranks the candidates; the dialogue's ``target``
is the POI the user finally accepts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["POI", "Review", "Citation", "Turn", "Dialogue", "Release", "USER_ACTS", "SYSTEM_ACTS"]

USER_ACTS = ("inform", "reject", "accept")
SYSTEM_ACTS = ("recommend",)


@dataclass(frozen=True)
class POI:
    """A point of interest. ``attributes`` maps an aspect (price, atmosphere, ...) to its value."""

    poi_id: str
    name: str
    city: str
    lat: float
    lon: float
    categories: tuple[str, ...] = ()
    attributes: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "poi_id": self.poi_id,
            "name": self.name,
            "city": self.city,
            "lat": self.lat,
            "lon": self.lon,
            "categories": list(self.categories),
            "attributes": dict(self.attributes),
        }


@dataclass(frozen=True)
class Review:
    """A prior visitor's review of ``poi_id``."""

    review_id: str
    poi_id: str
    text: str
    stars: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"review_id": self.review_id, "poi_id": self.poi_id, "text": self.text}
        if self.stars is not None:
            out["stars"] = self.stars
        return out


@dataclass(frozen=True)
class Citation:
    """A span quoted from review ``review_id``; ``start``/``end`` are character offsets when known."""

    review_id: str
    text: str
    start: int | None = None
    end: int | None = None
    aspect: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"review_id": self.review_id, "text": self.text}
        for key in ("start", "end", "aspect"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


@dataclass(frozen=True)
class Turn:
    """One dialogue turn (see the module docstring for which fields each act uses)."""

    role: str
    act: str
    text: str
    aspects: dict[str, str] = field(default_factory=dict)
    poi_id: str | None = None
    citations: tuple[Citation, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "act": self.act, "text": self.text}
        if self.aspects:
            out["aspects"] = dict(self.aspects)
        if self.poi_id is not None:
            out["poi_id"] = self.poi_id
        if self.role == "system":
            out["citations"] = [c.to_dict() for c in self.citations]
        return out


@dataclass(frozen=True)
class Dialogue:
    """A multi-turn recommendation dialogue over a closed candidate set."""

    dialogue_id: str
    city: str
    candidates: tuple[str, ...]
    target: str
    turns: tuple[Turn, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dialogue_id": self.dialogue_id,
            "city": self.city,
            "candidates": list(self.candidates),
            "target": self.target,
            "turns": [t.to_dict() for t in self.turns],
        }

    def recommend_turns(self) -> list[int]:
        """Indices of the system ``recommend`` turns (the evaluation points)."""
        return [i for i, t in enumerate(self.turns) if t.role == "system" and t.act == "recommend"]


@dataclass
class Release:
    """A loaded benchmark: POIs and reviews by id, dialogues in file order, the aspect lexicon."""

    pois: dict[str, POI]
    reviews: dict[str, Review]
    dialogues: list[Dialogue]
    lexicon: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.reviews_of: dict[str, list[str]] = {}
        for rid, review in self.reviews.items():
            self.reviews_of.setdefault(review.poi_id, []).append(rid)
