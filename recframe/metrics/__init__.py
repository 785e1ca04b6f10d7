"""Full-ranking evaluation: pessimistic ranks, metric families (standard, signed, coverage, ...) and a
streaming evaluator.

See :mod:`recframe.metrics.ranking` for the ranking conventions (padding, masking, ties).
"""

from recframe.metrics.evaluator import SHORTHAND_METRICS, FullRankingEvaluator, evaluate
from recframe.metrics.families import (
    DislikedHitsFamily,
    EvalChunk,
    ItemCoverageFamily,
    MetricFamily,
    SignedFamily,
    StandardFamily,
)
from recframe.metrics.ranking import (
    STANDARD_METRICS,
    NonFiniteScoresError,
    check_finite_scores,
    eligible_mask,
    standard_metrics,
    target_ranks,
    topk_items,
)
from recframe.metrics.signed import SIGNED_METRICS, disliked_hits, signed_metrics, signed_user_masks

__all__ = [
    "DislikedHitsFamily",
    "EvalChunk",
    "FullRankingEvaluator",
    "ItemCoverageFamily",
    "MetricFamily",
    "NonFiniteScoresError",
    "SHORTHAND_METRICS",
    "SIGNED_METRICS",
    "STANDARD_METRICS",
    "SignedFamily",
    "StandardFamily",
    "check_finite_scores",
    "disliked_hits",
    "eligible_mask",
    "evaluate",
    "signed_metrics",
    "signed_user_masks",
    "standard_metrics",
    "target_ranks",
    "topk_items",
]
