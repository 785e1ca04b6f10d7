"""Cost functions ``c(y1, y0)`` whose expectation under the unknown coupling is bounded.

A cost is a vectorised function of two broadcastable arrays (treated outcome,
control outcome) returning ``c(y1, y0)`` elementwise. Named costs:

* ``"quadratic"``: ``(y1 - y0)^2`` -- E is the second moment of the individual
  effect; minus the (identified) squared average effect it bounds ``Var(Y1 - Y0)``;
* ``"absolute"``: ``|y1 - y0|``;
* ``"greater"``: ``1{y1 > y0}`` -- E is ``P(Y1 > Y0)``, the share who benefit
  (its OT bounds are the Makarov bounds).

Any other quantity ``E[c(Y1, Y0)]`` is obtained by passing a callable.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["COSTS", "Cost", "cost_matrix", "resolve_cost"]

Cost = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _quadratic(y1: np.ndarray, y0: np.ndarray) -> np.ndarray:
    return (y1 - y0) ** 2


def _absolute(y1: np.ndarray, y0: np.ndarray) -> np.ndarray:
    return np.abs(y1 - y0)


def _greater(y1: np.ndarray, y0: np.ndarray) -> np.ndarray:
    return (y1 > y0).astype(float)


COSTS: dict[str, Cost] = {"quadratic": _quadratic, "absolute": _absolute, "greater": _greater}


def resolve_cost(cost: str | Cost) -> Cost:
    """The cost function for a name in :data:`COSTS` or a callable (returned as is)."""
    if callable(cost):
        return cost
    if cost not in COSTS:
        raise ValueError(f"cost={cost!r} is unknown; use one of {sorted(COSTS)} or a callable c(y1, y0)")
    return COSTS[cost]


def cost_matrix(cost: Cost, y1: np.ndarray, y0: np.ndarray) -> np.ndarray:
    """``C[k, l] = c(y1[k], y0[l])`` as a float array (checked finite)."""
    m = np.asarray(cost(np.asarray(y1, float)[:, None], np.asarray(y0, float)[None, :]), dtype=float)
    if m.shape != (len(y1), len(y0)):
        raise ValueError(f"cost returned shape {m.shape}, expected {(len(y1), len(y0))}: "
                         "the callable must broadcast c(y1[:, None], y0[None, :])")
    if not np.all(np.isfinite(m)):
        raise ValueError("cost returned non-finite values; check the cost callable and the outcomes")
    return m
