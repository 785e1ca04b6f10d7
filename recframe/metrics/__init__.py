"""Full-ranking evaluation: pessimistic ranks, standard and signed metrics, and a streaming evaluator.

See :mod:`recframe.metrics.ranking` for the ranking conventions (padding, masking, ties).
"""

from recframe.metrics.evaluator import VALID_METRICS, FullRankingEvaluator, evaluate
from recframe.metrics.ranking import (
    STANDARD_METRICS,
    NonFiniteScoresError,
    check_finite_scores,
    eligible_mask,
    standard_metrics,
    target_ranks,
    topk_items,
)
from recframe.metrics.signed import SIGNED_METRICS, signed_metrics, signed_user_masks

__all__ = [
    "FullRankingEvaluator",
    "NonFiniteScoresError",
    "SIGNED_METRICS",
    "STANDARD_METRICS",
    "VALID_METRICS",
    "check_finite_scores",
    "eligible_mask",
    "evaluate",
    "signed_metrics",
    "signed_user_masks",
    "standard_metrics",
    "target_ranks",
    "topk_items",
]
