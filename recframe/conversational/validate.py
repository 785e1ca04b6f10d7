"""Validate a TRACE-format release line by line: every error names its file, line and field.

Fields (``?`` = optional):

========================  ==========================================================================
``pois.jsonl``            ``poi_id`` str, ``name`` str, ``city`` str, ``lat`` number in [-90, 90],
                          ``lon`` number in [-180, 180], ``categories?`` list of str (or a comma-separated
                          str), ``attributes?`` object of aspect -> str/number/bool (null values dropped)
``reviews.jsonl``         ``review_id`` str, ``poi_id`` str (a known POI), ``text`` non-empty str,
                          ``stars?`` number
``dialogues.jsonl``       ``dialogue_id`` str, ``city`` str, ``candidates`` non-empty list of distinct known
                          POI ids, ``target`` one of them, ``turns`` non-empty list of turns
turn                      ``role`` user|system, ``act`` (user: inform|reject|accept; system: recommend),
                          ``text`` str, ``aspects?`` object of str -> str (user turns),
                          ``poi_id`` (recommend: a candidate), ``citations`` (recommend: list)
citation                  ``review_id`` (a review of the recommended POI), ``text`` non-empty str,
                          ``start?``/``end?`` ints with ``text == review[start:end]`` exactly, otherwise
                          ``text`` verbatim in the review (:mod:`recframe.conversational.textnorm`),
                          ``aspect?`` str
========================  ==========================================================================

A ``reject`` turn must directly follow a system ``recommend`` turn. Yelp names are accepted:
``business_id`` for ``poi_id``, ``latitude``/``longitude`` for ``lat``/``lon``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recframe.conversational.schema import SYSTEM_ACTS, USER_ACTS
from recframe.conversational.textnorm import occurs_verbatim
from recframe.data.interactions import DataError

__all__ = [
    "Issue",
    "ReleaseError",
    "canonical_poi",
    "canonical_review",
    "check_poi",
    "check_review",
    "check_dialogue",
    "read_jsonl",
    "validate_release",
    "FILES",
]

FILES = {"pois": "pois.jsonl", "reviews": "reviews.jsonl", "dialogues": "dialogues.jsonl"}
YELP_ALIASES = {"business_id": "poi_id", "latitude": "lat", "longitude": "lon"}


@dataclass(frozen=True)
class Issue:
    """One validation error: ``file:line: field: message`` (line 1-based, 0 for a whole-file problem)."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: {self.message}"


class ReleaseError(DataError):
    """A release that does not validate; ``issues`` holds every error found."""

    def __init__(self, issues: list[Issue], limit: int = 20) -> None:
        self.issues = list(issues)
        shown = "\n".join(f"  {i}" for i in self.issues[:limit])
        more = f"\n  ... and {len(self.issues) - limit} more" if len(self.issues) > limit else ""
        super().__init__(
            f"{len(self.issues)} validation error(s); fix each named line and field:\n{shown}{more}"
        )


def read_jsonl(path: Path) -> Iterator[tuple[int, Any, str | None]]:
    """``(line number, parsed object or None, JSON error message or None)`` per non-blank line."""
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line), None
            except json.JSONDecodeError as exc:
                # some of json's messages end in "at" ("Unterminated string starting at")
                yield number, None, f"not valid JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})"


def canonical_poi(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with Yelp names mapped, comma-separated categories split and null attributes dropped."""
    obj = {YELP_ALIASES.get(k, k): v for k, v in raw.items()}
    if isinstance(obj.get("categories"), str):
        obj["categories"] = [c.strip() for c in obj["categories"].split(",") if c.strip()]
    if obj.get("categories") is None:
        obj["categories"] = []
    attrs = obj.get("attributes")
    if attrs is None:
        obj["attributes"] = {}
    elif isinstance(attrs, dict):
        obj["attributes"] = {k: v for k, v in attrs.items() if v is not None}
    return obj


def canonical_review(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with Yelp names mapped."""
    return {YELP_ALIASES.get(k, k): v for k, v in raw.items()}


def _is_str(v: Any, empty_ok: bool = False) -> bool:
    return isinstance(v, str) and (empty_ok or bool(v.strip()))


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_poi(obj: Any) -> list[tuple[str, str]]:
    """``(field, message)`` for each problem of one canonical POI object."""
    if not isinstance(obj, dict):
        return [("<record>", f"expected a JSON object, got {type(obj).__name__}")]
    errs = [
        (k, "required non-empty string is missing or not a string")
        for k in ("poi_id", "name", "city")
        if not _is_str(obj.get(k))
    ]
    for key, bound in (("lat", 90), ("lon", 180)):
        v = obj.get(key)
        if not _is_num(v):
            errs.append((key, f"required finite number is missing or not a number (got {v!r})"))
        elif abs(v) > bound:
            errs.append((key, f"{v} is outside [-{bound}, {bound}]"))
    cats = obj.get("categories", [])
    if not isinstance(cats, list) or not all(_is_str(c) for c in cats):
        errs.append(("categories", "must be a list of non-empty strings (or one comma-separated string)"))
    attrs = obj.get("attributes", {})
    if not isinstance(attrs, dict):
        errs.append(("attributes", f"must be an object aspect -> value, got {type(attrs).__name__}"))
    else:
        errs += [
            (f"attributes.{k}", f"value must be a string, number or bool, got {type(v).__name__}")
            for k, v in attrs.items()
            if not isinstance(v, (str, int, float, bool))
        ]
    return errs


def check_review(obj: Any, poi_ids: set[str] | None = None) -> list[tuple[str, str]]:
    """``(field, message)`` for each problem of one canonical review object."""
    if not isinstance(obj, dict):
        return [("<record>", f"expected a JSON object, got {type(obj).__name__}")]
    errs = [
        (k, "required non-empty string is missing or not a string")
        for k in ("review_id", "poi_id", "text")
        if not _is_str(obj.get(k))
    ]
    if poi_ids is not None and _is_str(obj.get("poi_id")) and obj["poi_id"] not in poi_ids:
        errs.append(("poi_id", f"{obj['poi_id']!r} is not a POI of pois.jsonl"))
    if "stars" in obj and obj["stars"] is not None and not _is_num(obj["stars"]):
        errs.append(("stars", f"must be a number, got {obj['stars']!r}"))
    return errs


def check_dialogue(
    obj: Any, poi_ids: set[str] | None = None, reviews: dict[str, dict[str, Any]] | None = None
) -> list[tuple[str, str]]:
    """``(field, message)`` for each problem of one dialogue object.

    With ``poi_ids`` the candidates must be known POIs; with ``reviews`` (review_id -> canonical review)
    every citation is checked against its review.
    """
    if not isinstance(obj, dict):
        return [("<record>", f"expected a JSON object, got {type(obj).__name__}")]
    errs = [
        (k, "required non-empty string is missing or not a string")
        for k in ("dialogue_id", "city", "target")
        if not _is_str(obj.get(k))
    ]
    cands = obj.get("candidates")
    cand_set: set[str] = set()
    if not isinstance(cands, list) or not cands or not all(_is_str(c) for c in cands):
        errs.append(("candidates", "must be a non-empty list of POI id strings"))
    else:
        cand_set = set(cands)
        if len(cand_set) != len(cands):
            errs.append(("candidates", "holds a POI id more than once"))
        if poi_ids is not None:
            errs += [
                (f"candidates[{i}]", f"{c!r} is not a POI of pois.jsonl")
                for i, c in enumerate(cands)
                if c not in poi_ids
            ]
        if _is_str(obj.get("target")) and obj["target"] not in cand_set:
            errs.append(("target", f"{obj['target']!r} is not one of the candidates"))
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns:
        return errs + [("turns", "must be a non-empty list of turns")]
    previous: dict[str, Any] | None = None
    for i, turn in enumerate(turns):
        errs += [(f"turns[{i}].{f}", m) for f, m in _check_turn(turn, previous, cand_set, reviews)]
        previous = turn if isinstance(turn, dict) else None
    return errs


def _check_turn(
    turn: Any, previous: dict[str, Any] | None, cands: set[str], reviews: dict[str, dict[str, Any]] | None
) -> list[tuple[str, str]]:
    if not isinstance(turn, dict):
        return [("<turn>", f"expected a JSON object, got {type(turn).__name__}")]
    role, act = turn.get("role"), turn.get("act")
    errs: list[tuple[str, str]] = []
    if not _is_str(turn.get("text"), empty_ok=True):
        errs.append(("text", "required string is missing or not a string"))
    if role not in ("user", "system"):
        return errs + [("role", f"must be 'user' or 'system', got {role!r}")]
    acts = USER_ACTS if role == "user" else SYSTEM_ACTS
    if act not in acts:
        return errs + [("act", f"a {role} turn's act must be one of {', '.join(acts)}; got {act!r}")]
    if role == "user":
        aspects = turn.get("aspects", {})
        if not isinstance(aspects, dict) or not all(_is_str(k) and _is_str(v) for k, v in aspects.items()):
            errs.append(("aspects", "must be an object of aspect -> value strings"))
        if act == "reject" and not (
            previous and previous.get("role") == "system" and previous.get("act") == "recommend"
        ):
            errs.append(("act", "a reject turn must directly follow a system recommend turn"))
        return errs
    poi = turn.get("poi_id")
    if not _is_str(poi):
        errs.append(("poi_id", "a recommend turn needs the recommended POI id (string)"))
    elif cands and poi not in cands:
        errs.append(("poi_id", f"{poi!r} is not one of the dialogue's candidates"))
    cits = turn.get("citations", [])
    if not isinstance(cits, list):
        return errs + [("citations", "must be a list of citation objects")]
    for j, cit in enumerate(cits):
        errs += [(f"citations[{j}].{f}", m) for f, m in _check_citation(cit, poi, reviews)]
    return errs


def _check_citation(cit: Any, poi: Any, reviews: dict[str, dict[str, Any]] | None) -> list[tuple[str, str]]:
    if not isinstance(cit, dict):
        return [("<citation>", f"expected a JSON object, got {type(cit).__name__}")]
    errs = [
        (k, "required non-empty string is missing or not a string")
        for k in ("review_id", "text")
        if not _is_str(cit.get(k))
    ]
    start, end = cit.get("start"), cit.get("end")
    has_offsets = start is not None or end is not None
    if has_offsets:
        for key, v in (("start", start), ("end", end)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                errs.append((key, f"must be a non-negative integer (given with its pair), got {v!r}"))
    if "aspect" in cit and not _is_str(cit["aspect"]):
        errs.append(("aspect", "must be a non-empty string when given"))
    if errs or reviews is None:
        return errs
    review = reviews.get(cit["review_id"])
    if review is None:
        return [("review_id", f"{cit['review_id']!r} is not a review of reviews.jsonl")]
    if review.get("poi_id") != poi:
        return [
            (
                "review_id",
                f"review {cit['review_id']!r} is of POI {review.get('poi_id')!r}, "
                f"not of the recommended POI {poi!r}",
            )
        ]
    text = review["text"]
    if has_offsets:
        if not start < end <= len(text):
            return [("end", f"offsets [{start}, {end}) do not fit the review (length {len(text)})")]
        if text[start:end] != cit["text"]:
            return [("text", f"differs from the review's characters [{start}, {end}): {text[start:end]!r}")]
    elif not occurs_verbatim(cit["text"], text):
        return [("text", "does not occur verbatim in the review (rule: recframe.conversational.textnorm)")]
    return []


def validate_release(folder: str | Path) -> list[Issue]:
    """Every :class:`Issue` of the release in ``folder`` (empty list: valid)."""
    folder = Path(folder)
    issues: list[Issue] = []
    for name in FILES.values():
        if not (folder / name).is_file():
            issues.append(
                Issue(
                    name,
                    0,
                    "<file>",
                    f"missing: {folder / name} (a release holds {', '.join(FILES.values())})",
                )
            )
    if issues:
        return issues
    pois, reviews = _validated(folder, "pois", canonical_poi, check_poi, issues, key="poi_id")
    poi_ids = set(pois)
    reviews, _ = _validated(
        folder, "reviews", canonical_review, lambda o: check_review(o, poi_ids), issues, key="review_id"
    )
    _validated(
        folder,
        "dialogues",
        lambda o: o,
        lambda o: check_dialogue(o, poi_ids, reviews),
        issues,
        key="dialogue_id",
    )
    lexicon = folder / "lexicon.json"
    if lexicon.is_file():
        try:
            parsed = json.loads(lexicon.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            issues.append(Issue("lexicon.json", exc.lineno, "<json>", f"not valid JSON ({exc.msg})"))
        else:
            issues += [Issue("lexicon.json", 0, f, m) for f, m in check_lexicon(parsed)]
    return issues


def check_lexicon(obj: Any) -> list[tuple[str, str]]:
    """``(field, message)`` for a lexicon that is not ``{aspect: {value: [phrase, ...]}}``."""
    if not isinstance(obj, dict):
        return [("<file>", "must be an object aspect -> {value: [phrases]}")]
    errs = []
    for aspect, values in obj.items():
        if not isinstance(values, dict):
            errs.append((aspect, "must be an object value -> [phrases]"))
            continue
        errs += [
            (f"{aspect}.{v}", "must be a list of non-empty phrase strings")
            for v, ph in values.items()
            if not isinstance(ph, list) or not all(_is_str(p) for p in ph)
        ]
    return errs


def _validated(
    folder: Path, kind: str, canon: Any, check: Any, issues: list[Issue], key: str
) -> tuple[dict[str, dict[str, Any]], list[int]]:
    """Canonical records of one file by ``key`` (valid ones only); appends issues (incl. duplicate ids)."""
    name = FILES[kind]
    out: dict[str, dict[str, Any]] = {}
    lines: list[int] = []
    for number, obj, err in read_jsonl(folder / name):
        if err is not None:
            issues.append(Issue(name, number, "<json>", err))
            continue
        obj = canon(obj) if isinstance(obj, dict) else obj
        found = check(obj)
        issues += [Issue(name, number, f, m) for f, m in found]
        if found:
            continue
        if obj[key] in out:
            issues.append(Issue(name, number, key, f"duplicate id {obj[key]!r}"))
            continue
        out[obj[key]] = obj
        lines.append(number)
    return out, lines
