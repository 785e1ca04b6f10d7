"""Read and write TRACE-format releases (folder layout: :mod:`recframe.conversational.schema`).

``load_release(folder)`` validates every line first
(:func:`~recframe.conversational.validate.validate_release`)
and raises :class:`~recframe.conversational.validate.ReleaseError` listing each error's file, line and
field; a release dropped into ``datasets/<name>/`` loads as is. ``write_release`` writes the same layout
atomically (used by ``recframe conversational generate``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from recframe.checkpoint_io import atomic_write
from recframe.conversational.schema import POI, Citation, Dialogue, Release, Review, Turn
from recframe.conversational.validate import (
    FILES,
    ReleaseError,
    canonical_poi,
    canonical_review,
    read_jsonl,
    validate_release,
)

__all__ = ["load_release", "write_release", "poi_from_dict", "review_from_dict", "dialogue_from_dict"]


def _attr(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def poi_from_dict(obj: dict[str, Any]) -> POI:
    """A :class:`POI` from a (Yelp or TRACE) POI object that passed validation."""
    obj = canonical_poi(obj)
    return POI(
        poi_id=obj["poi_id"],
        name=obj["name"],
        city=obj["city"],
        lat=float(obj["lat"]),
        lon=float(obj["lon"]),
        categories=tuple(obj.get("categories", ())),
        attributes={k: _attr(v) for k, v in obj.get("attributes", {}).items()},
    )


def review_from_dict(obj: dict[str, Any]) -> Review:
    """A :class:`Review` from a validated review object."""
    obj = canonical_review(obj)
    stars = obj.get("stars")
    return Review(
        review_id=obj["review_id"],
        poi_id=obj["poi_id"],
        text=obj["text"],
        stars=None if stars is None else float(stars),
    )


def dialogue_from_dict(obj: dict[str, Any]) -> Dialogue:
    """A :class:`Dialogue` from a validated dialogue object."""
    turns = tuple(
        Turn(
            role=t["role"],
            act=t["act"],
            text=t["text"],
            aspects=dict(t.get("aspects", {})),
            poi_id=t.get("poi_id"),
            citations=tuple(
                Citation(
                    review_id=c["review_id"],
                    text=c["text"],
                    start=c.get("start"),
                    end=c.get("end"),
                    aspect=c.get("aspect"),
                )
                for c in t.get("citations", [])
            ),
        )
        for t in obj["turns"]
    )
    return Dialogue(
        dialogue_id=obj["dialogue_id"],
        city=obj["city"],
        candidates=tuple(obj["candidates"]),
        target=obj["target"],
        turns=turns,
    )


def load_release(folder: str | Path) -> Release:
    """Validate and load the release in ``folder``.

    Raises:
        ReleaseError: any validation error (all of them listed, each with file, line and field).
    """
    folder = Path(folder)
    issues = validate_release(folder)
    if issues:
        raise ReleaseError(issues)
    pois = {p.poi_id: p for p in (poi_from_dict(o) for _, o, _ in read_jsonl(folder / FILES["pois"]))}
    reviews = {
        r.review_id: r for r in (review_from_dict(o) for _, o, _ in read_jsonl(folder / FILES["reviews"]))
    }
    dialogues = [dialogue_from_dict(o) for _, o, _ in read_jsonl(folder / FILES["dialogues"])]
    lexicon_path = folder / "lexicon.json"
    lexicon = json.loads(lexicon_path.read_text(encoding="utf-8")) if lexicon_path.is_file() else {}
    return Release(pois=pois, reviews=reviews, dialogues=dialogues, lexicon=lexicon)


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")


def write_release(release: Release, folder: str | Path) -> Path:
    """Write ``release`` as ``pois.jsonl``, ``reviews.jsonl``, ``dialogues.jsonl`` (+ ``lexicon.json``)."""
    folder = Path(folder)
    parts = {
        FILES["pois"]: _jsonl([p.to_dict() for p in release.pois.values()]),
        FILES["reviews"]: _jsonl([r.to_dict() for r in release.reviews.values()]),
        FILES["dialogues"]: _jsonl([d.to_dict() for d in release.dialogues]),
    }
    if release.lexicon:
        parts["lexicon.json"] = json.dumps(release.lexicon, ensure_ascii=False, indent=1).encode("utf-8")
    for name, data in parts.items():
        atomic_write(folder / name, lambda fh, data=data: fh.write(data))
    return folder
