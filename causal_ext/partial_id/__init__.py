"""Partial identification of ``E[c(Y1, Y0)]`` by (conditional) optimal transport.

The joint law of the potential outcomes is never observed, only its two
marginals (and, with covariates, the two conditional laws given ``X``), so a
quantity such as ``E[(Y1 - Y0)^2]``, ``Var(Y1 - Y0)`` or ``P(Y1 > Y0)`` is only
bounded; the sharp bounds are the min and max of ``E[c]`` over couplings,
i.e. optimal transport problems.

* :class:`OTBounds` -- unconditional bounds, exact OT between the empirical laws;
* :class:`ConditionalOTBounds` -- bounds given covariates (tighter), by the
  wavelet primal COT estimator with influence-function intervals;
* :class:`BinnedConditionalOTBounds` -- the k-NN-binned plug-in COT baseline;
* :func:`effect_variance_bounds` -- bounds on ``Var(Y1 - Y0)`` from a quadratic fit.
"""

from causal_ext.partial_id.base import BoundsEstimator, effect_variance_bounds
from causal_ext.partial_id.binned_cot import BinnedConditionalOTBounds, binned_cot_bounds
from causal_ext.partial_id.cells import CellBounds, CellLaws, bounds_over_cells
from causal_ext.partial_id.costs import COSTS, resolve_cost
from causal_ext.partial_id.transport import Transport, solve_bound
from causal_ext.partial_id.unconditional import OTBounds, ot_bounds
from causal_ext.partial_id.wavelet_cot import ConditionalOTBounds, wavelet_cot_bounds

__all__ = [
    "COSTS",
    "BinnedConditionalOTBounds",
    "BoundsEstimator",
    "CellBounds",
    "CellLaws",
    "ConditionalOTBounds",
    "OTBounds",
    "Transport",
    "binned_cot_bounds",
    "bounds_over_cells",
    "effect_variance_bounds",
    "ot_bounds",
    "resolve_cost",
    "solve_bound",
    "wavelet_cot_bounds",
]
