"""Known answers of the dynamics: V = I, the two-cluster case, time reparametrisation, and a failure case."""

from __future__ import annotations

import numpy as np

from causal_ext.attention_dynamics import CausalAttentionFlow, cluster_labels, uniform_sphere


def test_identity_value_all_tokens_converge_to_the_first_token() -> None:
    X0 = uniform_sphere(3, 6, 3, seed=0)
    flow = CausalAttentionFlow(np.eye(3), horizon=40.0, n_save=5).fit(X0)
    # token 1 attends only to itself and P_x(x) = 0: it never moves
    first = np.broadcast_to(X0[:, 0].numpy(), (5, 3, 3))
    np.testing.assert_allclose(flow.trajectory_[:, :, 0], first, atol=1e-12)
    np.testing.assert_allclose(flow.final_, np.broadcast_to(X0[:, :1].numpy(), (3, 6, 3)), atol=1e-5)
    assert flow.converged_.all()


def test_positive_top_eigenvalue_gives_two_clusters_at_plus_minus_e1() -> None:
    V = np.diag([1.0, 0.3, -0.5])
    e1 = np.array([1.0, 0.0, 0.0])
    flow = CausalAttentionFlow(V, horizon=30.0, n_save=4).fit(uniform_sphere(4, 8, 3, seed=1))
    assert flow.converged_.all()
    np.testing.assert_allclose(np.abs(flow.final_ @ e1), 1.0, atol=1e-6)  # every token at +e1 or -e1
    verdicts = flow.verdicts(e1)
    assert all(v.aligned for v in verdicts)
    assert [v.two_clusters for v in verdicts] == [True, True, False, True]  # both signs in three of four runs
    assert [v.n_clusters for v in verdicts] == [2, 2, 1, 2]
    # token 1 follows Oja's flow alone: it ends at sign(<x1(0), e1>) e1
    np.testing.assert_allclose(flow.final_[:, 0, 0], np.sign(flow.trajectory_[0, :, 0, 0]), atol=1e-6)


def test_time_dependent_value_is_a_time_change() -> None:
    # V(t) = c(t) V0 with c > 0 only rescales time: X_td(T) = X(tau(T)),
    # tau(T) = int_0^T c = T + 0.5 (1 - cos T)
    V0 = np.diag([1.0, 0.3, -0.5])
    X0 = uniform_sphere(2, 5, 3, seed=2)
    T = 3.0
    td = CausalAttentionFlow(lambda t: (1 + 0.5 * np.sin(t)) * V0, horizon=T, n_save=2, rtol=1e-10,
                             atol=1e-12).fit(X0)
    auto = CausalAttentionFlow(V0, horizon=T + 0.5 * (1 - np.cos(T)), n_save=2, rtol=1e-10, atol=1e-12)
    auto.fit(X0)
    np.testing.assert_allclose(td.final_, auto.final_, atol=1e-7)


def test_negative_identity_value_leaves_three_clusters() -> None:
    # V = -I: token 1 rests, token 2 flees to -x1(0), token 3 settles where it is equally far from both,
    # on the great sphere orthogonal to x1(0): three clusters, not two (lambda_max = -1 <= 0)
    X0 = uniform_sphere(2, 3, 3, seed=5)
    flow = CausalAttentionFlow(-np.eye(3), horizon=150.0, n_save=2).fit(X0)
    x1 = X0[:, 0].numpy()
    np.testing.assert_allclose(flow.final_[:, 0], x1, atol=1e-12)
    np.testing.assert_allclose(flow.final_[:, 1], -x1, atol=1e-5)
    np.testing.assert_allclose(np.einsum("bd,bd->b", flow.final_[:, 2], x1), 0.0, atol=1e-5)
    assert [cluster_labels(x).max() + 1 for x in flow.final_] == [3, 3]


def test_negative_top_eigenvalue_breaks_the_two_cluster_limit() -> None:
    # the same spectrum as the two-cluster case shifted down by 1.5: lambda_max = -0.5
    V = np.diag([-0.5, -1.2, -2.0])
    flow = CausalAttentionFlow(V, horizon=30.0, n_save=2).fit(uniform_sphere(4, 8, 3, seed=1))
    verdicts = flow.verdicts(np.array([1.0, 0.0, 0.0]))
    assert not any(v.aligned for v in verdicts)
    assert min(v.n_clusters for v in verdicts) > 2
