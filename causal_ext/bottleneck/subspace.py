"""How well an estimated bottleneck matches the true one, up to an invertible linear map.

Two linear bottlenecks ``b_hat(x) = B_hat x`` and ``b(x) = B x`` are equal up to a
bijection ``b_hat = G b`` (``G`` invertible) exactly when they have the same
dimension and ``B_hat`` and ``B`` span the same row space, i.e. when all
canonical correlations between ``b_hat(X)`` and ``b(X)`` are 1 (and all principal
angles between the row spaces are 0). These functions measure exactly that.

For a nonlinear bottleneck the bijection is nonlinear too; :func:`nonlinear_alignment`
measures whether each true bottleneck coordinate is a function of the estimated one.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import subspace_angles

__all__ = ["canonical_correlations", "bottleneck_alignment", "principal_angles", "linear_bijection",
           "nonlinear_alignment"]


def canonical_correlations(U: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Sample canonical correlations between the columns of ``U (n, p)`` and ``V (n, q)``, descending."""
    qu, _ = np.linalg.qr(U - U.mean(axis=0))
    qv, _ = np.linalg.qr(V - V.mean(axis=0))
    return np.clip(np.linalg.svd(qu.T @ qv, compute_uv=False), 0.0, 1.0)


def bottleneck_alignment(B_hat: np.ndarray, B_true: np.ndarray, cov: np.ndarray | None = None) -> np.ndarray:
    """Population canonical correlations between ``B_hat x`` and ``B_true x`` for ``Cov(x) = cov``.

    ``cov`` defaults to the identity. Returns ``min(r_hat, r)`` values, descending;
    all equal to 1 iff the bottlenecks agree up to an invertible map on the
    smaller one (check the ranks too).
    """
    if B_hat.shape[1] != B_true.shape[1]:
        raise ValueError(f"B_hat and B_true must act on the same input dimension; "
                         f"got {B_hat.shape} and {B_true.shape}")
    cov = np.eye(B_true.shape[1]) if cov is None else cov
    l_hat = np.linalg.cholesky(B_hat @ cov @ B_hat.T)
    l_true = np.linalg.cholesky(B_true @ cov @ B_true.T)
    cross = np.linalg.solve(l_hat, B_hat @ cov @ B_true.T) @ np.linalg.inv(l_true).T
    return np.clip(np.linalg.svd(cross, compute_uv=False), 0.0, 1.0)


def principal_angles(B_hat: np.ndarray, B_true: np.ndarray) -> np.ndarray:
    """Principal angles (radians, descending) between the row spaces of ``B_hat`` and ``B_true``."""
    return subspace_angles(B_hat.T, B_true.T)


def linear_bijection(B_hat: np.ndarray, B_true: np.ndarray) -> tuple[np.ndarray, float]:
    """Least-squares ``G`` with ``B_hat ≈ G B_true``, and the residual ``|B_hat - G B|_F / |B_hat|_F``."""
    g = np.linalg.lstsq(B_true.T, B_hat.T, rcond=None)[0].T
    residual = np.linalg.norm(B_hat - g @ B_true) / np.linalg.norm(B_hat)
    return g, float(residual)


def nonlinear_alignment(b_true: np.ndarray, b_hat: np.ndarray, neighbours: int = 25) -> np.ndarray:
    """Held-out R^2 of each column of ``b_true (n, r)`` predicted from ``b_hat (n, k)`` by k-NN regression.

    The first half of the rows fits a ``neighbours``-nearest-neighbour regressor
    (on standardised ``b_hat``), the second half scores it:
    ``R^2_j = 1 - sum (b_j - b_j_pred)^2 / sum (b_j - mean b_j)^2``. Values near 1
    for every ``j`` mean ``b_true`` is a (smooth) function of ``b_hat``; with
    ``k = r`` that is recovery up to a (nonlinear) bijection. Near 0: ``b_hat``
    carries no information about that coordinate.
    """
    from sklearn.neighbors import KNeighborsRegressor

    b_true = np.asarray(b_true, dtype=float).reshape(len(b_true), -1)
    b_hat = np.asarray(b_hat, dtype=float).reshape(len(b_hat), -1)
    if len(b_true) != len(b_hat) or len(b_true) < 4 * neighbours:
        raise ValueError(f"b_true and b_hat need the same number of rows, at least {4 * neighbours}; "
                         f"got {len(b_true)} and {len(b_hat)}")
    z = (b_hat - b_hat.mean(axis=0)) / np.where(b_hat.std(axis=0) > 0, b_hat.std(axis=0), 1.0)
    half = len(z) // 2
    pred = KNeighborsRegressor(neighbours).fit(z[:half], b_true[:half]).predict(z[half:])
    rest = b_true[half:]
    return 1 - np.sum((rest - pred) ** 2, axis=0) / np.sum((rest - rest.mean(axis=0)) ** 2, axis=0)
