"""TRACE metrics at one evaluation point (a system recommend turn), grouped as Accuracy, Grounding, Recovery.

Notation at an evaluation point: ``r = (r_1, r_2, ...)`` the system's ranking of the candidates,
``y`` the dialogue's target, ``S`` the aspects the user has stated so far (``{aspect: value}``, a later
statement of an aspect replaces an earlier one), ``R`` the POIs rejected so far, ``C`` the citations,
``p = r_1`` the recommended POI.

**Accuracy** (every evaluation point)

- ``recall@k = 1[y in r_1..r_k]`` over the closed candidate set (one target, so Recall@k = HitRate@k).
- ``aspect_satisfaction = |{a in S : attr(p, a) = S[a]}| / |S|`` over the stated aspects that ``p`` has an
  attribute for (undefined when none).

**Grounding** (every evaluation point). A citation ``c`` is *verbatim* when its review exists, is a review
of ``p``, and its text occurs verbatim in it (:mod:`recframe.conversational.textnorm`). It is *relevant*
when its text mentions a stated value: a lexicon phrase of some ``(a, S[a])`` occurs in it (case-folded,
whole words; a value without lexicon entry is its own phrase).

- ``citation_precision = |{c verbatim}| / |C|`` (0 when ``C`` is empty: nothing can be verified).
- ``citation_density = |{c verbatim}|``: verifiable citations per recommendation.
- ``span_aspect_relevance = |{c relevant}| / |C|`` (0 when ``C`` is empty).
- ``aspect_coverage = |{a in S : some c verbatim and relevant to (a, S[a])}| / |S|``.
- ``grounding_score = 2 G V / (G + V)`` with ``G = |{c verbatim and relevant}| / |C|`` (grounded
  precision) and ``V`` the aspect coverage; 0 when either is 0. It rewards citing only verifiable,
  on-topic evidence (``G``) for every stated preference (``V``), and is what
  :mod:`recframe.conversational.stats` correlates with planted citation correctness.

**Recovery** (evaluation points whose previous user turn rejected a recommendation)

- ``success_after_rejection = 1[r_1 = y]``.
- ``turns_to_recovery = min(rank(y), cap + 1)``, ``rank(y)`` the 1-based position of ``y`` in ``r``
  (missing: ``cap + 1``): the recommendations the traveller sits through if they reject each wrong one
  and the system walks down its ranking; re-offering a rejected POI costs a turn. ``cap`` defaults to 10.
- ``repeat_rejected_rate = 1[r_1 in R]``.

A dialogue's value of a metric is its mean over the dialogue's evaluation points where the metric is
defined; the benchmark value is the mean over dialogues (dialogues without a rejection have no Recovery
values).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from recframe.conversational.schema import POI, Dialogue, Review
from recframe.conversational.textnorm import normalize
from recframe.conversational.view import Prediction

__all__ = [
    "FAMILIES",
    "LOWER_IS_BETTER",
    "TurnContext",
    "turn_context",
    "AspectMatcher",
    "accuracy_metrics",
    "grounding_metrics",
    "recovery_metrics",
    "turn_metrics",
    "check_prediction",
    "metric_names",
]

DEFAULT_KS = (1, 5, 10)
DEFAULT_CAP = 10
LOWER_IS_BETTER = frozenset({"turns_to_recovery", "repeat_rejected_rate"})


def metric_names(ks: Sequence[int] = DEFAULT_KS) -> dict[str, tuple[str, ...]]:
    """Metric names by family, in table order."""
    return {
        "Accuracy": (*(f"recall@{k}" for k in ks), "aspect_satisfaction"),
        "Grounding": (
            "citation_precision",
            "citation_density",
            "span_aspect_relevance",
            "aspect_coverage",
            "grounding_score",
        ),
        "Recovery": ("success_after_rejection", "turns_to_recovery", "repeat_rejected_rate"),
    }


FAMILIES = metric_names()


@dataclass(frozen=True)
class TurnContext:
    """Evaluator-side truth at one evaluation point (never given to a system)."""

    target: str
    stated: dict[str, str]
    rejected: tuple[str, ...]
    after_rejection: bool


def turn_context(dialogue: Dialogue, turn_index: int) -> TurnContext:
    """Target, stated aspects, rejected POIs and whether a rejection just happened, before ``turn_index``."""
    stated: dict[str, str] = {}
    rejected: list[str] = []
    last_user = None
    turns = dialogue.turns[:turn_index]
    for k, turn in enumerate(turns):
        if turn.role == "user":
            stated.update(turn.aspects)
            last_user = turn.act
            if turn.act == "reject" and k > 0 and turns[k - 1].poi_id is not None:
                rejected.append(turns[k - 1].poi_id)
    return TurnContext(dialogue.target, stated, tuple(rejected), last_user == "reject")


class AspectMatcher:
    """Which stated ``(aspect, value)`` a span mentions, by lexicon phrases (case-folded, whole words)."""

    def __init__(self, lexicon: Mapping[str, Mapping[str, Sequence[str]]] | None = None) -> None:
        self.lexicon = lexicon or {}
        self._cache: dict[tuple[str, str], re.Pattern[str]] = {}

    def pattern(self, aspect: str, value: str) -> re.Pattern[str]:
        key = (aspect, value)
        if key not in self._cache:
            phrases = list(self.lexicon.get(aspect, {}).get(value, ())) or [value.replace("_", " ")]
            alts = "|".join(re.escape(normalize(p).casefold()) for p in phrases if normalize(p))
            self._cache[key] = re.compile(rf"(?<!\w)(?:{alts})(?!\w)")
        return self._cache[key]

    def mentions(self, span: str, aspect: str, value: str) -> bool:
        """Whether ``span`` mentions ``aspect=value``."""
        return self.pattern(aspect, value).search(normalize(span).casefold()) is not None


def check_prediction(pred: Prediction, candidates: Sequence[str], system: str = "system") -> None:
    """ValueError unless ``pred.ranking`` holds distinct candidate ids."""
    cands = set(candidates)
    bad = [p for p in pred.ranking if p not in cands]
    if bad:
        raise ValueError(
            f"{system} ranked {bad[:3]} which are not candidates of the dialogue; rank only view.candidates."
        )
    if len(set(pred.ranking)) != len(pred.ranking):
        raise ValueError(f"{system} ranked a candidate twice; a ranking holds each candidate at most once.")


def accuracy_metrics(
    pred: Prediction, ctx: TurnContext, pois: Mapping[str, POI], ks: Sequence[int] = DEFAULT_KS
) -> dict[str, float]:
    """Recall@k and aspect satisfaction (module docstring)."""
    out = {f"recall@{k}": float(ctx.target in pred.ranking[:k]) for k in ks}
    out["aspect_satisfaction"] = math.nan
    if pred.ranking:
        attrs = pois[pred.ranking[0]].attributes
        judged = [a for a in ctx.stated if a in attrs]
        if judged:
            out["aspect_satisfaction"] = sum(attrs[a] == ctx.stated[a] for a in judged) / len(judged)
    return out


def grounding_metrics(
    pred: Prediction, ctx: TurnContext, reviews: Mapping[str, Review], matcher: AspectMatcher
) -> dict[str, float]:
    """Citation precision, density, span-aspect relevance, aspect coverage and Grounding Score."""
    cites = list(pred.citations)
    poi = pred.ranking[0] if pred.ranking else None
    verbatim = [_verbatim(c, poi, reviews) for c in cites]
    relevant_to = [{a for a, v in ctx.stated.items() if matcher.mentions(c.text, a, v)} for c in cites]
    n = len(cites)
    grounded = sum(1 for ok, rel in zip(verbatim, relevant_to) if ok and rel)
    covered = set().union(*(rel for ok, rel in zip(verbatim, relevant_to) if ok)) if n else set()
    coverage = len(covered) / len(ctx.stated) if ctx.stated else 0.0
    g = grounded / n if n else 0.0
    return {
        "citation_precision": sum(verbatim) / n if n else 0.0,
        "citation_density": float(sum(verbatim)),
        "span_aspect_relevance": sum(1 for rel in relevant_to if rel) / n if n else 0.0,
        "aspect_coverage": coverage,
        "grounding_score": 2 * g * coverage / (g + coverage) if g > 0 and coverage > 0 else 0.0,
    }


def _verbatim(cite, poi: str | None, reviews: Mapping[str, Review]) -> bool:  # noqa: ANN001
    review = reviews.get(cite.review_id)
    if review is None or review.poi_id != poi:
        return False
    needle = normalize(cite.text)
    return bool(needle) and needle in _normalized(review)


@lru_cache(maxsize=262_144)
def _normalized_text(text: str) -> str:
    return normalize(text)


def _normalized(review: Review) -> str:
    return _normalized_text(review.text)


def recovery_metrics(pred: Prediction, ctx: TurnContext, cap: int = DEFAULT_CAP) -> dict[str, float]:
    """Success after rejection, turns-to-recovery and repeat-of-rejected rate; empty unless
    ``ctx.after_rejection``."""
    if not ctx.after_rejection:
        return {}
    rank = pred.ranking.index(ctx.target) + 1 if ctx.target in pred.ranking else cap + 1
    top = pred.ranking[0] if pred.ranking else None
    return {
        "success_after_rejection": float(top == ctx.target),
        "turns_to_recovery": float(min(rank, cap + 1)),
        "repeat_rejected_rate": float(top in ctx.rejected),
    }


def turn_metrics(
    pred: Prediction,
    ctx: TurnContext,
    pois: Mapping[str, POI],
    reviews: Mapping[str, Review],
    matcher: AspectMatcher,
    ks: Sequence[int] = DEFAULT_KS,
    cap: int = DEFAULT_CAP,
) -> dict[str, float]:
    """Every metric defined at this evaluation point (NaN: undefined)."""
    return {
        **accuracy_metrics(pred, ctx, pois, ks),
        **grounding_metrics(pred, ctx, reviews, matcher),
        **recovery_metrics(pred, ctx, cap),
    }
