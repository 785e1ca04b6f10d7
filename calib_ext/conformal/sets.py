"""Nested multi-label prediction sets from per-label scores, indexed by one threshold lambda in [0, 1].

Each set family assigns every instance ``i`` and label ``s`` an **entry time** ``t[i, s]`` in [0, 1]: the
smallest lambda at which ``s`` joins the set. The prediction set is

    S_lambda(x_i) = {s : t[i, s] <= lambda},

so sets are nested (monotone) in lambda, and ``S_1`` holds every label. Two families:

* **flat** (the usual thresholding; the baseline's sets): ``t[i, s] = 1 - p_s(x_i)``, i.e.
  ``S_lambda = {s : p_s >= 1 - lambda}``.
* **hierarchical** (CSC's sets): every non-root node ``v`` of the hierarchy offers its best label,
  ``rep(v) = argmax_{s in labels under v} p_s``, as soon as the node itself is likely enough. The node's
  probability is the noisy-OR of its labels, the probability that at least one of them is present
  if labels were independent:

      q_v(x) = 1 - prod_{s under v} (1 - p_s(x)),

  and ``t[i, s] = min(1 - p_s, min{1 - q_v : rep(v) = s})``. A label node's own ``q`` is ``p_s``, so
  the flat sets are contained in the hierarchical ones at every lambda. When the model is sure a
  patient needs *a* beta blocker but not which, the node ``C07AB`` gets in before any one substance
  would: the set hedges with the closest guess instead of leaving the class unmatched. The root is
  left out (it would always add the global top label, which says nothing about the hierarchy).
  Ties in the argmax go to the first label in column order.

Both are monotone in lambda for every input, which conformal risk control requires.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from calib_ext.conformal.hierarchy import Hierarchy


def check_scores(scores: np.ndarray, n_labels: int | None = None, name: str = "scores") -> np.ndarray:
    """``scores`` as float64 ``[n, L]`` in [0, 1]; a clear error otherwise."""
    arr = np.asarray(scores, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array [n_instances, n_labels]; got shape {arr.shape}.")
    if n_labels is not None and arr.shape[1] != n_labels:
        raise ValueError(f"{name} has {arr.shape[1]} label columns but {n_labels} labels were given; "
                         "pass one column per label, in the labels' order.")
    if not np.isfinite(arr).all() or (arr < 0).any() or (arr > 1).any():
        raise ValueError(f"{name} must be probabilities in [0, 1] (finite); apply a sigmoid to logits first.")
    return arr


def flat_entry_times(scores: np.ndarray) -> np.ndarray:
    """``t = 1 - p``: ``S_lambda = {s : p_s >= 1 - lambda}``."""
    return 1.0 - check_scores(scores)


def hierarchical_entry_times(scores: np.ndarray, hierarchy: Hierarchy, labels: Sequence[str]) -> np.ndarray:
    """Entry times of the hierarchical family (module docstring), ``[n, L]``.

    Raises:
        HierarchyError: a label is not a node of ``hierarchy``.
        ValueError: ``scores`` is not ``[n, len(labels)]`` in [0, 1].
    """
    labels = list(labels)
    p = check_scores(scores, len(labels))
    hierarchy.check_labels(labels)
    col = {lab: j for j, lab in enumerate(labels)}
    t = 1.0 - p
    rows = np.arange(p.shape[0])
    log_miss = np.log1p(-np.minimum(p, 1.0 - 1e-15))  # log(1 - p), finite
    for node in hierarchy.nodes:
        if node == hierarchy.root:
            continue
        cols = [col[n] for n in hierarchy.descendants(node) if n in col]
        if len(cols) < 2:
            continue  # a node with one label offers that label at 1 - p: no change
        cols_arr = np.array(sorted(cols))
        q = -np.expm1(log_miss[:, cols_arr].sum(axis=1))  # 1 - prod(1 - p)
        rep = cols_arr[np.argmax(p[:, cols_arr], axis=1)]
        t[rows, rep] = np.minimum(t[rows, rep], 1.0 - q)
    return np.clip(t, 0.0, 1.0)


def prediction_sets(entry_times: np.ndarray, lam: float) -> np.ndarray:
    """Boolean ``[n, L]`` membership of ``S_lambda``: ``t <= lambda``."""
    return np.asarray(entry_times) <= lam
