"""Hierarchy-aware mismatch severity of a prediction set, and its exact curve over lambda.

For an instance with true label set ``Y`` and prediction set ``S``, each true label ``y`` costs its tree
distance to the nearest predicted label, normalised by the largest distance between two labels:

    c(y, S) = min_{s in S} d(y, s) / D_max      (c = 1 when S is empty),

so a hit costs 0, a sibling substance (ATC ``d = 2``) costs ``2 / 10``, and a label matched only by a
drug of another anatomical group costs 1. The patient-level severity aggregates over ``Y``:

* ``"mean"`` (default): ``L(S, Y) = (1/|Y|) sum_{y in Y} c(y, S)`` -- the hierarchy-weighted false-negative
  rate: on a flat tree (every distinct pair at ``D_max``) it *is* the false-negative rate, so severity
  control generalises FNR control and the two are on one scale;
* ``"max"``: ``L(S, Y) = max_{y in Y} c(y, S)`` -- the worst miss of the visit.

Both lie in [0, 1], are 0 exactly when every true label is predicted (``Y`` within ``S``; extra labels
are not penalised -- set size is reported beside severity), and can only fall when ``S`` grows, so on
nested sets they are non-increasing in lambda. An instance with no true labels has severity 0.

:class:`SeverityCurves` evaluates ``L`` at any lambda without rebuilding sets. With distance levels
``0 = l_0 < l_1 < ... < l_K = D_max`` (the distinct label distances) and entry times ``t[i, s]``
(:mod:`calib_ext.conformal.sets`), the first lambda at which some label within ``l_k`` of ``y`` is in
the set is

    T[i, y, k] = min{t[i, s] : d(y, s) <= l_k},

non-increasing in ``k``; then ``c(y, S_lambda) = l_{k*} / D_max`` with ``k* = #{k : T[i, y, k] > lambda}``
(and ``l_{K+1} := D_max``: the empty set). Every jump of ``L_i`` happens at one of the ``T`` values.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from calib_ext.conformal.hierarchy import Hierarchy

AGGREGATES = ("mean", "max")
# a miss at normalised distance <= CLOSE is "close" (ATC: same pharmacological subgroup), else "distant"
CLOSE = 0.5


def true_label_matrix(true_sets: Sequence[Sequence[str]] | np.ndarray, labels: Sequence[str]) -> np.ndarray:
    """Boolean ``[n, L]`` from a list of label collections (or pass a 0/1 matrix through, checked)."""
    labels = list(labels)
    if isinstance(true_sets, np.ndarray) and true_sets.ndim == 2:
        if true_sets.shape[1] != len(labels):
            raise ValueError(f"true label matrix has {true_sets.shape[1]} columns for {len(labels)} labels.")
        return true_sets.astype(bool)
    col = {lab: j for j, lab in enumerate(labels)}
    out = np.zeros((len(true_sets), len(labels)), dtype=bool)
    for i, ys in enumerate(true_sets):
        unknown = [y for y in ys if y not in col]
        if unknown:
            raise ValueError(f"instance {i}: true labels {unknown[:5]} are not among the {len(labels)} "
                             "labels (the score columns); add them to labels or drop them.")
        out[i, [col[y] for y in ys]] = True
    return out


def severity(pred: np.ndarray, true: np.ndarray, dist: np.ndarray, aggregate: str = "mean") -> np.ndarray:
    """Per-instance severity of boolean prediction sets ``pred [n, L]`` vs ``true [n, L]`` (module docstring).

    Direct definition (``[n, L, L]`` memory); :class:`SeverityCurves` is the fast path for many lambdas.
    """
    _check_aggregate(aggregate)
    pred, true = np.asarray(pred, bool), np.asarray(true, bool)
    dist = np.asarray(dist, dtype=np.float64)
    dmax = dist.max()
    if dmax <= 0:
        raise ValueError("all label distances are 0; a severity needs at least two distinct labels.")
    near = np.where(pred[:, None, :], dist[None, :, :], np.inf).min(axis=2)  # [n, L]: min_s d(y, s)
    cost = np.where(np.isfinite(near), near / dmax, 1.0)
    out = np.zeros(len(true))
    has = true.any(axis=1)
    if aggregate == "mean":
        out[has] = (cost * true).sum(1)[has] / true.sum(1)[has]
    else:
        out[has] = np.where(true, cost, 0.0).max(1)[has]
    return out


class SeverityCurves:
    """Severity, false-negative rate and set size of nested sets, exactly, at any lambda.

    Args:
        entry_times: ``[n, L]`` from a set family (:mod:`calib_ext.conformal.sets`).
        true: boolean ``[n, L]`` true label sets.
        dist: ``[L, L]`` tree distances between the labels (:meth:`Hierarchy.distance_matrix`).
        aggregate: ``"mean"`` or ``"max"`` over an instance's true labels (module docstring).
    """

    def __init__(self, entry_times: np.ndarray, true: np.ndarray, dist: np.ndarray, aggregate: str = "mean"
                 ) -> None:
        _check_aggregate(aggregate)
        t = np.asarray(entry_times, dtype=np.float64)
        true = np.asarray(true, dtype=bool)
        dist = np.asarray(dist, dtype=np.float64)
        if t.shape != true.shape or dist.shape != (t.shape[1], t.shape[1]):
            raise ValueError(f"shapes disagree: entry times {t.shape}, true {true.shape}, distances "
                             f"{dist.shape}; they need [n, L], [n, L] and [L, L].")
        self.levels = np.unique(dist)
        self.dmax = float(self.levels[-1])
        if self.dmax <= 0:
            raise ValueError("all label distances are 0; a severity needs at least two distinct labels.")
        self.aggregate = aggregate
        self.entry_times = t
        n = len(t)
        counts = true.sum(1)
        width = max(int(counts.max()) if n else 0, 1)
        self.valid = np.arange(width)[None, :] < counts[:, None]  # [n, m]
        ylab = np.zeros((n, width), dtype=np.int64)  # the j-th true label of each instance
        order = np.argsort(~true, axis=1, kind="stable")[:, :width]
        ylab[self.valid] = order[self.valid]
        self.true_labels = ylab
        # T[i, j, k] = min{ t[i, s] : d(y_ij, s) <= l_k }
        T = np.empty((n, width, len(self.levels)))
        for k, level in enumerate(self.levels):
            near = dist <= level  # [L, L]
            T[:, :, k] = np.where(near[ylab], t[:, None, :], np.inf).min(axis=2)
        T[~self.valid] = -np.inf  # padding: always "hit"
        self.first_within = T
        self._cost_levels = np.append(self.levels, self.dmax) / self.dmax  # index K+1 = empty set

    def __len__(self) -> int:
        return len(self.entry_times)

    def subset(self, idx: np.ndarray) -> SeverityCurves:
        """The curves of instances ``idx`` (no recomputation)."""
        out = object.__new__(SeverityCurves)
        out.levels, out.dmax, out.aggregate = self.levels, self.dmax, self.aggregate
        out._cost_levels = self._cost_levels
        out.entry_times = self.entry_times[idx]
        out.valid, out.true_labels = self.valid[idx], self.true_labels[idx]
        out.first_within = self.first_within[idx]
        return out

    def label_costs(self, lam: float) -> np.ndarray:
        """``[n, m]`` normalised cost of each true label at lambda (0 on padding)."""
        k = (self.first_within > lam).sum(axis=2)
        return np.where(self.valid, self._cost_levels[k], 0.0)

    def losses(self, lam: float) -> np.ndarray:
        """Per-instance severity ``L_i(lambda)``."""
        return self._aggregate(self.label_costs(lam))

    def risk(self, lam: float) -> float:
        """Mean severity over the instances."""
        return float(self.losses(lam).mean())

    def fnr_losses(self, lam: float) -> np.ndarray:
        """Per-instance false-negative rate (share of true labels outside the set; 0 with no true labels)."""
        miss = (self.first_within[:, :, 0] > lam) & self.valid
        cnt = self.valid.sum(1)
        return np.divide(miss.sum(1), cnt, out=np.zeros(len(cnt)), where=cnt > 0)

    def fnr_risk(self, lam: float) -> float:
        """Mean false-negative rate over the instances."""
        return float(self.fnr_losses(lam).mean())

    def risk_path(self, loss: str = "severity") -> tuple[np.ndarray, np.ndarray]:
        """The mean loss as an exact step function: ``R(lambda) = risks[k]`` for
        ``lams[k] <= lambda < lams[k + 1]`` (``lams[0] = 0``), in one sort instead of many evaluations.

        With ``aggregate="mean"`` the mean severity is a sum of per-label drops: when lambda reaches
        ``T[i, y, k]`` the label's cost falls from ``l_{k+1}`` to ``l_k`` (over ``D_max``), weighted by
        ``1 / (n |Y_i|)``. ``loss="fnr"``: the cost falls from 1 to 0 at ``T[i, y, 0]``.
        """
        if loss not in ("severity", "fnr"):
            raise ValueError(f"loss={loss!r}; use 'severity' or 'fnr'.")
        if loss == "severity" and self.aggregate != "mean":
            raise ValueError("risk_path needs aggregate='mean' (the max is not a sum of drops); use risk().")
        n = len(self)
        cnt = self.valid.sum(1)
        weight = np.divide(1.0, cnt * n, out=np.zeros(n), where=cnt > 0)[:, None] * np.ones_like(self.valid)
        if loss == "fnr":
            times, drops = self.first_within[:, :, 0][self.valid], weight[self.valid]
        else:
            step = self._cost_levels[1:] - self._cost_levels[:-1]  # drop when crossing T[..., k]
            times = self.first_within[self.valid].ravel()
            drops = (weight[self.valid][:, None] * step[None, :]).ravel()
        start = float((cnt > 0).sum() / n) if n else 0.0
        order = np.argsort(times, kind="stable")
        ts = np.clip(times[order], 0.0, None)
        cum = start - np.cumsum(drops[order])
        lams = np.unique(ts)
        risks = cum[np.searchsorted(ts, lams, side="right") - 1]
        if len(lams) == 0 or lams[0] > 0:
            lams, risks = np.concatenate([[0.0], lams]), np.concatenate([[start], risks])
        return lams, np.clip(risks, 0.0, None)

    def set_sizes(self, lam: float) -> np.ndarray:
        """``|S_lambda(x_i)|``."""
        return (self.entry_times <= lam).sum(axis=1)

    def breakpoints(self) -> np.ndarray:
        """Sorted lambdas where some ``L_i`` may jump, with 0 and 1 (for an exact infimum over [0, 1])."""
        vals = self.first_within[np.isfinite(self.first_within)]
        return np.unique(np.concatenate([vals[(vals >= 0) & (vals <= 1)], [0.0, 1.0]]))

    def critical_lambdas(self, tolerance: float) -> np.ndarray:
        """``c_i = inf{lambda in [0, 1] : L_i(lambda) <= tolerance}`` per instance.

        ``L_i`` is non-increasing and right-continuous in lambda, so ``1{L_i(lambda) > tolerance}`` equals
        ``1{lambda < c_i}``: the exceedance count at any lambda is ``#{c_i > lambda}``.
        """
        n, m, K = self.first_within.shape
        flat = np.clip(self.first_within.reshape(n, m * K), 0.0, 1.0)
        cand = np.concatenate([np.zeros((n, 1)), flat], axis=1)
        cand = np.sort(cand, axis=1)  # [n, C]
        k = (self.first_within[:, None, :, :] > cand[:, :, None, None]).sum(axis=3)  # [n, C, m]
        cost = np.where(self.valid[:, None, :], self._cost_levels[k], 0.0)
        loss = self._aggregate(cost)  # [n, C]
        ok = loss <= tolerance + 1e-12
        first = np.argmax(ok, axis=1)  # L_i(1) = 0, so some candidate is ok whenever tolerance >= 0
        return cand[np.arange(n), first]

    def distance_shares(self, lam: float) -> dict[str, float]:
        """Shares of all true labels (pooled) that are exact hits, close misses (normalised distance in
        (0, CLOSE]) and distant misses (> CLOSE, the empty set included)."""
        cost = self.label_costs(lam)[self.valid]
        total = max(len(cost), 1)
        return {"exact": float((cost == 0).sum() / total),
                "close": float(((cost > 0) & (cost <= CLOSE)).sum() / total),
                "distant": float((cost > CLOSE).sum() / total)}

    def _aggregate(self, cost: np.ndarray) -> np.ndarray:
        if self.aggregate == "max":
            return cost.max(axis=-1)
        cnt = self.valid.sum(1)
        if cost.ndim == 3:
            cnt = cnt[:, None]
        return np.divide(cost.sum(-1), cnt, out=np.zeros(cost.shape[:-1]), where=cnt > 0)


def hierarchy_distances(hierarchy: Hierarchy, labels: Sequence[str]) -> np.ndarray:
    """Alias of :meth:`Hierarchy.distance_matrix` (float64) for the label columns."""
    return hierarchy.distance_matrix(labels).astype(np.float64)


def _check_aggregate(aggregate: str) -> None:
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate={aggregate!r}; use one of {AGGREGATES}.")
