"""Exact graph checks and repairs, and the SHD metrics."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.temporal.graphs import (
    find_path,
    is_dag,
    prior_violations,
    prune_prior_violations,
    remove_cycles,
    summary_weights,
    transitive_closure,
)
from causal_ext.temporal.metrics import shd, shd_lagged, structure_metrics


def test_closure_dag_and_paths() -> None:
    adj = np.zeros((4, 4))
    adj[0, 1] = adj[1, 2] = adj[2, 3] = 1.0
    C = transitive_closure(adj)
    assert C[0, 3] and C[1, 3] and not C[3, 0] and not C[0, 0]
    assert is_dag(adj)
    assert find_path(adj, 0, 3) == [0, 1, 2, 3]
    assert find_path(adj, 3, 0) is None
    adj[0, 3] = 1.0
    assert find_path(adj, 0, 3) == [0, 3]  # shortest
    adj[3, 1] = 1.0
    assert not is_dag(adj)
    assert transitive_closure(adj)[1, 1]


def test_summary_drops_self_loops_and_sums_lags() -> None:
    W = np.array([[0.0, -0.5], [0.0, 0.0]])
    A = np.array([[[0.3, 0.0], [0.2, 0.4]], [[0.0, 0.1], [-0.2, 0.0]]])
    S = summary_weights(W, A)
    np.testing.assert_allclose(S, [[0.0, 0.6], [0.4, 0.0]])
    with pytest.raises(ValueError, match="A must have shape"):
        summary_weights(W, A[:, :1])


def test_prune_cuts_the_weakest_edge_of_a_prohibited_path() -> None:
    # 0 -> 1 (W, strong), 1 -> 2 (lag 1, weak), 2 -> 0 (lag 1): the summary graph is a 3-cycle
    W = np.zeros((3, 3))
    W[0, 1] = 1.0
    A = np.zeros((1, 3, 3))
    A[0, 1, 2] = 0.2
    A[0, 2, 0] = 0.6
    priors = np.array([[2, 0]])  # 2 < 0: the path 0 -> 1 -> 2 is prohibited
    assert prior_violations(summary_weights(W, A), priors) == [(2, 0)]
    W2, A2, pruned = prune_prior_violations(W, A, priors)
    assert pruned == [(1, 2)]
    assert A2[0, 1, 2] == 0.0 and W2[0, 1] == 1.0 and A2[0, 2, 0] == 0.6
    assert prior_violations(summary_weights(W2, A2), priors) == []
    assert prune_prior_violations(W2, A2, priors)[2] == []  # nothing left to cut


def test_remove_cycles_cuts_weakest_edge() -> None:
    W = np.zeros((3, 3))
    W[0, 1], W[1, 2], W[2, 0] = 1.0, -0.3, 0.8
    W2, cut = remove_cycles(W)
    assert cut == [(1, 2)] and is_dag(W2)
    assert remove_cycles(W2)[1] == []


def test_shd_counts_reversal_once() -> None:
    true = np.zeros((3, 3))
    true[0, 1] = true[1, 2] = 1.0
    assert shd(true, true) == 0
    rev = true.copy()
    rev[0, 1], rev[1, 0] = 0.0, 1.0
    assert shd(true, rev) == 1
    extra_missing = true.copy()
    extra_missing[1, 2], extra_missing[0, 2] = 0.0, 1.0
    assert shd(true, extra_missing) == 2
    assert shd(true, np.zeros((3, 3))) == 2


def test_lagged_shd_is_hamming_and_structure_metrics() -> None:
    A = np.zeros((2, 2, 2))
    A[0, 0, 1] = A[1, 1, 1] = 0.5
    B = np.zeros((2, 2, 2))
    B[0, 1, 0] = 0.5  # a "reversed" lagged edge is two errors: time cannot run backwards
    B[1, 1, 1] = 0.5
    assert shd_lagged(A, B) == 2
    W = np.zeros((2, 2))
    m = structure_metrics(W, A, W, B, priors=np.array([[0, 1]]))
    assert m["shd_w"] == 0 and m["shd_a"] == 2
    assert m["shd_summary"] == 1  # summary 0 -> 1 became 1 -> 0
    assert m["violations"] == 1 and m["f1_summary"] == 0.0
    with pytest.raises(ValueError, match="one shape"):
        shd_lagged(A, B[:1])
