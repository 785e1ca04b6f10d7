"""Lag-aware temporal structure learning with partial-order priors (path prohibition on the summary graph).

DYNOTEARS (contemporaneous DAG ``W`` + lagged ``A_1..A_p``) where an order prior ``i < j`` becomes a
prohibition of every path ``j -> ... -> i`` on the normalised summary graph, enforced by a closed-form
reachability penalty with its own augmented-Lagrangian term. See :mod:`causal_ext.temporal.dynotears`
(learner), :mod:`~causal_ext.temporal.priors` (penalty), :mod:`~causal_ext.temporal.graphs` (exact
checks and repairs), :mod:`~causal_ext.temporal.simulate` (SVAR data) and
:mod:`~causal_ext.temporal.metrics` (SHD and friends).
"""

from causal_ext.temporal.dynotears import DYNOTEARS, DynotearsResult, fit_dynotears, lagged_design
from causal_ext.temporal.graphs import prior_violations, summary_weights, transitive_closure
from causal_ext.temporal.metrics import structure_metrics
from causal_ext.temporal.priors import (
    ancestral_pairs,
    close_priors,
    order_penalty,
    reachability,
    sample_order_priors,
)
from causal_ext.temporal.simulate import SVARData, simulate_regime_switching, simulate_svar

__all__ = [
    "DYNOTEARS", "DynotearsResult", "fit_dynotears", "lagged_design",
    "prior_violations", "summary_weights", "transitive_closure",
    "structure_metrics",
    "ancestral_pairs", "close_priors", "order_penalty", "reachability", "sample_order_priors",
    "SVARData", "simulate_regime_switching", "simulate_svar",
]
