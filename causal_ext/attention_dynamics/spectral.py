"""Top eigen-directions of the value matrix and the dimension-deduction measurements.

``lambda_max(V)`` is the largest **real part** among the eigenvalues of ``V`` (the conjecture is stated for
the top eigenvalue; for symmetric ``V`` this is just the largest eigenvalue). The "top eigen-directions" are
an orthonormal basis of the dominant real invariant subspace: the leading vectors of the real Schur form of
``V`` with eigenvalues ordered by decreasing real part, so a complex pair contributes its real 2-plane. For a
symmetric ``V`` they are the leading eigenvectors, signs fixed so the largest-magnitude entry is positive.

Dimension deduction (the claim: trajectories collapse onto a two-dimensional structure spanned by a
few dominant directions) is measured two ways, both averaged over tokens of unit length:

* :func:`subspace_fraction`: the share ``|P_U x|^2`` of each token lying in the span of given directions
  ``U`` (e.g. the top-2 eigen-directions of ``V``); 1 means every token lies in that plane.
* :func:`principal_fraction`: the share of ``sum_k |x_k|^2`` captured by the top-``k`` uncentred principal
  directions of the token cloud itself, ``(s_1^2 + ... + s_k^2) / sum s_i^2`` (singular values of the
  ``[n, d]`` token matrix); it needs no ``V`` and so also applies to trained layers.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import torch
from torch import Tensor

from causal_ext.attention_dynamics.flow import MatrixLike
from causal_ext.attention_dynamics.flow import to_numpy as _np


def _square(V: MatrixLike, name: str = "V") -> np.ndarray:
    v = _np(V)
    if v.ndim != 2 or v.shape[0] != v.shape[1] or not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be a finite square matrix, got shape {v.shape}")
    return v


def lambda_max(V: MatrixLike) -> float:
    """Largest real part among the eigenvalues of ``V``."""
    return float(np.linalg.eigvals(_square(V)).real.max())


def top_eigendirections(V: MatrixLike, k: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` leading eigenvalues (by real part) and an orthonormal ``[d, k']`` basis of their subspace.

    ``k' = k`` unless the ``k``-th and ``(k+1)``-th eigenvalues form a complex pair, in which case the pair's
    plane is kept whole (``k' = k + 1``). For symmetric ``V`` the columns are eigenvectors.
    """
    v = _square(V)
    d = v.shape[0]
    if not 1 <= k <= d:
        raise ValueError(f"k must be between 1 and d={d}, got {k}")
    if np.allclose(v, v.T, atol=1e-12 * max(1.0, np.abs(v).max())):
        w, U = np.linalg.eigh((v + v.T) / 2)
        order = np.argsort(-w)[:k]
        w, U = w[order], U[:, order]
        flip = np.sign(U[np.abs(U).argmax(axis=0), np.arange(k)])
        return w, U * flip
    eig = np.linalg.eigvals(v)
    re = np.sort(eig.real)[::-1]
    cut = re[k - 1] - 1e-10 * max(1.0, np.abs(re).max())
    T, Z, sdim = scipy.linalg.schur(v, output="real", sort=lambda x, y: x >= cut)
    order = np.argsort(-eig.real, kind="stable")
    return eig[order][:sdim], Z[:, :sdim]


def project(X: MatrixLike | Tensor, U: np.ndarray) -> np.ndarray:
    """Coordinates ``X @ U`` of tokens ``[..., n, d]`` on orthonormal directions ``U [d, k]``."""
    return _np(X) @ U


def subspace_fraction(X: MatrixLike | Tensor, U: np.ndarray) -> np.ndarray:
    """Mean over tokens of ``|U^T x_k|^2 / |x_k|^2`` for ``X [..., n, d]`` (shape ``[...]``)."""
    x = _np(X)
    return ((x @ U) ** 2).sum(-1).mean(-1) / (x ** 2).sum(-1).mean(-1)


def principal_fraction(X: MatrixLike | Tensor, k: int = 2) -> np.ndarray:
    """Share of ``sum_k |x_k|^2`` in the top-``k`` uncentred principal directions of each ``[n, d]`` cloud."""
    x = torch.as_tensor(_np(X))
    s2 = torch.linalg.svdvals(x).pow(2)
    return (s2[..., :k].sum(-1) / s2.sum(-1)).numpy()
