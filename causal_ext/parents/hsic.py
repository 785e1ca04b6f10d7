"""HSIC independence test: Gaussian kernels, median heuristic, gamma approximation or permutations.

The Hilbert-Schmidt Independence Criterion of two samples ``x`` (n x p) and
``y`` (n x q) with Gram matrices ``K`` and ``L`` and the centring matrix
``H = I - 11^T / n`` is estimated by the biased V-statistic

    HSIC_b = tr(K H L H) / n^2,

and the test statistic is ``n * HSIC_b = sum(Kc * Lc) / n`` with ``Kc = HKH``,
``Lc = HLH`` (Gretton et al., "A Kernel Statistical Test of Independence",
NIPS 2008). Under independence ``n * HSIC_b`` is approximated by a gamma
distribution whose first two moments are estimated from the data (the paper's
eq. for ``E[HSIC_b]`` and ``Var[HSIC_b]``; the same formulas as the authors'
``hsicTestGamma.m``):

    mu_x = (1 / (n(n-1))) sum_{i != j} K_ij,  mu_y likewise,
    E[HSIC_b]   = (1 + mu_x mu_y - mu_x - mu_y) / n,
    Var[HSIC_b] = 72 (n-4)(n-5) / (n(n-1)(n-2)(n-3)) * (1 / (n(n-1))) sum_{i != j} (Kc_ij Lc_ij / 6)^2,
    shape = E^2 / Var,  scale = n Var / E,

and the p-value is the gamma survival function at the statistic. The
permutation option recomputes the statistic with the rows of ``y`` permuted
(``B`` times; each permutation is two ``take`` copies and one dot
product of n x n arrays) and returns
``(1 + #{T_b >= T}) / (1 + B)``, which is exact (valid at every n).

Kernels: ``k(a, b) = exp(-||a - b||^2 / (2 sigma^2))`` on columns standardised
to zero mean and unit variance (so that multivariate regressor sets with mixed
scales get one bandwidth), with ``sigma`` the median heuristic: the median of
the pairwise Euclidean distances (Gretton et al. 2008, as in their code),
computed on at most ``MEDIAN_POINTS`` evenly spaced rows, falling back to 1
when the median is 0 (a variable with many ties).

Large n: the exact statistic costs O(n^2) time and memory. With
``max_samples`` set and ``n > max_samples`` the test runs on a uniformly drawn
subsample of ``max_samples`` rows (seeded), which keeps the test's level (it
is the same test on fewer points) at the price of power. This is the simplest
of the standard options (block / incomplete-U estimators, random features); it
is the one used here because it changes nothing in the calibration of the
gamma approximation, which the level tests check at small n.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

MEDIAN_POINTS = 250
"""Rows used to compute the median-heuristic bandwidth (evenly spaced through the sample)."""


@dataclass(frozen=True)
class HSICResult:
    """Outcome of one HSIC test.

    Attributes:
        statistic: ``n * HSIC_b`` on the (possibly subsampled) data.
        pvalue: the p-value (gamma approximation or permutation).
        log_pvalue: natural log of the p-value; for the gamma approximation it
            is computed with ``logsf`` (and, where even that underflows, the
            leading term of the tail expansion ``Gamma(a, z) ~ z^(a-1) e^-z (1 + (a-1)/z)``)
            so that it keeps ordering far below 1e-300.
        n: number of rows the test used.
        method: ``"gamma"`` or ``"permutation"``.
    """

    statistic: float
    pvalue: float
    log_pvalue: float
    n: int
    method: str


def _as_2d(a: np.ndarray, name: str) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"{name} must be a 1-D or 2-D array (n, p); got shape {a.shape}.")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or inf; drop or impute those rows first.")
    return a


def standardize(a: np.ndarray) -> np.ndarray:
    """Columns to zero mean and unit variance (constant columns are left centred at 0)."""
    a = a - a.mean(axis=0)
    sd = a.std(axis=0)
    return a / np.where(sd > 0, sd, 1.0)


def sq_distances(a: np.ndarray) -> np.ndarray:
    """Pairwise squared Euclidean distances of the rows of ``a`` (n x p), clipped at 0."""
    if a.shape[1] <= 3:  # direct differences: exact and cheaper than the Gram trick for few columns
        d = np.subtract.outer(a[:, 0], a[:, 0])
        d *= d
        for j in range(1, a.shape[1]):
            e = np.subtract.outer(a[:, j], a[:, j])
            e *= e
            d += e
        return d
    sq = np.einsum("ij,ij->i", a, a)
    d = sq[:, None] + sq[None, :] - 2.0 * (a @ a.T)
    np.maximum(d, 0.0, out=d)
    return d


def _median_of_sq(d: np.ndarray, max_points: int) -> float:
    """Median heuristic from a squared-distance matrix, on at most ``max_points`` evenly spaced rows."""
    n = d.shape[0]
    if n > max_points:
        idx = np.linspace(0, n - 1, max_points).astype(int)
        d = d[np.ix_(idx, idx)]
    iu = np.triu_indices(d.shape[0], k=1)
    med = float(np.median(np.sqrt(d[iu]))) if iu[0].size else 0.0
    return med if med > 0 else 1.0


def median_bandwidth(a: np.ndarray, max_points: int = MEDIAN_POINTS) -> float:
    """Median heuristic: median pairwise Euclidean distance of the rows (1.0 if that is 0)."""
    a = _as_2d(a, "a")
    n = a.shape[0]
    if n > max_points:
        a = a[np.linspace(0, n - 1, max_points).astype(int)]
    return _median_of_sq(sq_distances(a), max_points)


def gaussian_gram(a: np.ndarray, sigma: float | None = None) -> np.ndarray:
    """Gaussian Gram matrix of the standardised rows of ``a``; ``sigma`` defaults to the median heuristic."""
    a = standardize(_as_2d(a, "a"))
    k = sq_distances(a)
    if sigma is None:
        sigma = _median_of_sq(k, MEDIAN_POINTS)
    if not sigma > 0:
        raise ValueError(f"sigma must be positive; got {sigma}.")
    k *= -1.0 / (2.0 * sigma * sigma)
    np.exp(k, out=k)
    return k


def center_gram(k: np.ndarray) -> np.ndarray:
    """``H K H`` for a symmetric ``K`` without forming ``H``: row and column means out, grand mean in."""
    row = k.mean(axis=0)
    out = k - row[None, :]
    out -= (row - row.mean())[:, None]
    return out


def hsic_gamma(k: np.ndarray, lmat: np.ndarray) -> HSICResult:
    """Gamma-approximation HSIC test on two (uncentred) Gram matrices; see the module docstring."""
    n = k.shape[0]
    if n < 6:
        raise ValueError(f"the gamma approximation needs at least 6 rows; got {n}.")
    prod = center_gram(k)
    prod *= center_gram(lmat)  # Kc * Lc, in place
    stat = float(prod.sum() / n)
    diag = np.diagonal(prod)
    off = (float(np.vdot(prod, prod)) - float(diag @ diag)) / 36.0
    var = 72.0 * (n - 4) * (n - 5) / (n * (n - 1) * (n - 2) * (n - 3)) * off / (n * (n - 1))
    mu_x = (k.sum() - np.trace(k)) / (n * (n - 1))
    mu_y = (lmat.sum() - np.trace(lmat)) / (n * (n - 1))
    mean = (1.0 + mu_x * mu_y - mu_x - mu_y) / n
    if not (var > 0 and mean > 0):  # a constant variable: no evidence of dependence
        return HSICResult(stat, 1.0, 0.0, n, "gamma")
    shape, scale = mean * mean / var, n * var / mean
    logp = float(stats.gamma.logsf(stat, shape, scale=scale))
    if not np.isfinite(logp):  # sf underflowed: leading term of the upper incomplete gamma asymptotics
        z = stat / scale
        logp = float(stats.gamma.logpdf(stat, shape, scale=scale) + np.log(scale) + np.log1p((shape - 1) / z))
    return HSICResult(stat, float(np.exp(logp)), logp, n, "gamma")


def hsic_permutation(k: np.ndarray, lmat: np.ndarray, n_permutations: int = 200,
                     rng: np.random.Generator | None = None) -> HSICResult:
    """Permutation HSIC test: the statistic against ``n_permutations`` row permutations of ``lmat``."""
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1; got {n_permutations}.")
    rng = np.random.default_rng(rng)
    n = k.shape[0]
    kc = center_gram(k)
    stat = float((kc * lmat).sum() / n)  # sum(Kc * HLH) = sum(Kc * L) because Kc is centred
    null = np.empty(n_permutations)
    for b in range(n_permutations):
        p = rng.permutation(n)
        null[b] = np.vdot(kc, lmat.take(p, axis=0).take(p, axis=1)) / n  # L with rows and columns permuted
    count = int(np.sum(null >= stat - 1e-12 * max(1.0, abs(stat))))
    pvalue = (1 + count) / (1 + n_permutations)
    return HSICResult(stat, pvalue, float(np.log(pvalue)), n, "permutation")


def hsic_test(x: np.ndarray, y: np.ndarray, *, method: str = "gamma", n_permutations: int = 200,
              max_samples: int | None = None, rng: np.random.Generator | int | None = None) -> HSICResult:
    """HSIC test of independence between the rows of ``x`` and ``y`` (Gaussian kernels, median heuristic).

    Args:
        x: (n,) or (n, p) sample.
        y: (n,) or (n, q) sample, paired row by row with ``x``.
        method: ``"gamma"`` (Gretton et al. 2008 approximation) or ``"permutation"``.
        n_permutations: permutations for ``method="permutation"``.
        max_samples: if set and ``n`` exceeds it, test on a seeded uniform
            subsample of this many rows (see the module docstring).
        rng: seed or generator for the subsample and the permutations.

    Returns:
        HSICResult with statistic, p-value and log p-value.
    """
    x, y = _as_2d(x, "x"), _as_2d(y, "y")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must have the same number of rows; got {x.shape[0]} and {y.shape[0]}.")
    if method not in ("gamma", "permutation"):
        raise ValueError(f"method must be 'gamma' or 'permutation'; got {method!r}.")
    rng = np.random.default_rng(rng)
    n = x.shape[0]
    if max_samples is not None:
        if max_samples < 6:
            raise ValueError(f"max_samples must be >= 6 (or None for all rows); got {max_samples}.")
        if n > max_samples:
            idx = np.sort(rng.choice(n, size=max_samples, replace=False))
            x, y = x[idx], y[idx]
    k, lmat = gaussian_gram(x), gaussian_gram(y)
    if method == "gamma":
        return hsic_gamma(k, lmat)
    return hsic_permutation(k, lmat, n_permutations, rng)


__all__ = [
    "HSICResult",
    "MEDIAN_POINTS",
    "center_gram",
    "gaussian_gram",
    "hsic_gamma",
    "hsic_permutation",
    "hsic_test",
    "median_bandwidth",
    "sq_distances",
    "standardize",
]
