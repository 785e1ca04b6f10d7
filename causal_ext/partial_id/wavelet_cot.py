"""Conditional-OT bounds by the wavelet primal estimator (partial identification by conditional OT).

Covariates sharpen the bounds: under unconfoundedness the identified set of
``E[c(Y1, Y0)]`` is ``[E_X OT_c(P(Y1|X), P(Y0|X)), -E_X OT_{-c}(...)]``, which is
inside the unconditional one. The estimator is *primal*: it estimates the
conditional laws themselves, by smooth wavelet projection, and solves exact OT
between them, instead of fitting dual potentials.

Steps (``fit``):

1. Map the pooled covariates to ``[0, 1]`` per coordinate by their min and max,
   and the pooled outcomes to ``[0, 1]`` by their normal scores
   (``outcome_scale="normal_scores"``, the default) or their min and max.
2. For each arm, estimate the joint density of ``(X, Y)`` by the tensor-product
   wavelet projection of :mod:`wavelets` at levels ``level_x`` (covariates) and
   ``level_y`` (outcome), evaluated on a product grid: ``grid_x`` cell centres
   per covariate times ``grid_y`` equally spaced outcome points over ``[0, 1]``,
   i.e. the pooled sample's outcome range, mapped back to outcome units.
3. In covariate cell ``g`` the conditional law of the outcome is the grid row
   of the joint density, negative values (Daubechies scaling functions change
   sign) set to 0, normalised to a probability vector (the X-density cancels).
   The row masses estimate each arm's covariate density there, which gives the
   cell propensity ``e_g = n1 p1(x_g) / (n1 p1(x_g) + n0 p0(x_g))`` (clipped to
   ``[0.01, 0.99]``; it only enters the interval).
4. Solve the exact lower and upper OT bounds between the two rows of every
   cell that holds units (``ot.emd`` on a ``grid_y x grid_y`` cost matrix, cost
   in outcome units) and average them over the pooled units' cells, i.e. over
   the empirical covariate law of the population. Cells where either arm's
   density is 0 are skipped (no overlap) and not counted in ``n_used_``.
5. Influence-function interval (quadratic cost): :mod:`cells`.

Choices the abstract leaves open, and what is used:

* wavelet ``"db3"`` (3 vanishing moments): the projection keeps each sample's
  mean and variance, which the quadratic cost depends on most, and its bias is
  ``O(2^(-3j))`` for smooth densities; Haar (a histogram) is available and exact
  for piecewise-constant designs.
* resolution: the normal-reference form of the rate-optimal level,
  ``j = round(log2(1/scale) + log2(n) / (2 s + D))`` with ``D = d + 1``, ``n`` the
  smaller arm, ``s`` the wavelet's vanishing moments unless ``smoothness`` is
  given, and ``scale`` each block's spread given the other block (see
  ``_auto_levels``); capped at 6 (covariates) and 7 (outcome). Both levels can
  be fixed by hand.
* outcome scale: normal scores make the outcome's pooled law standard normal
  before min-max scaling, so the wavelet bandwidth does not depend on the
  sample's most extreme value. With min-max scaling of raw skewed outcomes one
  outlier stretches the unit interval and oversmooths the bulk (the
  ``minmax`` row of ``benchmarks/results/cot_coverage.md`` shows the cost on
  a log-normal design: upper-bound bias -0.12 against -0.05 at n = 4000; with
  the older clipped positive part the gap was larger, +0.16 against +0.07).
* the outcome grid is cut to the sample range and the estimate renormalised:
  the projection spills mass up to ``(2N - 1) 2^-j`` beyond the data, and with
  the quadratic cost that mass, placed past the extreme outcomes, biases the
  upper bound upwards (in a development run of the benchmark's Gaussian
  design, n = 1000, 40 data sets: upper-bound bias 0.29 uncut, 0.15 cut, se 0.38).
* grids: ``grid_x = 2^(level_x + max(0, 3 - d))`` cells per covariate (four per
  dyadic interval for one covariate, fewer in higher dimension to bound the
  number of OT solves) and ``grid_y = 4 * 2^level_y + 1`` outcome points.
* positive part: ``"shift"`` (default) replaces each row by its L2 projection onto
  non-negative rows of the same mass, ``max(p - xi, 0)`` (Glad, Hjort and Ushakov
  2003), instead of clipping ``max(p, 0)``. The negative lobes grow with the number
  of covariates (median share of a row's mass in a development run of the
  several-covariate design of ``benchmarks/cot_coverage.py``, n = 2000: 1% with one
  covariate, 4% with two, 5.5% with three); clipping hands that mass back to the
  tails, which widens both laws and biases the upper bound upwards (there, with
  three covariates: +0.79 clipped against +0.17 shifted, 10 data sets; the
  benchmark table has the full comparison).
* averaging over the empirical pooled covariate law rather than the smoothed
  density estimate: it is unbiased for ``E_X`` and gives the ``V(X) - theta``
  term of the influence function directly.

The bounds are invariant to one-to-one transforms of each covariate, so a
heavy-tailed covariate can be replaced by its ranks before fitting. Limits:
scalar, continuous outcomes (for discrete ones use the binned estimator); the
tensor basis grows like ``(2^j + 2N - 2)^(d+1)``, so this is for a handful of
covariates (a guard raises beyond 2,000,000 coefficients).
"""

from __future__ import annotations

import numpy as np

from causal_ext.partial_id._inputs import check_alpha, check_covariates, check_outcomes, pool
from causal_ext.partial_id.base import BoundsEstimator
from causal_ext.partial_id.cells import CellBounds, CellLaws, bounds_over_cells
from causal_ext.partial_id.costs import Cost, resolve_cost
from causal_ext.partial_id.wavelets import (
    NormalScoreScaler,
    UnitScaler,
    joint_density_on_grid,
    nonnegative_rows,
    resolution_level,
    robust_scale,
    vanishing_moments,
)

__all__ = ["ConditionalOTBounds", "wavelet_cot_bounds"]

_MIN_PROPENSITY = 0.01
_MIN_SCALE = 1e-3
_MAX_AUTO_LEVEL_Y = 7
_MAX_AUTO_LEVEL_X = 6
_OUTCOME_SCALERS = {"normal_scores": NormalScoreScaler, "minmax": UnitScaler}


def _cell_index(u: np.ndarray, grid_x: int) -> np.ndarray:
    """Flat C-order index of the covariate cell holding each row of ``u`` (in ``[0, 1]^d``)."""
    idx = np.clip(np.floor(u * grid_x).astype(int), 0, grid_x - 1)
    return np.ravel_multi_index(tuple(idx.T), (grid_x,) * u.shape[1])


def _within_cell_sd(values: np.ndarray, cells: np.ndarray, treated: np.ndarray) -> float:
    """Pooled within-cell standard deviation of ``values``, averaged over the two arms."""
    spreads = []
    for arm in (treated, ~treated):
        c, v = cells[arm], values[arm]
        counts = np.bincount(c)
        means = np.bincount(c, weights=v) / np.maximum(counts, 1)
        dof = max(len(v) - int((counts > 0).sum()), 1)
        spreads.append(np.sqrt(np.sum((v - means[c]) ** 2) / dof))
    return float(np.clip(np.mean(spreads), _MIN_SCALE, 1.0))


def _auto_levels(ux: np.ndarray, uy: np.ndarray, treated: np.ndarray, n: int, s: float) -> tuple[int, int]:
    """Normal-reference levels from each block's spread *given the other block*.

    A tensor projection of the joint density of ``(X, Y)`` must resolve its
    variation along ``x`` at fixed ``y`` and along ``y`` at fixed ``x``; when the
    covariates explain much of the outcome those conditional spreads are much
    smaller than the marginal ones, and a marginal rule would oversmooth. So:
    pilot levels from the marginal robust spreads, then the covariates' spread
    within pilot outcome cells sets ``level_x`` (geometric mean over covariates),
    and the outcome's spread within the ``level_x`` covariate cells sets ``level_y``;
    both via :func:`~causal_ext.partial_id.wavelets.resolution_level` with
    ``D = d + 1``.
    """
    d = ux.shape[1]
    dim = d + 1
    marg_y = float(np.mean([robust_scale(uy[treated]), robust_scale(uy[~treated])]))
    pilot_y = resolution_level(n, s, dim, float(np.clip(marg_y, _MIN_SCALE, 1.0)))
    y_cells = _cell_index(uy[:, None], 2**pilot_y)
    x_spreads = [_within_cell_sd(ux[:, c], y_cells, treated) for c in range(d)]
    lx = min(resolution_level(n, s, dim, float(np.exp(np.mean(np.log(x_spreads))))), _MAX_AUTO_LEVEL_X)
    ly = resolution_level(n, s, dim, _within_cell_sd(uy, _cell_index(ux, 2**lx), treated))
    return lx, min(ly, _MAX_AUTO_LEVEL_Y)


def wavelet_cot_bounds(
    y1: np.ndarray, y0: np.ndarray, x1: np.ndarray, x0: np.ndarray, cost: str | Cost = "quadratic",
    wavelet: str = "db3", level_x: int | None = None, level_y: int | None = None,
    smoothness: float | None = None, grid_x: int | None = None, grid_y: int | None = None,
    alpha: float = 0.05, outcome_scale: str = "normal_scores", positive_part: str = "shift",
) -> tuple[CellBounds, dict[str, int]]:
    """Functional core of :class:`ConditionalOTBounds`; returns the bounds and the levels/grids used."""
    if outcome_scale not in _OUTCOME_SCALERS:
        raise ValueError(f"outcome_scale={outcome_scale!r} is unknown; use one of {sorted(_OUTCOME_SCALERS)}")
    if positive_part not in ("shift", "clip"):
        raise ValueError(f"positive_part={positive_part!r} is unknown; use 'shift' or 'clip'")
    y1, y0 = check_outcomes(y1, y0)
    x1, x0 = check_covariates(x1, x0, len(y1), len(y0))
    alpha = check_alpha(alpha)
    y, treated, x = pool(y1, y0, x1, x0)
    n1, n0, d = len(y1), len(y0), x.shape[1]
    ux = UnitScaler.fit(x).transform(x)
    y_scaler = _OUTCOME_SCALERS[outcome_scale].fit(y)
    uy = y_scaler.transform(y)[:, 0]
    s = float(smoothness) if smoothness is not None else float(vanishing_moments(wavelet))
    if s <= 0:
        raise ValueError(f"smoothness={smoothness} must be > 0")
    n_small = min(n1, n0)
    lx, ly = level_x, level_y
    if lx is None or ly is None:
        auto_x, auto_y = _auto_levels(ux, uy, treated, n_small, s)
        lx = auto_x if lx is None else lx
        ly = auto_y if ly is None else ly
    lx, ly = int(lx), int(ly)
    if lx < 0 or ly < 0:
        raise ValueError(f"level_x={lx} and level_y={ly} must be >= 0")
    gx = int(grid_x) if grid_x is not None else 2 ** (lx + max(0, 3 - d))
    gy = int(grid_y) if grid_y is not None else 4 * 2**ly + 1
    if gx < 1 or gy < 8:
        raise ValueError(f"grid_x={gx} must be >= 1 and grid_y={gy} >= 8")
    centres = [(np.arange(gx) + 0.5) / gx] * d
    y_unit = np.linspace(0.0, 1.0, gy)       # cut to the pooled sample's range (module docstring)
    y_values = y_scaler.inverse(y_unit)[:, 0]
    dens1 = joint_density_on_grid(ux[treated], uy[treated], centres, y_unit, lx, ly, wavelet)
    dens0 = joint_density_on_grid(ux[~treated], uy[~treated], centres, y_unit, lx, ly, wavelet)
    dens1, dens0 = nonnegative_rows(dens1, positive_part), nonnegative_rows(dens0, positive_part)
    unit_cell = _cell_index(ux, gx)
    occupied = np.zeros(gx**d, bool)
    occupied[unit_cell] = True
    laws: list[CellLaws | None] = [None] * gx**d
    for g in np.flatnonzero(occupied):
        m1, m0 = dens1[g].sum(), dens0[g].sum()
        if m1 <= 0 or m0 <= 0:
            continue
        e = float(np.clip(n1 * m1 / (n1 * m1 + n0 * m0), _MIN_PROPENSITY, 1 - _MIN_PROPENSITY))
        laws[g] = CellLaws(ya=y_values, a=dens1[g] / m1, yb=y_values, b=dens0[g] / m0, propensity=e)
    result = bounds_over_cells(laws, unit_cell, y, treated, resolve_cost(cost), alpha)
    return result, {"level_x": lx, "level_y": ly, "grid_x": gx, "grid_y": gy}


class ConditionalOTBounds(BoundsEstimator):
    """Sharp bounds on ``E[c(Y1, Y0)]`` given covariates, by the wavelet primal COT estimator.

    See the module docstring for the algorithm and every default's reason.

    Args:
        cost: ``"quadratic"``, ``"absolute"``, ``"greater"`` or a broadcasting callable.
        wavelet: Daubechies wavelet for the density projections (``"haar"``, ``"db2"``, ...).
        level_x, level_y: resolution levels; ``None`` = the normal-reference rate rule.
        smoothness: assumed smoothness ``s`` for the rule (default: the wavelet's vanishing moments).
        grid_x: covariate cells per dimension (default ``2^(level_x + max(0, 3 - d))``).
        grid_y: outcome grid points (default ``4 * 2^level_y + 1``).
        alpha: intervals have level ``1 - alpha`` (quadratic cost only).
        outcome_scale: ``"normal_scores"`` (default) or ``"minmax"``, the map of the
            outcomes onto ``[0, 1]`` before the projection.
        positive_part: how each cell's signed conditional-density row is made a law:
            ``"shift"`` (default, the L2 projection onto non-negative rows of the same
            mass) or ``"clip"`` (negative values set to 0); see the module docstring.

    Fitted attributes: those of :class:`~causal_ext.partial_id.base.BoundsEstimator`,
    plus ``levels_`` (the levels and grid sizes used), ``cell_lower_`` and
    ``cell_upper_`` (per-cell bounds, NaN where unused).
    """

    def __init__(self, cost: str | Cost = "quadratic", wavelet: str = "db3", level_x: int | None = None,
                 level_y: int | None = None, smoothness: float | None = None, grid_x: int | None = None,
                 grid_y: int | None = None, alpha: float = 0.05,
                 outcome_scale: str = "normal_scores", positive_part: str = "shift") -> None:
        self.cost = cost
        self.wavelet = wavelet
        self.level_x = level_x
        self.level_y = level_y
        self.smoothness = smoothness
        self.grid_x = grid_x
        self.grid_y = grid_y
        self.alpha = alpha
        self.outcome_scale = outcome_scale
        self.positive_part = positive_part

    def fit(self, y1: np.ndarray, y0: np.ndarray, x1: np.ndarray | None = None,
            x0: np.ndarray | None = None) -> ConditionalOTBounds:
        """Estimate the conditional laws by wavelet projection and average the per-cell OT bounds."""
        result, levels = wavelet_cot_bounds(
            y1, y0, x1, x0, cost=self.cost, wavelet=self.wavelet, level_x=self.level_x,
            level_y=self.level_y, smoothness=self.smoothness, grid_x=self.grid_x, grid_y=self.grid_y,
            alpha=self.alpha, outcome_scale=self.outcome_scale, positive_part=self.positive_part)
        self._store(result)
        self.levels_ = levels
        self.cell_lower_, self.cell_upper_ = result.cell_lower, result.cell_upper
        return self
