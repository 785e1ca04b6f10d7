"""Cluster detection, top eigen-directions and the dimension-deduction measures."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.attention_dynamics import (
    CausalAttentionFlow,
    cluster_labels,
    lambda_max,
    principal_fraction,
    subspace_fraction,
    top_eigendirections,
    two_cluster_verdict,
    uniform_sphere,
)


def _circle(angles: list[float]) -> np.ndarray:
    return np.stack([np.cos(angles), np.sin(angles), np.zeros(len(angles))], axis=1)


def test_single_linkage_chains_close_points_and_separates_far_ones() -> None:
    X = _circle([0.0, 0.04, 0.08, 0.12, 1.0, 1.03, np.pi])
    np.testing.assert_array_equal(cluster_labels(X, threshold=0.05), [0, 0, 0, 0, 1, 1, 2])
    np.testing.assert_array_equal(cluster_labels(X, threshold=0.035), [0, 1, 2, 3, 4, 4, 5])
    assert cluster_labels(X[:1]).tolist() == [0]
    with pytest.raises(ValueError, match="threshold"):
        cluster_labels(X, threshold=0.0)


def test_two_cluster_verdict_cases() -> None:
    u = np.array([1.0, 0.0, 0.0])
    both = two_cluster_verdict(_circle([0.0, np.pi, 0.01, np.pi - 0.02]), u)
    assert (both.two_clusters, both.aligned, both.both_signs) == (True, True, True)
    assert (both.n_clusters, both.n_plus) == (2, 2)
    one = two_cluster_verdict(_circle([0.0, 0.01]), u)
    assert one.aligned and not one.both_signs and not one.two_clusters and one.n_clusters == 1
    off = two_cluster_verdict(_circle([0.0, np.pi, np.pi / 2]), u)
    assert not off.aligned and off.both_signs and not off.two_clusters
    assert off.max_angle == pytest.approx(np.pi / 2)
    with pytest.raises(ValueError, match="u must have length"):
        two_cluster_verdict(_circle([0.0]), np.ones(2))


def test_top_eigendirections_symmetric_and_complex_pair() -> None:
    w, U = top_eigendirections(np.diag([1.0, 3.0, 2.0]), 2)
    np.testing.assert_allclose(w, [3.0, 2.0])
    np.testing.assert_allclose(U, [[0, 0], [1, 0], [0, 1]], atol=1e-12)
    # a rotation-scaling block a +- ib (a = 0.5) above a real eigenvalue 0.2: the top "direction" is the plane
    R = np.array([[0.5, -2.0, 0.0], [2.0, 0.5, 0.0], [0.0, 0.0, 0.2]])
    assert lambda_max(R) == pytest.approx(0.5)
    w, P = top_eigendirections(R, 1)
    assert P.shape == (3, 2) and np.allclose(w.real, 0.5) and np.allclose(np.abs(w.imag), 2.0)
    np.testing.assert_allclose(P @ P.T, np.diag([1.0, 1.0, 0.0]), atol=1e-12)
    with pytest.raises(ValueError, match="k must be"):
        top_eigendirections(R, 4)
    with pytest.raises(ValueError, match="square"):
        lambda_max(np.ones((2, 3)))


def test_fractions_by_hand() -> None:
    X = np.array([[1.0, 0.0, 0.0], [0.0, 0.6, 0.8], [0.0, 0.0, 1.0]])
    E12 = np.eye(3)[:, :2]
    assert subspace_fraction(X, E12) == pytest.approx((1 + 0.36 + 0) / 3)
    s2 = np.linalg.svd(X, compute_uv=False) ** 2
    assert principal_fraction(X, 2) == pytest.approx(s2[:2].sum() / s2.sum())
    assert principal_fraction(_circle([0.1, 0.7, 2.0]), 2) == pytest.approx(1.0)
    assert subspace_fraction(np.stack([X, X]), E12).shape == (2,)


def test_tokens_collapse_onto_the_top_eigenplane_before_clustering() -> None:
    # d = 8: V has top eigenvalues 0.5 and 0.4, the rest at most -0.4. The share of the tokens in the top-2
    # eigenplane grows from about 2/8 to 1, and does so long before the share on the top eigenvector does.
    d = 8
    U, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((d, d)))
    V = U @ np.diag([0.5, 0.4, -0.4, -0.6, -0.8, -1.0, -1.2, -1.4]) @ U.T
    flow = CausalAttentionFlow(V, horizon=40.0, n_save=41).fit(uniform_sphere(8, 10, d, seed=0))
    top2 = subspace_fraction(flow.trajectory_, U[:, :2]).mean(-1)
    top1 = subspace_fraction(flow.trajectory_, U[:, :1]).mean(-1)
    assert top2[0] < 0.4 and top2[-1] > 0.999
    t2, t1 = (flow.times_[np.argmax(f > 0.95)] for f in (top2, top1))
    assert t2 < t1 / 2
    assert principal_fraction(flow.trajectory_[10], 2).min() > 0.99  # the cloud alone shows the 2-D structure
