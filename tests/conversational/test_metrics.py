"""Each metric on the hand-built dialogue, values computed by hand (see the comments)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recframe.conversational.evaluate import EvalPoint, all_metric_names, per_dialogue
from recframe.conversational.metrics import (
    AspectMatcher,
    accuracy_metrics,
    check_prediction,
    grounding_metrics,
    recovery_metrics,
    turn_context,
    turn_metrics,
)
from recframe.conversational.schema import Citation
from recframe.conversational.view import Prediction, dialogue_view
from tests.conversational.fixtures import tiny_release

REL = tiny_release()
DLG = REL.dialogues[0]
MATCH = AspectMatcher(REL.lexicon)


def test_turn_context() -> None:
    first, after = turn_context(DLG, 1), turn_context(DLG, 3)
    assert first.stated == {"cuisine": "thai"} and first.rejected == () and not first.after_rejection
    assert after.stated == {"cuisine": "thai", "price": "cheap"} and after.rejected == ("B",)
    assert after.after_rejection and after.target == "A"


def test_accuracy_repeating_the_rejected_poi() -> None:
    ctx = turn_context(DLG, 3)
    out = accuracy_metrics(Prediction(("B", "A", "C")), ctx, REL.pois, ks=(1, 2, 3))
    # target A at rank 2; B is thai (ok) but expensive (stated cheap): 1 of 2 stated aspects
    assert out == {"recall@1": 0.0, "recall@2": 1.0, "recall@3": 1.0, "aspect_satisfaction": 0.5}
    assert accuracy_metrics(Prediction(("C",)), ctx, REL.pois, ks=(1,))["aspect_satisfaction"] == 0.5
    assert accuracy_metrics(Prediction(("A",)), ctx, REL.pois, ks=(1,)) == {
        "recall@1": 1.0,
        "aspect_satisfaction": 1.0,
    }


def test_grounding_by_hand() -> None:
    ctx = turn_context(DLG, 3)  # stated: thai, cheap; recommended: A
    cites = (
        Citation("rA1", "Prices are cheap here."),  # verbatim in A's review, mentions cheap
        Citation("rA2", "The pad thai was great."),  # verbatim, mentions thai
        Citation("rB1", "It is pricey."),  # verbatim but a review of B, not A; off-aspect
        Citation("rA1", "cheap  room"),
    )  # not in the review; mentions cheap
    out = grounding_metrics(Prediction(("A", "B"), cites), ctx, REL.reviews, MATCH)
    g, v = 2 / 4, 1.0  # grounded precision (verbatim and relevant), aspect coverage (thai and cheap covered)
    assert out == pytest.approx(
        {
            "citation_precision": 0.5,
            "citation_density": 2.0,
            "span_aspect_relevance": 0.75,
            "aspect_coverage": 1.0,
            "grounding_score": 2 * g * v / (g + v),
        }
    )


def test_grounding_partial_coverage_and_empty() -> None:
    ctx = turn_context(DLG, 3)
    one = grounding_metrics(Prediction(("A",), (Citation("rA2", "pad thai"),)), ctx, REL.reviews, MATCH)
    # G = 1, coverage = 1/2 -> F1 = 2/3
    assert one["grounding_score"] == pytest.approx(2 / 3) and one["aspect_coverage"] == 0.5
    none = grounding_metrics(Prediction(("A",)), ctx, REL.reviews, MATCH)
    assert none == {
        "citation_precision": 0.0,
        "citation_density": 0.0,
        "span_aspect_relevance": 0.0,
        "aspect_coverage": 0.0,
        "grounding_score": 0.0,
    }
    unknown = grounding_metrics(Prediction(("A",), (Citation("nope", "cheap"),)), ctx, REL.reviews, MATCH)
    assert unknown["citation_precision"] == 0.0 and unknown["span_aspect_relevance"] == 1.0


def test_relevance_is_whole_word_case_folded_and_lexicon_free_fallback() -> None:
    assert MATCH.mentions("So CHEAP!", "price", "cheap")
    assert not MATCH.mentions("cheapest", "price", "cheap")  # whole words only
    assert MATCH.mentions("an inexpensive lunch", "price", "cheap")
    assert AspectMatcher({}).mentions("great outdoor seating", "seating", "outdoor")
    assert AspectMatcher({}).mentions("free street parking", "parking", "street_parking")


def test_recovery_by_hand() -> None:
    ctx = turn_context(DLG, 3)
    assert recovery_metrics(Prediction(("B", "C", "A")), ctx) == {
        "success_after_rejection": 0.0,
        "turns_to_recovery": 3.0,
        "repeat_rejected_rate": 1.0,
    }
    assert recovery_metrics(Prediction(("A", "B")), ctx) == {
        "success_after_rejection": 1.0,
        "turns_to_recovery": 1.0,
        "repeat_rejected_rate": 0.0,
    }
    # target missing from a short ranking: cap + 1
    assert recovery_metrics(Prediction(("C",)), ctx, cap=2)["turns_to_recovery"] == 3.0
    assert recovery_metrics(Prediction(("A",)), turn_context(DLG, 1)) == {}  # no rejection yet


def test_per_dialogue_means_over_defined_points() -> None:
    names = all_metric_names((1,))
    points = [EvalPoint(0, t, dialogue_view(DLG, t), turn_context(DLG, t)) for t in DLG.recommend_turns()]
    preds = [Prediction(("B", "A", "C")), Prediction(("A", "C", "B"))]
    metrics = [
        turn_metrics(p, pt.context, REL.pois, REL.reviews, MATCH, ks=(1,)) for p, pt in zip(preds, points)
    ]
    out = per_dialogue(metrics, points, 1, names)
    assert out["recall@1"][0] == 0.5  # miss at turn 1, hit at turn 3
    assert out["success_after_rejection"][0] == 1.0  # only turn 3 is after a rejection
    assert out["aspect_satisfaction"][0] == 1.0  # B satisfies {thai}; A satisfies {thai, cheap}
    empty = per_dialogue([], [], 2, names)
    assert all(np.isnan(v).all() for v in empty.values())
    assert math.isnan(empty["recall@1"][1])


def test_check_prediction_refuses_non_candidates_and_repeats() -> None:
    with pytest.raises(ValueError, match="not candidates"):
        check_prediction(Prediction(("A", "Z")), DLG.candidates, "sys")
    with pytest.raises(ValueError, match="twice"):
        check_prediction(Prediction(("A", "A")), DLG.candidates, "sys")
