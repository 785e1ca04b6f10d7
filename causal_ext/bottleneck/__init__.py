"""Structural causal bottleneck models (SCBMs): simulation, bottleneck estimation, effect estimation.

An SCBM is a structural causal model ``X_j := m_j(b_j(X_pa(j)), N_j)`` whose
mechanisms read their (high-dimensional) parents only through low-dimensional
bottlenecks ``b_j``. This package provides

* :class:`SCBM` / :class:`Node` — a simulator for linear-bottleneck SCBMs (linear or
  ``tanh`` mechanisms, latent nodes) with closed-form effects, and ready-made
  scenarios in :mod:`~causal_ext.bottleneck.scenarios`;
* :class:`ReducedRankBottleneck` — bottleneck estimation up to bijection by
  reduced-rank regression, rank chosen by a singular-value threshold or
  cross-validation (:func:`select_rank`); :func:`bottleneck_alignment` measures recovery;
* :class:`NeuralBottleneck` — a nonlinear bottleneck ``b(x)`` learned by a small network that
  predicts the child through a ``k``-unit layer;
* effect estimation with the three adjustment strategies:
  :class:`TwoStageLeastSquares` (IV; naïve 2SLS on high-dimensional ``X`` is detected
  as not identified, 2SLS on ``b(X)`` identifies the effect),
  :class:`MediationEffect` (through ``b(M)``) and :class:`BackdoorAdjustment`
  (on ``b(C)``), each with a functional core, and :class:`PartiallyLinearBackdoor`
  (cross-fitted partialling out through a learned, possibly nonlinear, bottleneck);
* :func:`monte_carlo` / :func:`summarize` for variance comparisons over replicates.

Reference: S. Bing, J. Wahl, J. Runge, "Structural causal bottleneck models" (2026).
"""

from causal_ext.bottleneck.backdoor import BackdoorAdjustment, adjusted_effect, theoretical_backdoor_variance
from causal_ext.bottleneck.efficiency import ArmSummary, monte_carlo, summarize
from causal_ext.bottleneck.iv import (
    NotIdentifiedError,
    TwoStageLeastSquares,
    first_stage_rank,
    two_stage_least_squares,
)
from causal_ext.bottleneck.mediation import MediationEffect, product_of_coefficients
from causal_ext.bottleneck.neural import NeuralBottleneck
from causal_ext.bottleneck.partial_linear import PartiallyLinearBackdoor, partialling_out
from causal_ext.bottleneck.rank import RankSelection, numerical_rank, select_rank
from causal_ext.bottleneck.reduced_rank import ReducedRankBottleneck
from causal_ext.bottleneck.rrr import reduced_rank_regression
from causal_ext.bottleneck.scenarios import (
    Scenario,
    backdoor_scenario,
    iv_scenario,
    mechanism_scenario,
    mediation_scenario,
    nonlinear_backdoor_scenario,
)
from causal_ext.bottleneck.scm import SCBM, Node
from causal_ext.bottleneck.subspace import (
    bottleneck_alignment,
    canonical_correlations,
    linear_bijection,
    nonlinear_alignment,
    principal_angles,
)

__all__ = [
    "SCBM", "Node", "Scenario", "iv_scenario", "backdoor_scenario", "mediation_scenario",
    "mechanism_scenario", "ReducedRankBottleneck", "reduced_rank_regression", "select_rank",
    "RankSelection", "numerical_rank", "bottleneck_alignment", "canonical_correlations",
    "principal_angles", "linear_bijection", "TwoStageLeastSquares", "two_stage_least_squares",
    "first_stage_rank", "NotIdentifiedError", "BackdoorAdjustment", "adjusted_effect",
    "theoretical_backdoor_variance", "MediationEffect", "product_of_coefficients", "ArmSummary",
    "monte_carlo", "summarize", "NeuralBottleneck", "PartiallyLinearBackdoor", "partialling_out",
    "nonlinear_backdoor_scenario", "nonlinear_alignment",
]
