"""Bounds averaged over covariate cells, and their influence-function (delta-method) confidence intervals.

Every estimator in this package reduces to the same computation: the covariate
space is cut into cells ``g`` (one cell when there are no covariates), each cell
carries an estimate of the two conditional laws ``mu_g ~ Y1 | X in g`` and
``nu_g ~ Y0 | X in g``, and the bound is the average over the pooled units of
their cell's OT bound::

    theta_hat = (1/n) sum_i V_{g(i)},    V_g = OT_{+-c}(mu_g, nu_g)   (lower / upper).

Averaging over the *pooled* units (treated and controls) is averaging over the
covariate law of the whole population, which is what ``E_X[...]`` means under
unconfoundedness even when the two groups' covariate laws differ.

Inference. Under unconfoundedness the bound ``theta = E_X[OT(P(Y1|X), P(Y0|X))]``
has the influence function (delta method with the Kantorovich potentials
``f_x, g_x`` as the derivative of OT in each marginal; for the quadratic cost
and laws with densities they are unique up to constants, which is the stability
result the normal approximation rests on)::

    psi(X, T, Y) = [V(X) - theta]
                 + T / e(X) * [f_X(Y) - E(f_X(Y1) | X)]
                 + (1 - T) / (1 - e(X)) * [g_X(Y) - E(g_X(Y0) | X)],

with ``e(X) = P(T = 1 | X)``. The plug-in variance is the mean of ``psi_i^2``
over units with every population quantity replaced by its cell estimate (the
cell's propensity ``e_g``, its solved potentials evaluated at each unit's own
outcome by c-transform, and the potentials' means under the cell laws), and the
interval is ``theta_hat +- z_{1-alpha/2} sd(psi) / sqrt(n)``. With one cell
this is the familiar two-sample variance ``Var f(Y1)/n1 + Var g(Y0)/n0``.

The outer ends of the two (1 - alpha) intervals, ``[ci_lower_lo, ci_upper_hi]``,
cover the whole identified set with probability at least ``1 - alpha``
asymptotically (each end errs with probability alpha/2; union bound).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from causal_ext.partial_id.costs import Cost
from causal_ext.partial_id.transport import Transport, solve_bound

__all__ = ["CellBounds", "CellLaws", "bounds_over_cells"]


@dataclass(frozen=True)
class CellLaws:
    """Estimated conditional laws of ``Y1`` and ``Y0`` in one covariate cell.

    Attributes:
        ya, a: treated-outcome support and masses.
        yb, b: control-outcome support and masses.
        propensity: estimated ``P(T = 1 | X in cell)``, strictly between 0 and 1.
    """

    ya: np.ndarray
    a: np.ndarray
    yb: np.ndarray
    b: np.ndarray
    propensity: float


@dataclass(frozen=True)
class CellBounds:
    """Result of :func:`bounds_over_cells`.

    Attributes:
        lower, upper: averaged bounds.
        se: standard errors of ``(lower, upper)`` from the influence function.
        ci: ``(2, 2)`` array, row 0 the interval for the lower bound, row 1 for the upper.
        mean_difference: averaged ``E(Y1 | cell) - E(Y0 | cell)`` (the identified average effect).
        cell_lower, cell_upper: per-cell bounds (NaN for unsupported cells).
        influence: ``(n_used, 2)`` influence values of the used units.
        used: boolean mask of the units whose cell was supported.
    """

    lower: float
    upper: float
    se: np.ndarray
    ci: np.ndarray
    mean_difference: float
    cell_lower: np.ndarray
    cell_upper: np.ndarray
    influence: np.ndarray
    used: np.ndarray


def _unit_terms(tr: Transport, laws: CellLaws, y: np.ndarray, treated: np.ndarray) -> np.ndarray:
    """Per-unit outcome part of the influence function in one cell."""
    out = np.zeros(len(y))
    e = laws.propensity
    if treated.any():
        out[treated] = (tr.f_at(y[treated]) - tr.a @ tr.f) / e
    if (~treated).any():
        out[~treated] = (tr.g_at(y[~treated]) - tr.b @ tr.g) / (1.0 - e)
    return out


def bounds_over_cells(laws: list[CellLaws | None], unit_cell: np.ndarray, y: np.ndarray,
                      treated: np.ndarray, cost: Cost, alpha: float) -> CellBounds:
    """Average the per-cell OT bounds over units and attach influence-function intervals.

    Args:
        laws: per cell, the estimated conditional laws, or ``None`` for a cell where
            one of the two laws could not be estimated (its units are left out).
        unit_cell: ``(n,)`` cell index of every pooled unit.
        y: ``(n,)`` observed outcome of every pooled unit.
        treated: ``(n,)`` boolean treatment indicator.
        cost: the cost function.
        alpha: interval level ``1 - alpha``.
    """
    unit_cell = np.asarray(unit_cell, dtype=int)
    treated = np.asarray(treated, dtype=bool)
    y = np.asarray(y, dtype=float)
    n_cells = len(laws)
    cell_val = np.full((n_cells, 2), np.nan)
    cell_md = np.full(n_cells, np.nan)
    unit_part = np.zeros((len(y), 2))
    order = np.argsort(unit_cell, kind="stable")
    starts = np.searchsorted(unit_cell[order], np.arange(n_cells + 1))
    for g, law in enumerate(laws):
        members = order[starts[g]:starts[g + 1]]
        if law is None or len(members) == 0:
            continue
        for col, sense in enumerate((1, -1)):
            tr = solve_bound(law.ya, law.a, law.yb, law.b, cost, sense)
            cell_val[g, col] = tr.value
            unit_part[members, col] = _unit_terms(tr, law, y[members], treated[members])
        cell_md[g] = (law.a @ law.ya) / law.a.sum() - (law.b @ law.yb) / law.b.sum()
    used = ~np.isnan(cell_val[unit_cell, 0])
    if not used.any():
        raise ValueError("no covariate cell has both treated and control outcomes; "
                         "check that x1 and x0 overlap (positivity) or use coarser cells")
    vals = cell_val[unit_cell[used]]
    theta = vals.mean(axis=0)
    influence = (vals - theta) + unit_part[used]
    n_used = int(used.sum())
    se = np.sqrt(np.mean(influence**2, axis=0) / n_used)
    z = norm.ppf(1.0 - alpha / 2.0)
    ci = np.stack([theta - z * se, theta + z * se], axis=1)
    return CellBounds(lower=float(theta[0]), upper=float(theta[1]), se=se, ci=ci,
                      mean_difference=float(np.mean(cell_md[unit_cell[used]])),
                      cell_lower=cell_val[:, 0], cell_upper=cell_val[:, 1], influence=influence, used=used)
