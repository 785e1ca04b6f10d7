"""Reduced-rank regression: the functional core that estimates a linear bottleneck.

For a linear SCBM mechanism ``X_j = A_j B_j X_pa + noise`` the regression
coefficient of ``X_j`` on ``X_pa`` is ``A_j B_j``, of rank ``r_j``, so its row
space is the row space of the bottleneck map ``B_j``. Reduced-rank regression
(Anderson 1951; Izenman 1975; Reinsel & Velu 1998) fits the best rank-``r``
coefficient: least squares, then the top-``r`` singular directions of the fitted
values. The row space of the fitted coefficient estimates that of ``B_j``
consistently, so ``b_hat(x) = B_hat x = G B_j x`` for an invertible ``G``: the
bottleneck is recovered up to a bijection (here an invertible linear map),
which is all the theory promises and all the effect estimators need.

Choices (left open by the method, made as the field does):

* Weighting. With ``whiten=True`` (default) the responses are whitened by the
  least-squares residual covariance ``S`` before the SVD, i.e. the weight matrix
  ``Γ = S^{-1}``: the Gaussian maximum-likelihood reduced-rank estimator
  (Reinsel & Velu 1998, §2.3), invariant to the scale of each response and robust
  to correlated noise such as a hidden confounder. ``whiten=False`` is the
  identity-weighted (plain Frobenius) version and needs fewer samples
  (``n > d_x + 1`` instead of ``n > d_x + d_y + 2``).
* Normalisation. ``B_hat`` is scaled so the estimated bottleneck scores have
  unit sample variance and are uncorrelated; ``loading`` carries the scale.
* Linear ``m_j`` is not required for the row space: when parents are Gaussian and
  ``X_j = A φ(B X_pa) + noise``, the least-squares coefficient still lies in the row
  space of ``B`` (Brillinger 1983; Li & Duan 1989), so the same estimator recovers
  the bottleneck of a nonlinear mechanism on a linear bottleneck, as long as
  ``E[φ'(B X_pa)]`` has full rank (an odd ``φ`` like ``tanh`` qualifies; an even one does not).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from causal_ext.bottleneck.arrays import center

__all__ = ["RegressionSpectrum", "RRRFit", "regression_spectrum", "reduced_rank_regression",
           "truncate_spectrum"]


@dataclass(frozen=True)
class RegressionSpectrum:
    """Least squares of ``Y`` on ``X`` and the SVD of its (optionally whitened) fitted values.

    Attributes:
        coef_ols: ``(d_x, d_y)`` least-squares coefficient, ``Y_c ≈ X_c coef_ols``.
        whitener: ``W`` ``(d_y, d_y)``; whitened responses are ``Y_c W`` (identity if not whitened).
        unwhitener: ``W^{-1}``.
        singular_values: singular values of the fitted values ``X_c coef_ols W``, descending.
        right_vectors: ``(d_y, k)`` right singular vectors (columns), same order.
        noise_scale: residual standard deviation per response in whitened units
            (1 when whitened, the pooled ``sigma_hat`` otherwise).
        dof: residual degrees of freedom ``n - q - 1``.
        q: rank of the centred regressors.
        n: number of samples.
        whitened: whether ``W`` whitens the residuals.
    """

    coef_ols: np.ndarray
    whitener: np.ndarray
    unwhitener: np.ndarray
    singular_values: np.ndarray
    right_vectors: np.ndarray
    noise_scale: float
    dof: int
    q: int
    n: int
    whitened: bool


@dataclass(frozen=True)
class RRRFit:
    """A rank-``r`` fit ``Y_c ≈ X_c B^T A^T``.

    Attributes:
        coef: ``(d_y, d_x)`` rank-``r`` coefficient ``A B``.
        bottleneck: ``B`` ``(r, d_x)``; ``b(x) = B (x - mean)`` has unit, uncorrelated sample variance.
        loading: ``A`` ``(d_y, r)``.
        spectrum: the :class:`RegressionSpectrum` it was cut from.
    """

    coef: np.ndarray
    bottleneck: np.ndarray
    loading: np.ndarray
    spectrum: RegressionSpectrum


def regression_spectrum(X: np.ndarray, Y: np.ndarray, *, whiten: bool = True) -> RegressionSpectrum:
    """Fit least squares of ``Y (n, d_y)`` on ``X (n, d_x)`` (with intercept) and decompose the fit.

    Raises :class:`ValueError` when ``X`` is collinear or there are too few
    samples (``n > d_x + 1``, and ``n > d_x + d_y + 2`` when ``whiten``).
    """
    n, d_x = X.shape
    d_y = Y.shape[1]
    Xc, Yc = center(X, Y)
    q = int(np.linalg.matrix_rank(Xc))
    if q < d_x:
        raise ValueError(f"the {d_x} regressor columns are collinear (rank {q}); drop redundant columns")
    dof = n - q - 1
    need = d_y + 2 if whiten else 1
    if dof < need:
        raise ValueError(f"too few samples for reduced-rank regression: n={n}, d_x={d_x}, d_y={d_y} needs "
                         f"n > {d_x + need}" + (" (or pass whiten=False)" if whiten else ""))
    coef, *_ = np.linalg.lstsq(Xc, Yc, rcond=None)
    resid = Yc - Xc @ coef
    if whiten:
        evals, evecs = np.linalg.eigh(resid.T @ resid / dof)
        if evals[0] <= 1e-12 * max(evals[-1], 1e-300):
            raise ValueError("the residual covariance of Y is singular (a response is an exact linear "
                             "function of X or of other responses); pass whiten=False")
        whitener = (evecs / np.sqrt(evals)) @ evecs.T
        unwhitener = (evecs * np.sqrt(evals)) @ evecs.T
        noise_scale = 1.0
    else:
        whitener = unwhitener = np.eye(d_y)
        noise_scale = float(np.sqrt(np.sum(resid ** 2) / (dof * d_y)))
    _, s, vt = np.linalg.svd(Xc @ coef @ whitener, full_matrices=False)
    return RegressionSpectrum(coef, whitener, unwhitener, s, vt.T, noise_scale, dof, q, n, whiten)


def truncate_spectrum(spectrum: RegressionSpectrum, rank: int) -> RRRFit:
    """Cut a :class:`RegressionSpectrum` to the rank-``rank`` reduced-rank fit."""
    d_x, d_y = spectrum.coef_ols.shape
    s = spectrum.singular_values
    if not 0 <= rank <= min(d_x, d_y):
        raise ValueError(f"rank must be between 0 and min(d_x, d_y) = {min(d_x, d_y)}; got {rank}")
    if rank and s[rank - 1] <= 1e-12 * max(s[0], 1e-300):
        raise ValueError(f"rank={rank} exceeds the numerical rank of the fitted values; "
                         "choose a smaller rank")
    v = spectrum.right_vectors[:, :rank]
    scale = np.sqrt(spectrum.n - 1) / s[:rank]
    bottleneck = (spectrum.coef_ols @ spectrum.whitener @ v).T * scale[:, None]
    loading = (spectrum.unwhitener @ v) / scale[None, :]
    return RRRFit(coef=loading @ bottleneck, bottleneck=bottleneck, loading=loading, spectrum=spectrum)


def reduced_rank_regression(X: np.ndarray, Y: np.ndarray, rank: int, *, whiten: bool = True) -> RRRFit:
    """Rank-``rank`` regression of ``Y`` on ``X``; see the module docstring for the choices."""
    return truncate_spectrum(regression_spectrum(X, Y, whiten=whiten), rank)
