"""Linear wavelet projection density estimators on ``[0, 1]^D`` (PyWavelets scaling functions).

The estimator of a density ``p`` on ``R^D`` at resolution ``j`` is the orthogonal
projection of the empirical measure onto the scaling space ``V_j``::

    p_hat(z) = sum_k alpha_k phi_jk(z),   alpha_k = (1/n) sum_i phi_jk(Z_i),
    phi_jk(z) = prod_d 2^(j_d/2) phi(2^(j_d) z_d - k_d)          (tensor product)

with ``phi`` the Daubechies scaling function of the chosen wavelet (``"haar"`` =
``"db1"``, ``"db2"``, ...). Data are mapped to ``[0, 1]`` per coordinate first
(:class:`UnitScaler`, or :class:`NormalScoreScaler` for skewed data), and all
translates ``k`` whose support meets ``[0, 1]`` are kept, so the estimator is
the exact ``L2(R^D)`` projection (no periodisation and no boundary wavelets;
the estimate spills out of ``[0, 1]`` by up to the scaling function's support
width ``(2N - 1) 2^-j``, which callers may evaluate or cut).

Two properties the partial-identification estimator relies on:

* a Daubechies wavelet with ``N`` vanishing moments reproduces polynomials of
  degree ``< N`` in ``V_j``, so the projection keeps the sample's moments of order
  ``< N`` (mean for ``N >= 2``, variance for ``N >= 3``) and its bias for a
  density of smoothness ``s <= N`` is ``O(2^(-j s))``;
* for Haar the estimate is the histogram with ``2^j`` equal bins (tested).

Daubechies scaling functions have no closed form; they are tabulated once by the
cascade algorithm (``pywt.Wavelet(name).wavefun(level=12)``) and linearly
interpolated, which is accurate to ``~1e-4`` of their sup norm; Haar is evaluated
exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pywt
from scipy.stats import norm

__all__ = [
    "NormalScoreScaler",
    "UnitScaler",
    "joint_density_on_grid",
    "nonnegative_rows",
    "resolution_level",
    "robust_scale",
    "scaling_basis",
    "support_length",
    "tensor_rows",
    "vanishing_moments",
]

_CASCADE_LEVEL = 12


def _check_wavelet(wavelet: str) -> pywt.Wavelet:
    try:
        w = pywt.Wavelet(wavelet)
    except ValueError as exc:
        raise ValueError(f"wavelet={wavelet!r} is not a PyWavelets wavelet name; "
                         "use 'haar' or 'db2'..'db20'") from exc
    if not w.orthogonal or not w.name.startswith(("haar", "db")):
        raise ValueError(f"wavelet={wavelet!r} must be an orthogonal Daubechies wavelet ('haar', 'db2', ...)")
    return w


@lru_cache(maxsize=16)
def _scaling_table(wavelet: str) -> tuple[np.ndarray, np.ndarray]:
    """``(x, phi(x))`` tabulated by the cascade algorithm (cached per wavelet)."""
    phi, _psi, x = _check_wavelet(wavelet).wavefun(level=_CASCADE_LEVEL)
    return np.asarray(x, dtype=float), np.asarray(phi, dtype=float)


def _is_haar(wavelet: str) -> bool:
    return _check_wavelet(wavelet).name in ("haar", "db1")


def support_length(wavelet: str) -> int:
    """Length ``S = 2N - 1`` of the support ``[0, S]`` of the scaling function."""
    return _check_wavelet(wavelet).dec_len - 1


def vanishing_moments(wavelet: str) -> int:
    """Number ``N`` of vanishing moments of the wavelet (= polynomial degree reproduced + 1)."""
    return int(_check_wavelet(wavelet).vanishing_moments_psi)


def resolution_level(n: int, smoothness: float, dim: int, scale: float = 1.0) -> int:
    """Normal-reference resolution level ``j = round(log2(1 / scale) + log2(n) / (2 s + D))`` (>= 1).

    ``2^-j`` is the wavelet's bandwidth on the unit cube. The rate part
    ``n^(-1/(2s+D))`` balances the squared bias ``2^(-2js)`` of a projection
    estimator of an ``s``-smooth density on ``R^D`` with its variance ``2^(jD)/n``;
    ``scale`` (the data's spread in unit-cube coordinates, e.g. a robust standard
    deviation after min-max scaling) sets the constant, as in normal-reference
    bandwidth rules, so that the level does not depend on the units of the data.
    Heuristically, for a smooth functional with derivative ``f`` the first-order
    bias of a projection estimator is the product ``<f - P_j f, p - P_j p>`` of
    two projection errors, ``o(n^-1/2)`` at this level once ``s > D/2``, so no
    extra undersmoothing is used; ``benchmarks/cot_coverage.py`` checks the
    resulting interval coverage empirically.
    """
    if n < 2:
        raise ValueError(f"n={n}: need at least 2 observations to choose a resolution level")
    if smoothness <= 0 or dim < 1:
        raise ValueError(f"smoothness={smoothness} must be > 0 and dim={dim} >= 1")
    if not 0 < scale <= 1:
        raise ValueError(f"scale={scale} must be a spread in unit-cube coordinates, in (0, 1]")
    return max(1, int(round(math.log2(1.0 / scale) + math.log2(n) / (2.0 * smoothness + dim))))


def robust_scale(u: np.ndarray) -> float:
    """``min(sd, IQR / 1.349)`` of a 1-D sample (the normal-reference spread)."""
    u = np.asarray(u, dtype=float).ravel()
    q75, q25 = np.percentile(u, [75, 25])
    iqr = (q75 - q25) / 1.349
    sd = float(u.std())
    spread = min(sd, iqr) if iqr > 0 else sd
    return spread


@dataclass(frozen=True)
class UnitScaler:
    """Affine map of each column onto ``[0, 1]`` (fitted on the pooled sample)."""

    low: np.ndarray
    high: np.ndarray

    @classmethod
    def fit(cls, z: np.ndarray) -> UnitScaler:
        """Columns' min and max; a constant column gets unit width."""
        z = np.atleast_2d(np.asarray(z, dtype=float).T).T
        low, high = z.min(axis=0), z.max(axis=0)
        high = np.where(high > low, high, low + 1.0)
        return cls(low, high)

    def transform(self, z: np.ndarray) -> np.ndarray:
        """Map to the unit cube (columns as in :meth:`fit`)."""
        z = np.atleast_2d(np.asarray(z, dtype=float).T).T
        return (z - self.low) / (self.high - self.low)

    def inverse(self, u: np.ndarray) -> np.ndarray:
        """Map unit-cube coordinates back to data units."""
        u = np.atleast_2d(np.asarray(u, dtype=float).T).T
        return self.low + u * (self.high - self.low)


@dataclass(frozen=True)
class NormalScoreScaler:
    """Normal-score transform of one column followed by min-max scaling to ``[0, 1]``.

    ``transform`` maps a value to ``Phi^-1`` of its pooled mid-rank
    ``(r - 1/2) / n`` (ties share the average), so the pooled sample looks
    standard normal whatever its tails, then min-max scales those scores;
    ``inverse`` maps back through the piecewise-linear empirical quantile
    function, constant beyond the extreme order statistics.
    """

    sorted_values: np.ndarray
    unit: UnitScaler

    @classmethod
    def fit(cls, z: np.ndarray) -> NormalScoreScaler:
        """Sorted copy of the column and the min-max scaler of its scores."""
        col = np.sort(np.asarray(z, dtype=float).ravel())
        scores = norm.ppf((np.arange(len(col)) + 0.5) / len(col))
        return cls(col, UnitScaler.fit(scores))

    def transform(self, z: np.ndarray) -> np.ndarray:
        """Unit-scaled normal score of each value among the fitted column."""
        z = np.asarray(z, dtype=float).ravel()
        lo = np.searchsorted(self.sorted_values, z, side="left")
        hi = np.searchsorted(self.sorted_values, z, side="right")
        mid = np.clip((lo + hi) / (2.0 * len(self.sorted_values)), 0.5 / len(self.sorted_values),
                      1 - 0.5 / len(self.sorted_values))
        return self.unit.transform(norm.ppf(mid))

    def inverse(self, u: np.ndarray) -> np.ndarray:
        """Empirical quantile function at the scores' normal probabilities."""
        p = norm.cdf(self.unit.inverse(u)[:, 0])
        levels = (np.arange(len(self.sorted_values)) + 0.5) / len(self.sorted_values)
        return np.interp(p, levels, self.sorted_values)[:, None]


def scaling_basis(u: np.ndarray, level: int, wavelet: str) -> np.ndarray:
    """``phi_jk(u_i)`` for 1-D points ``u`` in ``[0, 1]``: shape ``(len(u), 2^j + S - 1)``.

    Columns are the translates ``k = -(S - 1), ..., 2^j - 1`` (all those whose
    support ``[k, k + S] / 2^j`` meets ``[0, 1]``). Points slightly outside
    ``[0, 1]`` (grid padding) are evaluated with the same translates.
    """
    u = np.asarray(u, dtype=float).ravel()
    scale = 2.0**level
    s = support_length(wavelet)
    ks = np.arange(-(s - 1), 2**level)
    if _is_haar(wavelet):
        # exact histogram convention: bins [k, k+1)/2^j, the last one closed at u = 1
        idx = np.floor(u * scale)
        idx = np.where(u == 1.0, scale - 1, idx)
        return np.sqrt(scale) * (idx[:, None] == ks[None, :]).astype(float)
    x, phi = _scaling_table(wavelet)
    t = scale * u[:, None] - ks[None, :]
    return np.sqrt(scale) * np.interp(t, x, phi, left=0.0, right=0.0)


def tensor_rows(bases: list[np.ndarray]) -> np.ndarray:
    """Row-wise Kronecker (Khatri-Rao) product: ``(n, K1) x (n, K2) x ... -> (n, K1 K2 ...)``."""
    out = bases[0]
    for b in bases[1:]:
        out = (out[:, :, None] * b[:, None, :]).reshape(out.shape[0], -1)
    return out


def joint_density_on_grid(
    ux: np.ndarray, uy: np.ndarray, x_grid: list[np.ndarray], y_grid: np.ndarray,
    level_x: int, level_y: int, wavelet: str, max_coefficients: int = 2_000_000,
) -> np.ndarray:
    """Wavelet projection estimate of the joint density of ``(X, Y)`` on a product grid.

    Args:
        ux: ``(n, d)`` covariates already in ``[0, 1]``.
        uy: ``(n,)`` outcomes already in ``[0, 1]``.
        x_grid: one 1-D array of evaluation points per covariate.
        y_grid: outcome evaluation points.
        level_x, level_y: resolution levels for the covariates and the outcome.
        wavelet: PyWavelets name.
        max_coefficients: refuse tensor bases larger than this (memory guard).

    Returns:
        ``(prod(len(g) for g in x_grid), len(y_grid))`` array of density values,
        covariate grid flattened in C order (first covariate slowest). Values can
        be slightly negative (Daubechies scaling functions change sign).
    """
    ux = np.atleast_2d(np.asarray(ux, dtype=float).T).T
    n, d = ux.shape
    k_x = (2**level_x + support_length(wavelet) - 1) ** d
    k_y = 2**level_y + support_length(wavelet) - 1
    if k_x * k_y > max_coefficients:
        raise ValueError(
            f"level_x={level_x} with {d} covariates needs {k_x * k_y} wavelet coefficients "
            f"(> {max_coefficients}); lower level_x, reduce the covariates, or use BinnedConditionalOTBounds")
    bx = tensor_rows([scaling_basis(ux[:, c], level_x, wavelet) for c in range(d)])
    by = scaling_basis(uy, level_y, wavelet)
    alpha = bx.T @ by / n                                            # (Kx, Ky) projection coefficients
    out = alpha @ scaling_basis(y_grid, level_y, wavelet).T          # (Kx, len(y_grid))
    # the x basis is a tensor product and the grid a product grid, so evaluate one covariate at a time
    # (a mode product per axis) instead of forming the (prod len(g), Kx) Kronecker matrix
    k1 = 2**level_x + support_length(wavelet) - 1
    out = out.reshape((k1,) * d + (-1,))
    for c, g in enumerate(x_grid):
        out = np.moveaxis(np.tensordot(scaling_basis(g, level_x, wavelet), out, axes=([1], [c])), 0, c)
    return out.reshape(-1, out.shape[-1])


def nonnegative_rows(values: np.ndarray, how: str = "shift") -> np.ndarray:
    """Make each row of a signed density estimate non-negative.

    * ``"clip"``: ``max(p, 0)``. Drops the negative lobes and so *adds* their mass
      back in the tails, which inflates the spread of the law.
    * ``"shift"``: ``max(p - xi, 0)`` with ``xi >= 0`` chosen per row so that the
      row keeps its net mass ``sum(p)`` (Glad, Hjort and Ushakov 2003). This is the
      Euclidean projection of the row onto the non-negative vectors of that mass,
      so it is never farther from the true (non-negative) density in L2 than the
      signed estimate; it trims the small positive tail values that sit beside the
      negative lobes instead of keeping them. Rows of net mass <= 0 become 0.

    Computed for all rows at once by the sort-based simplex projection
    (``xi = (sum of the k largest - mass) / k`` for the largest ``k`` whose k-th
    value still exceeds it).
    """
    p = np.asarray(values, dtype=float)
    if how == "clip":
        return np.maximum(p, 0.0)
    if how != "shift":
        raise ValueError(f"how={how!r} is unknown; use 'shift' or 'clip'")
    mass = p.sum(axis=-1, keepdims=True)
    top = -np.sort(-p, axis=-1)
    k = np.arange(1, p.shape[-1] + 1)
    xi_k = (np.cumsum(top, axis=-1) - mass) / k
    last = np.sum(top > xi_k, axis=-1, keepdims=True)        # the condition holds for a prefix of k
    xi = np.take_along_axis(xi_k, np.maximum(last - 1, 0), axis=-1)
    return np.where(mass > 0, np.maximum(p - np.maximum(xi, 0.0), 0.0), 0.0)
