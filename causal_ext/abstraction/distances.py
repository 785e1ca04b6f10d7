"""Distances between the high-level outcome and the abstracted low-level outcome of each intervention.

Every distance takes the two paths' outcomes of one high-level variable as arrays
``hl, ll`` of shape ``[n, r, d]`` (``n`` interventions, ``r`` replicate runs each, ``d``
flattened value dimensions) and returns one non-negative number per intervention.
Quantities that need a scale (normaliser, bins, kernel bandwidth) are computed once per
variable from the pooled values of both paths over all ``n`` interventions, so the CAE
is unit-free and comparable across variables and systems. The choices:

* ``mse``: squared Euclidean distance between the two paths' *mean* outcomes of an
  intervention (the replicate average), divided by the total variance of those means
  pooled over both paths and all interventions. 0 when the diagram commutes in
  expectation; about 2 when the paths are independent with equal spread; bounded by 4
  (the pooled variance includes the gap). A variable that is the same constant on both
  paths scores 0. This compares first moments only.
* ``js``: Jensen-Shannon divergence (base 2, in [0, 1]) between the two paths'
  replicate distributions, per value dimension, averaged over dimensions (marginals).
  Integer-valued variables (within 1e-6) with at most ``max_categories`` distinct pooled
  values are compared category by category; others are binned into ``bins`` equal-width bins over
  the pooled range. With one replicate (deterministic systems) it is 0 or 1 per
  dimension: whether both outcomes land in the same category or bin.
* ``mmd``: biased (V-statistic) squared maximum mean discrepancy with a Gaussian kernel
  ``exp(-|x - y|^2 / (2 s^2))`` on the whole value vector, in [0, 2]; ``s`` is the
  median pairwise distance of the pooled values (median heuristic; 1 if all coincide).
  For two point masses it is ``2 (1 - k(hl, ll))``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

Distance = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _check(hl: np.ndarray, ll: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hl, ll = np.asarray(hl, dtype=float), np.asarray(ll, dtype=float)
    if hl.ndim != 3 or ll.ndim != 3 or hl.shape[0] != ll.shape[0] or hl.shape[2] != ll.shape[2]:
        raise ValueError(f"distances take hl [n, r, d] and ll [n, r', d] with matching n and d; got "
                         f"{hl.shape} and {ll.shape}.")
    return hl, ll


def mse(hl: np.ndarray, ll: np.ndarray) -> np.ndarray:
    """Normalised squared distance of the replicate means (module docstring), shape ``[n]``."""
    hl, ll = _check(hl, ll)
    mh, ml = hl.mean(1), ll.mean(1)
    sq = ((mh - ml) ** 2).sum(1)
    var = float(np.concatenate([mh, ml]).var(0).sum())
    return sq / var if var > 1e-12 else np.zeros(len(sq))


def discretize(hl: np.ndarray, ll: np.ndarray, bins: int = 10,
               max_categories: int = 32) -> tuple[np.ndarray, np.ndarray, int]:
    """Shared integer codes of ``hl`` and ``ll`` (one value dimension) and their number (``js`` rules)."""
    pooled = np.concatenate([hl.ravel(), ll.ravel()])
    if np.allclose(pooled, np.round(pooled), rtol=0.0, atol=1e-6):
        uniq = np.unique(np.round(pooled))
        if len(uniq) <= max_categories:
            return np.searchsorted(uniq, np.round(hl)), np.searchsorted(uniq, np.round(ll)), len(uniq)
    lo, hi = float(pooled.min()), float(pooled.max())
    if hi - lo < 1e-12:
        return np.zeros(hl.shape, dtype=np.int64), np.zeros(ll.shape, dtype=np.int64), 1
    edges = np.linspace(lo, hi, bins + 1)[1:-1]
    return np.searchsorted(edges, hl, side="right"), np.searchsorted(edges, ll, side="right"), bins


def _entropy2(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(p > 0, p * np.log2(p), 0.0).sum(-1)


def js(hl: np.ndarray, ll: np.ndarray, bins: int = 10, max_categories: int = 32) -> np.ndarray:
    """Jensen-Shannon divergence per intervention (module docstring), shape ``[n]``."""
    hl, ll = _check(hl, ll)
    out = np.zeros(hl.shape[0])
    for j in range(hl.shape[2]):
        ch, cl, k = discretize(hl[:, :, j], ll[:, :, j], bins, max_categories)
        ph = np.stack([(ch == c).mean(1) for c in range(k)], axis=1)
        pl = np.stack([(cl == c).mean(1) for c in range(k)], axis=1)
        out += np.clip(_entropy2((ph + pl) / 2) - (_entropy2(ph) + _entropy2(pl)) / 2, 0.0, 1.0)
    return out / hl.shape[2]


def median_bandwidth(x: np.ndarray, max_points: int = 500, seed: int = 0) -> float:
    """Median pairwise Euclidean distance of the rows of ``x`` (a fixed subsample of ``max_points``)."""
    x = np.asarray(x, dtype=float).reshape(len(x), -1)
    if len(x) > max_points:
        x = x[np.random.default_rng(seed).choice(len(x), max_points, replace=False)]
    d = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    d = d[np.triu_indices(len(x), k=1)]
    d = d[d > 1e-12]
    return float(np.median(d)) if len(d) else 1.0


def mmd(hl: np.ndarray, ll: np.ndarray, bandwidth: float | None = None) -> np.ndarray:
    """Biased squared MMD per intervention with a Gaussian kernel (module docstring), shape ``[n]``."""
    hl, ll = _check(hl, ll)
    s = bandwidth if bandwidth is not None else median_bandwidth(np.concatenate(
        [hl.reshape(-1, hl.shape[2]), ll.reshape(-1, ll.shape[2])]))

    def k(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        sq = ((a[:, :, None, :] - b[:, None, :, :]) ** 2).sum(-1)
        return np.exp(-sq / (2.0 * s * s)).mean((1, 2))

    return np.clip(k(hl, hl) + k(ll, ll) - 2.0 * k(hl, ll), 0.0, 2.0)


DISTANCES: dict[str, Distance] = {"mse": mse, "js": js, "mmd": mmd}


def get_distance(name: str | Distance) -> Distance:
    """The distance called ``name`` (``mse``, ``js``, ``mmd``), or ``name`` itself if it is callable."""
    if callable(name):
        return name
    if name not in DISTANCES:
        raise ValueError(f"distance '{name}' is unknown; use one of {sorted(DISTANCES)} or pass a callable "
                         "f(hl [n, r, d], ll [n, r, d]) -> [n].")
    return DISTANCES[name]


__all__ = ["DISTANCES", "Distance", "discretize", "get_distance", "js", "median_bandwidth", "mmd", "mse"]
