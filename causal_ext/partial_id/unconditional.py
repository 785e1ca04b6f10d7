"""Sharp bounds from the two outcome marginals alone (exact OT between the empirical laws)."""

from __future__ import annotations

import numpy as np

from causal_ext.partial_id._inputs import check_alpha, check_outcomes
from causal_ext.partial_id.base import BoundsEstimator
from causal_ext.partial_id.cells import CellBounds, CellLaws, bounds_over_cells
from causal_ext.partial_id.costs import Cost, resolve_cost

__all__ = ["OTBounds", "ot_bounds"]


def ot_bounds(y1: np.ndarray, y0: np.ndarray, cost: str | Cost = "quadratic",
              alpha: float = 0.05) -> CellBounds:
    """Functional core of :class:`OTBounds`: bounds, standard errors and intervals."""
    y1, y0 = check_outcomes(y1, y0)
    n1, n0 = len(y1), len(y0)
    laws = [CellLaws(ya=y1, a=np.full(n1, 1.0 / n1), yb=y0, b=np.full(n0, 1.0 / n0),
                     propensity=n1 / (n1 + n0))]
    y = np.concatenate([y1, y0])
    treated = np.r_[np.ones(n1, bool), np.zeros(n0, bool)]
    return bounds_over_cells(laws, np.zeros(len(y), int), y, treated, resolve_cost(cost), check_alpha(alpha))


class OTBounds(BoundsEstimator):
    """Sharp bounds on ``E[c(Y1, Y0)]`` given only the laws of ``Y1`` and ``Y0``.

    Treated outcomes are a sample of ``Y1``'s law and control outcomes of
    ``Y0``'s law (randomised treatment, or after adjustment); every coupling of
    the two is compatible with the data, so the identified set of ``E[c]`` is
    ``[min_pi E_pi c, max_pi E_pi c]``. Both ends are solved exactly between the
    empirical laws with POT's network simplex (``ot.emd``; the maximum as
    ``-min`` of ``-c``). For the quadratic cost on the line they are the
    comonotone (sorted against sorted) and antitone couplings, e.g.
    ``(mu1 - mu0)^2 + (sigma1 -+ sigma0)^2`` for Gaussian marginals.

    Cost: time and memory are ``O(n1 n0)`` for the cost matrix (a few thousand
    units per arm is comfortable).

    Args:
        cost: ``"quadratic"``, ``"absolute"``, ``"greater"`` (``P(Y1 > Y0)``) or a
            callable ``c(y1, y0)`` that broadcasts (see :mod:`costs`).
        alpha: intervals have level ``1 - alpha`` (quadratic cost only).

    Fitted attributes: see :class:`~causal_ext.partial_id.base.BoundsEstimator`.
    """

    def __init__(self, cost: str | Cost = "quadratic", alpha: float = 0.05) -> None:
        self.cost = cost
        self.alpha = alpha

    def fit(self, y1: np.ndarray, y0: np.ndarray, x1: np.ndarray | None = None,
            x0: np.ndarray | None = None) -> OTBounds:
        """Solve both bounds. ``x1``/``x0`` are accepted for a common signature and not used."""
        self._store(ot_bounds(y1, y0, self.cost, self.alpha))
        return self
