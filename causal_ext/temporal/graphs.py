"""Exact graph utilities on weight matrices (numpy): supports, summary graphs, reachability, repair.

Conventions used across :mod:`causal_ext.temporal`:

* ``W[a, b] != 0`` is the contemporaneous edge ``x_a(t) -> x_b(t)`` (row = cause, column = effect),
  as in ``X_t = X_t W + sum_l X_{t-l} A_l + noise``.
* ``A`` has shape ``(p, d, d)``; ``A[l-1, a, b] != 0`` is the lagged edge ``x_a(t-l) -> x_b(t)``.
* The **summary graph** is the variable-level graph: ``a -> b`` (``a != b``) when ``x_a`` affects
  ``x_b`` at any lag, contemporaneous included. Self-loops (autoregression) are dropped: they never
  change which distinct variable can reach which, and they are not what an order prior talks about.
  With lags it can be cyclic (``a -> b`` at lag 0, ``b -> a`` at lag 1).
"""

from __future__ import annotations

from collections import deque

import numpy as np

__all__ = [
    "summary_weights",
    "transitive_closure",
    "is_dag",
    "find_path",
    "prior_violations",
    "prune_prior_violations",
    "remove_cycles",
]


def _check_square(m: np.ndarray, name: str) -> np.ndarray:
    m = np.asarray(m, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"{name} must be a square (d, d) matrix, got shape {m.shape}")
    return m


def summary_weights(W: np.ndarray, A: np.ndarray | None = None) -> np.ndarray:
    """``S = |W| + sum_l |A_l|`` with a zero diagonal: the weighted summary graph (see module doc)."""
    W = _check_square(W, "W")
    S = np.abs(W).copy()
    if A is not None:
        A = np.asarray(A, dtype=float)
        if A.ndim != 3 or A.shape[1:] != W.shape:
            raise ValueError(f"A must have shape (p, d, d) = (p, {W.shape[0]}, {W.shape[0]}), got {A.shape}")
        S += np.abs(A).sum(axis=0)
    np.fill_diagonal(S, 0.0)
    return S


def transitive_closure(adj: np.ndarray) -> np.ndarray:
    """Boolean ``C[a, b]`` = there is a directed path of length >= 1 from ``a`` to ``b`` (Warshall)."""
    C = _check_square(adj, "adj") != 0
    for k in range(C.shape[0]):
        C |= np.outer(C[:, k], C[k, :])
    return C


def is_dag(adj: np.ndarray) -> bool:
    """True when the directed graph with support ``adj != 0`` has no cycle (self-loops count)."""
    return not np.any(np.diag(transitive_closure(adj)))


def find_path(adj: np.ndarray, source: int, target: int) -> list[int] | None:
    """A shortest directed path ``[source, ..., target]`` (breadth-first) or ``None`` if there is none."""
    support = _check_square(adj, "adj") != 0
    parent = {source: -1}
    queue = deque([source])
    while queue:
        u = queue.popleft()
        for v in np.flatnonzero(support[u]):
            v = int(v)
            if v == target:
                path = [target, u]
                while parent[path[-1]] != -1:
                    path.append(parent[path[-1]])
                return path[::-1]
            if v not in parent:
                parent[v] = u
                queue.append(v)
    return None


def prior_violations(summary: np.ndarray, priors: np.ndarray) -> list[tuple[int, int]]:
    """The prior pairs ``(i, j)`` (``i`` precedes ``j``) whose reversed path ``j -> ... -> i`` exists.

    ``priors`` is an ``(m, 2)`` integer array; the check is exact (transitive closure of the support).
    """
    closure = transitive_closure(summary)
    return [(int(i), int(j)) for i, j in np.asarray(priors, dtype=int).reshape(-1, 2) if closure[j, i]]


def prune_prior_violations(
    W: np.ndarray, A: np.ndarray, priors: np.ndarray
) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Remove summary edges until no prior ``i < j`` has a path ``j -> ... -> i``.

    For each surviving violation a shortest offending path is found and its weakest summary edge
    ``(a, b)`` (smallest ``|W_ab| + sum_l |A_l,ab|``) is cut, i.e. ``W[a, b]`` and every ``A[:, a, b]``
    are zeroed; repeat until the transitive closure shows no violation. Returns copies of ``W`` and
    ``A`` and the list of cut summary edges (empty when the learner already satisfied the priors).
    """
    W, A = np.array(W, dtype=float), np.array(A, dtype=float)
    pruned: list[tuple[int, int]] = []
    while True:
        S = summary_weights(W, A)
        bad = prior_violations(S, priors)
        if not bad:
            return W, A, pruned
        i, j = bad[0]
        path = find_path(S, j, i)
        assert path is not None  # the closure said there is one
        edges = list(zip(path[:-1], path[1:]))
        a, b = min(edges, key=lambda e: S[e])
        W[a, b] = 0.0
        A[:, a, b] = 0.0
        pruned.append((int(a), int(b)))


def remove_cycles(W: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Make the contemporaneous graph acyclic by cutting the weakest edge of a cycle, repeatedly.

    This is NOTEARS's ``threshold till DAG`` repair, applied only when the thresholded ``W`` still
    holds a cycle (the augmented Lagrangian leaves ``h(W)`` small but not exactly zero).
    Returns a copy of ``W`` and the cut edges.
    """
    W = np.array(_check_square(W, "W"), dtype=float)
    cut: list[tuple[int, int]] = []
    while True:
        closure = transitive_closure(W)
        on_cycle = np.flatnonzero(np.diag(closure))
        if on_cycle.size == 0:
            return W, cut
        v = int(on_cycle[0])
        if W[v, v] != 0:
            W[v, v] = 0.0
            cut.append((v, v))
            continue
        # shortest cycle through v: an edge v -> u followed by a shortest path u -> v
        best: list[int] | None = None
        for u in np.flatnonzero(W[v]):
            path = find_path(W, int(u), v)
            if path is not None and (best is None or len(path) + 1 < len(best)):
                best = [v, *path]
        assert best is not None
        edges = list(zip(best[:-1], best[1:]))
        a, b = min(edges, key=lambda e: abs(W[e]))
        W[a, b] = 0.0
        cut.append((int(a), int(b)))
