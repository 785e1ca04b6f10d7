"""Exact discrete optimal transport (POT network simplex) for a lower or an upper bound, with potentials.

For two discrete laws ``mu = sum_k a_k delta_{ya_k}`` (treated outcome) and
``nu = sum_l b_l delta_{yb_l}`` (control outcome) the sharp bounds on
``E[c(Y1, Y0)]`` over all couplings are::

    lower = min_pi sum pi_kl c_kl = OT_c(mu, nu),     upper = max_pi ... = -OT_{-c}(mu, nu),

both solved exactly by ``ot.emd``. Besides the value, the inference step needs
the bound's first-order sensitivity to the two laws, which is the pair of
Kantorovich potentials ``(f, g)``: ``bound = sum a_k f(ya_k) + sum b_l g(yb_l)``
and perturbing ``mu`` in direction ``h`` moves the bound by ``int f dh``.
The dual variables of the network simplex are only determined on the support
and up to degenerate directions, so they are made canonical by one double
c-transform, which also defines ``f`` and ``g`` at any new point (the value of
an observation that was smoothed away, a grid point with zero mass)::

    g(z) = s * min_k [s c(ya_k, z) - s f_k],   f(y) = s * min_l [s c(y, yb_l) - s g_l],

with ``s = +1`` for the lower bound and ``s = -1`` for the upper one.

Solver input. The network simplex is handed ``m - min(m)`` (``m = s c``), never a
matrix with negative entries: POT's simplex sizes its artificial start arcs from
the largest cost, so with ``m = -c <= 0`` (every upper bound of a non-negative
cost) those arcs can be cheaper than real paths, survive in the final basis and
make POT report "Problem infeasible" with an all-zero plan. A constant shift
changes no coupling's ranking (every plan has total mass 1), so the plan is the
same and the value is recomputed from the original cost. Any solver status other
than optimal, or a plan whose marginals are not ``a`` and ``b``, raises
``RuntimeError``: a failed solve must never pass for a bound.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import ot

from causal_ext.partial_id.costs import Cost, cost_matrix

__all__ = ["Transport", "solve_bound"]

_MAX_ITER = 10_000_000
_MARGINAL_TOL = 1e-7


@dataclass(frozen=True)
class Transport:
    """Solved bound between two discrete laws (support points with positive mass only).

    Attributes:
        value: the bound (min for ``sense=+1``, max for ``sense=-1``).
        sense: +1 lower bound, -1 upper bound.
        ya, a, f: treated support, masses and potential values there.
        yb, b, g: control support, masses and potential values there.
        plan: optimal coupling ``(len(ya), len(yb))``.
        cost: the cost function used.
    """

    value: float
    sense: int
    ya: np.ndarray
    a: np.ndarray
    f: np.ndarray
    yb: np.ndarray
    b: np.ndarray
    g: np.ndarray
    plan: np.ndarray
    cost: Cost

    def f_at(self, y: np.ndarray) -> np.ndarray:
        """Treated-side potential at arbitrary outcomes (c-transform of ``g``)."""
        s = self.sense
        c = cost_matrix(self.cost, np.asarray(y, float), self.yb)
        return s * np.min(s * c - s * self.g[None, :], axis=1)

    def g_at(self, y: np.ndarray) -> np.ndarray:
        """Control-side potential at arbitrary outcomes (c-transform of ``f``)."""
        s = self.sense
        c = cost_matrix(self.cost, self.ya, np.asarray(y, float))
        return s * np.min(s * c - s * self.f[:, None], axis=0)


def _positive(y: np.ndarray, w: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    y, w = np.asarray(y, float).ravel(), np.asarray(w, float).ravel()
    if y.shape != w.shape:
        raise ValueError(f"{name}: {len(y)} support points but {len(w)} masses")
    if np.any(w < 0) or not np.isfinite(w).all() or w.sum() <= 0:
        raise ValueError(f"{name}: masses must be finite, non-negative and not all zero")
    keep = w > 0
    return y[keep], w[keep] / w[keep].sum()


def _check_solved(plan: np.ndarray, log: dict, a: np.ndarray, b: np.ndarray, sense: int) -> None:
    """Raise unless POT reports an optimal solve and the plan's marginals are ``a`` and ``b``."""
    bound = "lower" if sense == 1 else "upper"
    shape = f"{len(a)} x {len(b)}"
    if log.get("result_code") != 1 or log.get("warning"):
        raise RuntimeError(f"ot.emd failed on the {bound} bound ({shape} problem): {log.get('warning')!r} "
                           f"(result code {log.get('result_code')}); the bound would be meaningless. "
                           "Please report this with the inputs that caused it.")
    err = max(np.abs(plan.sum(axis=1) - a).max(), np.abs(plan.sum(axis=0) - b).max())
    if not err <= _MARGINAL_TOL:
        raise RuntimeError(f"ot.emd returned a plan for the {bound} bound ({shape} problem) whose marginals "
                           f"miss the laws by {err:.3g} (> {_MARGINAL_TOL}); the bound would be meaningless")


def solve_bound(ya: np.ndarray, a: np.ndarray, yb: np.ndarray, b: np.ndarray, cost: Cost,
                sense: int) -> Transport:
    """Exact lower (``sense=+1``) or upper (``sense=-1``) bound on ``E[c(Y1, Y0)]`` with potentials.

    ``a`` and ``b`` are normalised to probability vectors; points with zero mass
    are dropped before solving (the potentials are still defined there through
    :meth:`Transport.f_at` / :meth:`Transport.g_at`).

    Raises:
        RuntimeError: when the network simplex does not reach an optimal solution
            (infeasible, unbounded or out of iterations) or its plan misses the marginals.
    """
    if sense not in (1, -1):
        raise ValueError(f"sense={sense} must be +1 (lower bound) or -1 (upper bound)")
    ya, a = _positive(ya, a, "treated law")
    yb, b = _positive(yb, b, "control law")
    c = cost_matrix(cost, ya, yb)
    m = sense * c
    shifted = m - m.min()                      # non-negative costs for the simplex (module docstring)
    with warnings.catch_warnings():            # POT also warns on failure; the check below raises instead
        warnings.simplefilter("ignore", UserWarning)
        plan, log = ot.emd(a, b, shifted, numItermax=_MAX_ITER, log=True)
    _check_solved(plan, log, a, b, sense)
    # canonical potentials by a double c-transform of the simplex duals (for the min problem on m; the
    # duals of the shifted problem are duals of m up to the constant, which the transform absorbs)
    u = np.asarray(log["u"], float)
    v = np.min(m - u[:, None], axis=0)
    u = np.min(m - v[None, :], axis=1)
    value = float(np.sum(plan * c))
    return Transport(value=value, sense=sense, ya=ya, a=a, f=sense * u, yb=yb, b=b, g=sense * v,
                     plan=plan, cost=cost)
