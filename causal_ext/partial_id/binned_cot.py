"""Baseline conditional-OT bounds: bin the covariates into groups of about k neighbours, exact OT per bin.

This is the plug-in COT estimator the wavelet method is compared with (a
k-nearest-neighbour partition of the covariate space): the conditional laws
in a bin are the raw empirical laws of the treated and control outcomes that
fall in it, each bin's bounds are solved exactly with ``ot.emd``, and the bins
are averaged with the pooled units' weights. Nothing is smoothed, so its bias
is that of within-bin covariate variation plus the small-sample bias of
empirical OT on ``~k/2`` points per arm, which is what keeps plug-in COT
estimators from being asymptotically normal in general.

Partition (the open choices):

* one covariate: equal-count bins of the pooled units sorted by the covariate;
* several covariates: k-means (scikit-learn, ``n_init=4``) on the
  standardised pooled covariates, the usual way to form neighbourhoods of
  about equal size in several dimensions;
* ``neighbors`` (units per bin) defaults to ``round(sqrt(n))`` for ``n``
  pooled units, balancing the number of bins against the units in each;
* a bin without treated or without control units is merged into its
  neighbour (next bin in order for one covariate; nearest valid centre
  otherwise), so every unit is used.

The interval is the same influence-function interval as for the wavelet
estimator (:mod:`cells`, cell propensity = treated share of the bin); it is
reported for comparison and is not claimed to be valid for this estimator.
"""

from __future__ import annotations

import numpy as np
from sklearn.cluster import KMeans

from causal_ext.partial_id._inputs import check_alpha, check_covariates, check_outcomes, pool
from causal_ext.partial_id.base import BoundsEstimator
from causal_ext.partial_id.cells import CellBounds, CellLaws, bounds_over_cells
from causal_ext.partial_id.costs import Cost, resolve_cost

__all__ = ["BinnedConditionalOTBounds", "binned_cot_bounds", "covariate_bins"]


def _merge_sequential(bins: np.ndarray, treated: np.ndarray, n_bins: int) -> np.ndarray:
    """Merge ordered bins lacking an arm into the next one (the last into the previous)."""
    has1 = np.bincount(bins[treated], minlength=n_bins) > 0
    has0 = np.bincount(bins[~treated], minlength=n_bins) > 0
    target = np.arange(n_bins)
    pending: list[int] = []
    last_ok = -1
    for b in range(n_bins):
        pending.append(b)
        if has1[pending].any() and has0[pending].any():
            target[pending] = b
            last_ok, pending = b, []
    if pending:
        target[pending] = last_ok
    return target[bins]


def covariate_bins(x: np.ndarray, treated: np.ndarray, neighbors: int, random_state: int = 0) -> np.ndarray:
    """Bin index of every pooled unit; every bin holds treated and control units."""
    n, d = x.shape
    n_bins = max(1, n // neighbors)
    if d == 1:
        rank = np.empty(n, int)
        rank[np.argsort(x[:, 0], kind="stable")] = np.arange(n)
        bins = rank * n_bins // n
        return _merge_sequential(bins, treated, n_bins)
    z = (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
    km = KMeans(n_clusters=n_bins, n_init=4, random_state=random_state).fit(z)
    bins = km.labels_
    has1 = np.bincount(bins[treated], minlength=n_bins) > 0
    ok = has1 & (np.bincount(bins[~treated], minlength=n_bins) > 0)
    if not ok.all():
        centres = km.cluster_centers_[ok]
        nearest = np.argmin(((z[:, None, :] - centres[None]) ** 2).sum(-1), axis=1)
        bins = np.where(ok[bins], bins, np.flatnonzero(ok)[nearest])
    return bins


def binned_cot_bounds(y1: np.ndarray, y0: np.ndarray, x1: np.ndarray, x0: np.ndarray,
                      cost: str | Cost = "quadratic", neighbors: int | None = None, alpha: float = 0.05,
                      random_state: int = 0) -> tuple[CellBounds, int]:
    """Functional core of :class:`BinnedConditionalOTBounds`; returns the bounds and the bin count."""
    y1, y0 = check_outcomes(y1, y0)
    x1, x0 = check_covariates(x1, x0, len(y1), len(y0))
    alpha = check_alpha(alpha)
    y, treated, x = pool(y1, y0, x1, x0)
    k = int(neighbors) if neighbors is not None else int(round(np.sqrt(len(y))))
    if k < 2:
        raise ValueError(f"neighbors={neighbors} must be >= 2 units per bin")
    bins = covariate_bins(x, treated, k, random_state)
    labels, unit_cell = np.unique(bins, return_inverse=True)
    laws: list[CellLaws | None] = []
    for g in range(len(labels)):
        t, c = (unit_cell == g) & treated, (unit_cell == g) & ~treated
        n_t, n_c = int(t.sum()), int(c.sum())
        laws.append(CellLaws(ya=y[t], a=np.full(n_t, 1.0 / n_t), yb=y[c], b=np.full(n_c, 1.0 / n_c),
                             propensity=n_t / (n_t + n_c)))
    return bounds_over_cells(laws, unit_cell, y, treated, resolve_cost(cost), alpha), len(labels)


class BinnedConditionalOTBounds(BoundsEstimator):
    """k-NN-binned plug-in COT bounds (the baseline; see the module docstring).

    Args:
        cost: ``"quadratic"``, ``"absolute"``, ``"greater"`` or a broadcasting callable.
        neighbors: pooled units per bin (default ``round(sqrt(n))``).
        alpha: intervals have level ``1 - alpha`` (quadratic cost only).
        random_state: seed of k-means (several covariates only).

    Fitted attributes: those of :class:`~causal_ext.partial_id.base.BoundsEstimator`
    plus ``n_bins_``.
    """

    def __init__(self, cost: str | Cost = "quadratic", neighbors: int | None = None, alpha: float = 0.05,
                 random_state: int = 0) -> None:
        self.cost = cost
        self.neighbors = neighbors
        self.alpha = alpha
        self.random_state = random_state

    def fit(self, y1: np.ndarray, y0: np.ndarray, x1: np.ndarray | None = None,
            x0: np.ndarray | None = None) -> BinnedConditionalOTBounds:
        """Bin the pooled covariates and average the per-bin exact OT bounds."""
        result, n_bins = binned_cot_bounds(y1, y0, x1, x0, cost=self.cost, neighbors=self.neighbors,
                                           alpha=self.alpha, random_state=self.random_state)
        self._store(result)
        self.n_bins_ = n_bins
        return self
