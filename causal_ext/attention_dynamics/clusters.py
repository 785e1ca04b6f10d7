"""Clusters of tokens on the sphere, and the two-cluster verdict of the conjecture.

Cluster detection is **single-linkage on angular distance** ``arccos <x_i, x_j>`` cut at a threshold
(default ``0.05`` rad, about 3 degrees): two tokens share a cluster when a chain of tokens joins them with
every link shorter than the threshold. After convergence the tokens sit on a few points and any small
threshold counts those points; before convergence the count depends on the threshold, so it is reported
next to the final token speed (see :class:`~causal_ext.attention_dynamics.dynamics.CausalAttentionFlow`).

The **two-cluster verdict** for a direction ``u`` (the top eigenvector of ``V``): every token lies within
``angle_tol`` of ``+u`` or ``-u``, and both signs occur. ``aligned`` drops the "both signs" part (one cluster
at ``+u`` or ``-u`` also counts as aligned).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

from causal_ext.attention_dynamics.flow import MatrixLike
from causal_ext.attention_dynamics.flow import to_numpy as _np


def angular_distances(X: MatrixLike) -> np.ndarray:
    """``[n, n]`` angles ``arccos <x_i, x_j>`` between unit-normalised rows of ``X [n, d]``."""
    x = _np(X)
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    return np.arccos(np.clip(x @ x.T, -1.0, 1.0))


def cluster_labels(X: MatrixLike, threshold: float = 0.05) -> np.ndarray:
    """Single-linkage cluster labels ``0..c-1`` of the rows of ``X [n, d]`` (numbered by first appearance)."""
    if not threshold > 0:
        raise ValueError(f"threshold must be a positive angle in radians, got {threshold}")
    x = _np(X)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError(f"X must be an [n, d] token matrix, got shape {x.shape}")
    if x.shape[0] == 1:
        return np.zeros(1, dtype=int)
    D = angular_distances(x)
    np.fill_diagonal(D, 0.0)
    raw = fcluster(linkage(squareform(D, checks=False), method="single"), t=threshold, criterion="distance")
    _, first, inverse = np.unique(raw, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))
    return rank[inverse]


@dataclass
class TwoClusterVerdict:
    """What the final tokens of one run look like relative to a direction ``u``.

    Attributes:
        n_clusters: single-linkage clusters at the given threshold.
        aligned: every token within ``angle_tol`` of ``+u`` or ``-u``.
        both_signs: some token lies within ``angle_tol`` of ``+u`` and some within ``angle_tol`` of ``-u``.
        two_clusters: ``aligned and both_signs`` (the conjectured limit).
        max_angle: the largest angle of a token from ``{+u, -u}`` (radians).
        n_plus: tokens nearer ``+u`` than ``-u``.
    """

    n_clusters: int
    aligned: bool
    both_signs: bool
    two_clusters: bool
    max_angle: float
    n_plus: int


def two_cluster_verdict(X: MatrixLike, u: np.ndarray, angle_tol: float = 0.05,
                        threshold: float = 0.05) -> TwoClusterVerdict:
    """Judge the tokens ``X [n, d]`` against the two-cluster limit ``{+u, -u}``."""
    x = _np(X)
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    u = np.asarray(u, dtype=np.float64).reshape(-1)
    if u.shape[0] != x.shape[-1]:
        raise ValueError(f"u must have length d={x.shape[-1]}, got {u.shape[0]}")
    c = x @ (u / np.linalg.norm(u))
    angles = np.arccos(np.clip(np.abs(c), 0.0, 1.0))
    aligned = bool(angles.max() <= angle_tol)
    near = angles <= angle_tol
    both = bool((near & (c > 0)).any() and (near & (c < 0)).any())
    return TwoClusterVerdict(int(cluster_labels(x, threshold).max() + 1), aligned, both, aligned and both,
                             float(angles.max()), int((c > 0).sum()))
