"""Shared estimator plumbing: fitted attributes and derived quantities."""

from __future__ import annotations

import numpy as np

from causal_ext.partial_id.cells import CellBounds
from causal_ext.partial_id.costs import Cost

__all__ = ["BoundsEstimator", "effect_variance_bounds"]


class BoundsEstimator:
    """Base of the bound estimators (scikit-learn contract: ``__init__`` stores, ``fit`` learns).

    Fitted attributes (set by ``fit``):
        lower_, upper_: estimated sharp lower and upper bounds on ``E[c(Y1, Y0)]``.
        se_: ``(2,)`` influence-function standard errors of ``(lower_, upper_)``, or
            ``None`` when the cost is not ``"quadratic"``.
        ci_: ``(2, 2)`` array, row 0 the ``1 - alpha`` interval for the lower bound,
            row 1 for the upper bound; ``None`` when the cost is not ``"quadratic"``.
        set_ci_: ``(ci_[0, 0], ci_[1, 1])``, an interval covering the whole identified
            set with asymptotic probability ``>= 1 - alpha``; ``None`` like ``ci_``.
        mean_difference_: estimated average effect ``E[Y1] - E[Y0]`` (identified).
        n_used_: number of pooled units whose covariate cell entered the average.

    Intervals are reported for the quadratic cost only: that is the case whose
    potentials are unique (Brenier) and for which the stability result behind the
    normal approximation holds. For indicator or absolute costs the potentials are
    not unique, OT is only directionally differentiable and neither the delta
    method nor the bootstrap is valid without modification. The same holds at a
    degenerate point of the quadratic cost: when the two conditional laws are
    equal the lower bound is 0, its potentials vanish, the estimate is of order
    ``1/n`` and always positive, and its interval is not a valid 95% interval.
    """

    cost: str | Cost
    alpha: float

    def _store(self, result: CellBounds) -> None:
        self.lower_ = result.lower
        self.upper_ = result.upper
        self.mean_difference_ = result.mean_difference
        self.n_used_ = int(result.used.sum())
        if isinstance(self.cost, str) and self.cost == "quadratic":
            self.se_ = result.se
            self.ci_ = result.ci
            self.set_ci_ = (float(result.ci[0, 0]), float(result.ci[1, 1]))
        else:
            self.se_ = self.ci_ = self.set_ci_ = None

    def _check_fitted(self) -> None:
        if not hasattr(self, "lower_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit(y1, y0, ...) first")

    @property
    def bounds_(self) -> tuple[float, float]:
        """``(lower_, upper_)``."""
        self._check_fitted()
        return self.lower_, self.upper_


def effect_variance_bounds(estimator: BoundsEstimator) -> tuple[float, float]:
    """Bounds on ``Var(Y1 - Y0)`` from a fitted quadratic-cost estimator.

    ``Var(Y1 - Y0) = E[(Y1 - Y0)^2] - (E[Y1] - E[Y0])^2`` and the average effect is
    identified, so the sharp bounds shift by its square. The lower end is clipped
    at 0 (a variance), which matters only through sampling error.
    """
    estimator._check_fitted()
    if not (isinstance(estimator.cost, str) and estimator.cost == "quadratic"):
        raise ValueError(f"effect_variance_bounds needs an estimator fitted with cost='quadratic', "
                         f"got cost={estimator.cost!r}")
    shift = estimator.mean_difference_**2
    return float(np.maximum(estimator.lower_ - shift, 0.0)), float(estimator.upper_ - shift)
