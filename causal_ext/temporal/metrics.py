"""Structure-recovery metrics for lag-aware graphs: SHD of ``W``, of ``A`` and of the summary graph.

* ``shd`` (contemporaneous ``W`` and the summary graph): the usual structural Hamming distance, the
  number of edge insertions, deletions and reversals needed (a reversed edge counts once), computed
  per unordered pair ``{a, b}``: the pair costs 1 when its directed edges differ.
* ``shd_lagged`` (``A``): lagged edges ``x_a(t-l) -> x_b(t)`` cannot be reversed (time orders them), so
  it is the Hamming distance between supports, summed over lags (self-loops included).
* Summary precision / recall / F1 over the off-diagonal directed edges.
"""

from __future__ import annotations

import numpy as np

from causal_ext.temporal.graphs import prior_violations, summary_weights

__all__ = ["shd", "shd_lagged", "structure_metrics"]


def shd(true: np.ndarray, est: np.ndarray) -> int:
    """Structural Hamming distance between two directed graphs given by their supports (``!= 0``)."""
    t, e = np.asarray(true) != 0, np.asarray(est) != 0
    if t.shape != e.shape or t.ndim != 2:
        raise ValueError(f"true and est must be (d, d) matrices of one shape, got {t.shape} and {e.shape}")
    diff = t != e
    pair = diff | diff.T
    return int(np.triu(pair, k=1).sum() + np.trace(diff))


def shd_lagged(true: np.ndarray, est: np.ndarray) -> int:
    """Hamming distance between lagged supports ``(p, d, d)`` (no reversals across time)."""
    t, e = np.asarray(true) != 0, np.asarray(est) != 0
    if t.shape != e.shape or t.ndim != 3:
        raise ValueError(f"true and est must be (p, d, d) arrays of one shape, got {t.shape} and {e.shape}")
    return int((t != e).sum())


def structure_metrics(W_true: np.ndarray, A_true: np.ndarray, W_est: np.ndarray, A_est: np.ndarray,
                      priors: np.ndarray | None = None) -> dict[str, float]:
    """SHD of ``W``, ``A`` and the summary graph, summary precision/recall/F1, and prior violations.

    ``violations`` counts the prior pairs ``(i, j)`` (``i`` precedes ``j``) for which the estimated
    summary graph holds a path ``j -> ... -> i`` (present only when ``priors`` is given).
    """
    S_true, S_est = summary_weights(W_true, A_true) != 0, summary_weights(W_est, A_est) != 0
    tp = int((S_true & S_est).sum())
    prec = tp / max(int(S_est.sum()), 1)
    rec = tp / max(int(S_true.sum()), 1)
    out: dict[str, float] = {
        "shd_w": shd(W_true, W_est),
        "shd_a": shd_lagged(A_true, A_est),
        "shd_summary": shd(S_true, S_est),
        "precision_summary": prec,
        "recall_summary": rec,
        "f1_summary": 0.0 if prec + rec == 0 else 2 * prec * rec / (prec + rec),
        "edges_w": int((np.asarray(W_est) != 0).sum()),
        "edges_a": int((np.asarray(A_est) != 0).sum()),
    }
    if priors is not None:
        out["violations"] = len(prior_violations(S_est, priors))
    return out
