"""Multivariate least squares with classical standard errors (the regressions every strategy runs)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from causal_ext.bottleneck.arrays import center

__all__ = ["OLSFit", "ols"]


@dataclass(frozen=True)
class OLSFit:
    """``Y ≈ intercept + D @ coef.T`` fitted by least squares.

    Attributes:
        coef: ``(d_y, p)`` coefficients (rows: outcomes, columns: regressors).
        stderr: ``(d_y, p)`` classical (homoskedastic) standard errors.
        residual_cov: ``(d_y, d_y)`` residual covariance, divided by ``n - p - 1``.
        gram_inv: ``(p, p)`` inverse of the centred Gram matrix ``D_c^T D_c``.
        dof: residual degrees of freedom ``n - p - 1``.
    """

    coef: np.ndarray
    stderr: np.ndarray
    residual_cov: np.ndarray
    gram_inv: np.ndarray
    dof: int


def ols(D: np.ndarray, Y: np.ndarray) -> OLSFit:
    """Least squares of ``Y (n, d_y)`` on regressors ``D (n, p)`` plus an intercept.

    ``Var(coef[i, k]) = residual_cov[i, i] * gram_inv[k, k]`` (exact under
    Gaussian homoskedastic errors given ``D``). Raises :class:`ValueError` when
    ``n <= p + 1`` or the regressors are collinear.
    """
    n, p = D.shape
    if n <= p + 1:
        raise ValueError(f"need more samples than regressors + 1 for least squares; got n={n}, p={p} "
                         "(use a bottleneck of lower dimension or more samples)")
    Dc, Yc = center(D, Y)
    gram = Dc.T @ Dc
    if np.linalg.matrix_rank(gram) < p:
        raise ValueError(f"the {p} regressors are collinear (rank {np.linalg.matrix_rank(gram)}); "
                         "drop redundant columns")
    gram_inv = np.linalg.inv(gram)
    coef = (gram_inv @ (Dc.T @ Yc)).T
    resid = Yc - Dc @ coef.T
    dof = n - p - 1
    residual_cov = resid.T @ resid / dof
    stderr = np.sqrt(np.outer(np.diag(residual_cov), np.diag(gram_inv)))
    return OLSFit(coef=coef, stderr=stderr, residual_cov=residual_cov, gram_inv=gram_inv, dof=dof)
