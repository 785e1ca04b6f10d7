"""Run systems over a release's evaluation points and aggregate metrics per dialogue.

An evaluation point is a system ``recommend`` turn (:meth:`Dialogue.recommend_turns`). For each, a
system gets :func:`~recframe.conversational.view.dialogue_view` and the evaluator keeps the
:class:`~recframe.conversational.metrics.TurnContext`; the two are built separately so nothing of the
context reaches a system.

With the generator's :class:`~recframe.conversational.generator.GroundTruth`, two checks of the Grounding
Score are available: :func:`probe_study` (the planted citation probes of the gold turns) and
:func:`planted_correctness` (a system's own citations judged against the sentences' planted meaning).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from recframe.conversational.baselines.base import System
from recframe.conversational.generator import GroundTruth
from recframe.conversational.metrics import (
    DEFAULT_CAP,
    DEFAULT_KS,
    AspectMatcher,
    TurnContext,
    check_prediction,
    grounding_metrics,
    metric_names,
    turn_context,
    turn_metrics,
)
from recframe.conversational.schema import Release
from recframe.conversational.textnorm import normalize
from recframe.conversational.view import Catalog, DialogueView, Prediction, dialogue_view

__all__ = [
    "EvalPoint",
    "evaluation_points",
    "run_system",
    "per_dialogue",
    "planted_correctness",
    "all_metric_names",
    "probe_study",
    "SystemRun",
]


@dataclass(frozen=True)
class EvalPoint:
    """One evaluation point: the system's view and the evaluator's context."""

    dialogue: int
    turn: int
    view: DialogueView
    context: TurnContext


def evaluation_points(release: Release) -> list[EvalPoint]:
    """Every system recommend turn of every dialogue, in order."""
    return [
        EvalPoint(d, t, dialogue_view(dlg, t), turn_context(dlg, t))
        for d, dlg in enumerate(release.dialogues)
        for t in dlg.recommend_turns()
    ]


@dataclass
class SystemRun:
    """A system's predictions and per-point metrics on one release."""

    name: str
    predictions: list[Prediction]
    metrics: list[dict[str, float]]
    seconds: float


def run_system(
    system: System,
    release: Release,
    points: Sequence[EvalPoint],
    *,
    catalog: Catalog | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    cap: int = DEFAULT_CAP,
    chunk: int = 256,
    progress: bool = True,
) -> SystemRun:
    """Fit ``system`` on the public catalogue, answer every point (in chunks) and score the answers."""
    start = time.perf_counter()
    system.fit(catalog or Catalog.from_release(release))
    system.prepare([p.view for p in points])
    preds: list[Prediction] = []
    bar = tqdm(total=len(points), desc=system.name, disable=not progress, leave=False)
    for lo in range(0, len(points), chunk):
        views = [p.view for p in points[lo : lo + chunk]]
        answers = system.predict_many(views)
        if len(answers) != len(views):
            raise ValueError(f"{system.name} returned {len(answers)} predictions for {len(views)} views.")
        for view, pred in zip(views, answers):
            check_prediction(pred, view.candidates, system.name)
        preds += answers
        bar.update(len(views))
    bar.close()
    seconds = time.perf_counter() - start
    matcher = AspectMatcher(release.lexicon)
    metrics = [
        turn_metrics(pred, p.context, release.pois, release.reviews, matcher, ks, cap)
        for pred, p in zip(preds, points)
    ]
    return SystemRun(system.name, preds, metrics, seconds)


def per_dialogue(
    metrics: Sequence[dict[str, float]], points: Sequence[EvalPoint], n_dialogues: int, names: Sequence[str]
) -> dict[str, np.ndarray]:
    """``{metric: [n_dialogues]}``: each dialogue's mean over its points where the metric is defined (NaN
    where it is defined at none)."""
    sums = {m: np.zeros(n_dialogues) for m in names}
    counts = {m: np.zeros(n_dialogues) for m in names}
    for values, point in zip(metrics, points):
        for m in names:
            v = values.get(m, math.nan)
            if math.isfinite(v):
                sums[m][point.dialogue] += v
                counts[m][point.dialogue] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return {m: np.where(counts[m] > 0, sums[m] / np.maximum(counts[m], 1), np.nan) for m in names}


def all_metric_names(ks: Sequence[int] = DEFAULT_KS) -> list[str]:
    """Every metric name, family by family."""
    return [m for fam in metric_names(ks).values() for m in fam]


def planted_correctness(
    pred: Prediction, context: TurnContext, release: Release, truth: GroundTruth
) -> float:
    """Fraction of ``pred``'s citations that are truly right (NaN without citations): the review is of the
    recommended POI, the span is verbatim in it and overlaps a sentence that asserts a stated
    ``aspect = value`` (:meth:`GroundTruth.supports`)."""
    if not pred.citations:
        return math.nan
    poi = pred.ranking[0] if pred.ranking else None
    good = 0
    for c in pred.citations:
        review = release.reviews.get(c.review_id)
        if (
            review is None
            or review.poi_id != poi
            or not normalize(c.text)
            or normalize(c.text) not in normalize(review.text)
        ):
            continue
        good += any(truth.supports(review, c.text, a, v) for a, v in context.stated.items())
    return good / len(pred.citations)


def probe_study(release: Release, truth: GroundTruth, points: Sequence[EvalPoint]) -> dict[str, np.ndarray]:
    """Grounding Score and planted correctness of each point's citation probe (gold POI recommended).

    Returns ``{"grounding_score", "citation_precision", "correct_fraction", "kind_accepted"}``;
    ``kind_accepted`` maps each probe
    kind to the fraction of its citations the verbatim rule accepted (re-encodings should be 1, the
    non-verbatim corruptions 0).
    """
    matcher = AspectMatcher(release.lexicon)
    gs, frac, prec = [], [], []
    accepted: dict[str, list[bool]] = {}
    for p in points:
        dlg = release.dialogues[p.dialogue]
        probe = truth.probes.get((dlg.dialogue_id, p.turn))
        if not probe:
            continue
        poi = dlg.turns[p.turn].poi_id
        cites = tuple(c for c, _, _ in probe)
        g = grounding_metrics(Prediction((poi,), cites), p.context, release.reviews, matcher)
        gs.append(g["grounding_score"])
        prec.append(g["citation_precision"])
        frac.append(sum(ok for _, ok, _ in probe) / len(probe))
        for c, _, kind in probe:
            review = release.reviews.get(c.review_id)
            ok = (
                review is not None
                and review.poi_id == poi
                and bool(normalize(c.text))
                and normalize(c.text) in normalize(review.text)
            )
            accepted.setdefault(kind, []).append(ok)
    return {
        "grounding_score": np.array(gs),
        "citation_precision": np.array(prec),
        "correct_fraction": np.array(frac),
        "kind_accepted": {k: float(np.mean(v)) for k, v in sorted(accepted.items())},
    }
