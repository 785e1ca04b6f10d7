"""Rules that choose the bottleneck dimension (the rank of a reduced-rank regression).

* ``"rsc"`` — singular-value threshold, after the rank selection criterion of
  Bunea, She & Wegkamp (2011, Ann. Statist. 39:1282). The rank is the number of
  singular values of the fitted values ``P_X Y`` (whitened, see
  :mod:`causal_ext.bottleneck.rrr`) above ``sqrt(c) * sigma * (sqrt(d_y) + sqrt(q))``:
  ``sigma (sqrt(d_y) + sqrt(q))`` is the typical largest singular value of pure
  noise projected onto the ``q``-dimensional column space of ``X``
  (``P_X E`` behaves as a ``q x d_y`` Gaussian matrix). Bunea et al. require a
  constant ``c > 1``; ``c = 2`` is our choice (checked in the tests: rank 0 on
  pure noise, the true rank on SCBM mechanisms). With whitened responses ``sigma = 1``
  and the threshold is multiplied by ``sqrt(m / (m - d_y - 1))``, ``m = n - q - 1``,
  the inflation ``E[S^{-1}] = m/(m - d_y - 1) I`` that whitening by an estimated
  covariance ``S`` brings.
* ``"cv"`` — K-fold cross-validated prediction error of each rank ``0..max_rank``
  (whitened squared error when whitening), then the one-standard-error rule
  (Hastie, Tibshirani & Friedman 2009, §7.10): the smallest rank whose error is
  within one fold-standard-error of the best. Slower, but free of the Gaussian
  noise model behind ``"rsc"``.
* :func:`numerical_rank` — exact (floating-point) rank, for structural deficiency
  such as fewer instruments than treatments.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from causal_ext.bottleneck.rrr import RegressionSpectrum, regression_spectrum

__all__ = ["RankSelection", "RANK_RULES", "numerical_rank", "rsc_threshold", "select_rank"]

RANK_RULES = ("rsc", "cv")


@dataclass(frozen=True)
class RankSelection:
    """The chosen rank and the evidence for it.

    Attributes:
        rank: the selected rank.
        rule: ``"rsc"`` or ``"cv"``.
        singular_values: singular values of the (whitened) fitted values on all data.
        threshold: the ``"rsc"`` threshold (``None`` for ``"cv"``).
        cv_errors: mean held-out error per rank ``0..max_rank`` (``None`` for ``"rsc"``).
        cv_stderr: fold standard error of ``cv_errors`` (``None`` for ``"rsc"``).
    """

    rank: int
    rule: str
    singular_values: np.ndarray
    threshold: float | None = None
    cv_errors: np.ndarray | None = None
    cv_stderr: np.ndarray | None = None


def numerical_rank(matrix: np.ndarray, rtol: float | None = None) -> int:
    """Number of singular values above ``rtol * s_max`` (default ``max(shape) * eps``, as NumPy)."""
    s = np.linalg.svd(np.atleast_2d(matrix), compute_uv=False)
    if s.size == 0 or s[0] == 0:
        return 0
    rtol = max(matrix.shape) * np.finfo(float).eps if rtol is None else rtol
    return int(np.sum(s > rtol * s[0]))


def rsc_threshold(spectrum: RegressionSpectrum, scale: float = 2.0) -> float:
    """The ``"rsc"`` singular-value threshold for ``spectrum`` (see the module docstring)."""
    d_y = spectrum.coef_ols.shape[1]
    tau = np.sqrt(scale) * spectrum.noise_scale * (np.sqrt(d_y) + np.sqrt(spectrum.q))
    if spectrum.whitened:
        tau *= np.sqrt(spectrum.dof / (spectrum.dof - d_y - 1))
    return float(tau)


def _fold_errors(X: np.ndarray, Y: np.ndarray, folds: int, max_rank: int, whiten: bool,
                 rng: np.random.Generator) -> np.ndarray:
    """``(folds, max_rank + 1)`` mean held-out squared error of each rank."""
    n = X.shape[0]
    assignment = rng.permutation(n) % folds
    errors = np.empty((folds, max_rank + 1))
    for f in range(folds):
        train, test = assignment != f, assignment == f
        spec = regression_spectrum(X[train], Y[train], whiten=whiten)
        x_mean, y_mean = X[train].mean(axis=0), Y[train].mean(axis=0)
        fitted = (X[test] - x_mean) @ spec.coef_ols @ spec.whitener  # whitened predictions, full rank
        target = (Y[test] - y_mean) @ spec.whitener
        for k in range(max_rank + 1):
            v = spec.right_vectors[:, :k]
            errors[f, k] = np.mean(np.sum((target - fitted @ v @ v.T) ** 2, axis=1))
    return errors


def select_rank(X: np.ndarray, Y: np.ndarray, rule: str = "rsc", *, whiten: bool = True,
                threshold_scale: float = 2.0, folds: int = 5, max_rank: int | None = None,
                seed: int = 0) -> RankSelection:
    """Choose the rank of the regression of ``Y (n, d_y)`` on ``X (n, d_x)`` by ``rule``.

    Raises :class:`ValueError` for an unknown ``rule``, ``folds < 2`` or
    ``threshold_scale <= 0``.
    """
    if rule not in RANK_RULES:
        raise ValueError(f"rank rule must be one of {RANK_RULES}; got {rule!r}")
    if threshold_scale <= 0:
        raise ValueError(f"threshold_scale must be > 0; got {threshold_scale}")
    spec = regression_spectrum(X, Y, whiten=whiten)
    s = spec.singular_values
    if rule == "rsc":
        tau = rsc_threshold(spec, threshold_scale)
        return RankSelection(int(np.sum(s > tau)), rule, s, threshold=tau)
    if folds < 2:
        raise ValueError(f"folds must be >= 2 for cross-validation; got {folds}")
    top = min(X.shape[1], Y.shape[1]) if max_rank is None else min(max_rank, X.shape[1], Y.shape[1])
    errors = _fold_errors(X, Y, folds, top, whiten, np.random.default_rng(seed))
    mean, se = errors.mean(axis=0), errors.std(axis=0, ddof=1) / np.sqrt(folds)
    best = int(np.argmin(mean))
    rank = int(np.flatnonzero(mean <= mean[best] + se[best])[0])
    return RankSelection(rank, rule, s, cv_errors=mean, cv_stderr=se)
