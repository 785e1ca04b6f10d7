"""Direct causes (parents) of a target by IndRM: residual independence, minimum residual variance.

Standalone: :class:`IndRM` (estimator) over the functional core in
:mod:`~causal_ext.parents.hsic` (HSIC test), :mod:`~causal_ext.parents.regressors`
(cross-fitted regressors) and :mod:`~causal_ext.parents.search` (selection rule
and subset searches).
"""

from causal_ext.parents.hsic import HSICResult, hsic_test
from causal_ext.parents.indrm import IndRM, indrm_parents
from causal_ext.parents.regressors import crossfit_residuals, make_regressor
from causal_ext.parents.search import (
    SetEvaluator,
    SetScore,
    exhaustive_search,
    greedy_search,
    reversible_members,
    select_set,
)

__all__ = [
    "HSICResult",
    "IndRM",
    "SetEvaluator",
    "SetScore",
    "crossfit_residuals",
    "exhaustive_search",
    "greedy_search",
    "hsic_test",
    "indrm_parents",
    "make_regressor",
    "reversible_members",
    "select_set",
]
