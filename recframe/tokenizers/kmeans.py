"""Seeded k-means and balanced k-means on numpy arrays (the core of RQ-KMeans and RQ-VAE init).

Two backends behind one call (:func:`kmeans_fit`, or :func:`kmeans` for the bare triple):

* ``backend="faiss"``: FAISS's k-means (``faiss.Kmeans``: k-means++ seeding, Lloyd iterations in
  float32 BLAS over all points, no subsampling, empty clusters split; a GPU when FAISS sees one and
  ``gpu`` is not ``False``). It stops when an iteration lowers the inertia by less than ``tol``
  (relative) or after ``n_iter`` iterations; its seed is drawn from ``rng``, so a fixed seed gives
  identical labels in one process on one device. ``n_init > 1`` runs that many seeds, keeps the
  lowest inertia. The final labels are the float64 nearest centroids (:func:`nearest`, the same
  function encoding uses), so re-encoding the training points reproduces them. FAISS has no
  capacity-constrained assignment, so ``balanced=True`` always runs the hand-written loop below.
* ``backend="lloyd"`` (hand-written, float64; the default of :func:`kmeans`, which RQ-VAE's
  codebook initialisation calls): k-means++ seeding (Arthur & Vassilvitskii, 2007) then Lloyd
  iterations until the assignment stops changing (or ``n_iter``); an empty cluster is re-seeded at the point
  farthest from its centroid (as scikit-learn does). With ``n_init > 1`` the run with the lowest
  inertia is kept. The final labels are the nearest centroids, so re-encoding the training points
  reproduces them.
* ``backend="auto"`` (the default of :class:`~recframe.tokenizers.RQKMeansTokenizer`): FAISS when
  there are at least ``FAISS_MIN_POINTS = 39`` points per cluster (FAISS's own floor, below which it
  warns that the fit is unreliable), the hand-written loop otherwise. Small catalogues keep the
  hand-written loop: on the planted 60-item test set (``tests/generative/test_models.py``, 2 x 8
  codes over identity-like features) TIGER reached test NDCG@10 0.361 on hand-written codes and 0.106
  (below Popularity's 0.113) on FAISS's, and ML-100K (1,682 items, 64 codes: 26 points per code) keeps
  the codes every recorded ML-100K result was built on. Catalogues of 2,496 items and more at 64 codes
  (Amazon, the scale benchmark) get FAISS.
* ``balanced=True``: Lloyd iterations whose assignment step is :func:`balanced_assign`, a
  capacity-constrained assignment in which every cluster gets ``floor(n/k)`` or ``ceil(n/k)``
  points exactly. It runs in rounds (deferred acceptance): each unassigned point proposes to its
  nearest cluster that still has room; each cluster keeps its closest proposers up to its
  remaining capacity and turns the rest away; repeat. At most ``k`` rounds, each vectorised
  ``O(n k)``. The ``n mod k`` clusters allowed ``ceil(n/k)`` points are the ones most points have
  as their nearest centroid. This is the greedy variant of equal-size k-means used for
  semantic IDs (e.g. OneRec's balanced RQ-KMeans), chosen over Sinkhorn rounding because it gives
  exactly equal sizes with no temperature to tune. Centroids are the means of their (constrained)
  clusters, so every residual level still lowers the reconstruction error.

Distances are squared Euclidean in float64, computed in row chunks to bound memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import sparse

CHUNK_ROWS = 65536
BACKENDS: tuple[str, ...] = ("auto", "faiss", "lloyd")

FAISS_MIN_POINTS = 39
"""Points per cluster from which ``backend="auto"`` uses FAISS (FAISS warns below this many)."""


@dataclass(frozen=True)
class KMeansFit:
    """One k-means fit: ``centroids [k, d]`` (float64), ``labels [n]`` (nearest centroid, or the capacity-
    constrained assignment when balanced), ``inertia`` (sum of squared distances to the assigned
    centroid), ``n_iter`` (Lloyd iterations of the kept run), ``converged`` (stopped before the cap:
    assignment unchanged for ``lloyd``, relative inertia decrease ``< tol`` for ``faiss``) and the
    ``backend`` that ran."""

    centroids: np.ndarray
    labels: np.ndarray
    inertia: float
    n_iter: int
    converged: bool
    backend: str


def sq_dists(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances ``[n, k]`` between rows of ``x`` and ``c`` (float64, clipped at 0)."""
    x = np.asarray(x, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    d = (x * x).sum(1)[:, None] - 2.0 * x @ c.T + (c * c).sum(1)[None, :]
    return np.maximum(d, 0.0)


def nearest(x: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(labels, sq_distance)`` of each row's nearest centroid (ties -> lowest index), chunked."""
    labels = np.empty(len(x), dtype=np.int64)
    dist = np.empty(len(x), dtype=np.float64)
    for start in range(0, len(x), CHUNK_ROWS):
        d = sq_dists(x[start:start + CHUNK_ROWS], c)
        lab = d.argmin(1)
        labels[start:start + len(d)] = lab
        dist[start:start + len(d)] = d[np.arange(len(d)), lab]
    return labels, dist


def kmeans_plusplus(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding: ``k`` rows of ``x`` drawn with probability proportional to D(x)^2."""
    x = np.asarray(x, dtype=np.float64)
    centres = np.empty((k, x.shape[1]), dtype=np.float64)
    centres[0] = x[rng.integers(len(x))]
    closest = sq_dists(x, centres[:1])[:, 0]
    for j in range(1, k):
        total = closest.sum()
        idx = rng.choice(len(x), p=closest / total) if total > 0 else rng.integers(len(x))
        centres[j] = x[idx]
        closest = np.minimum(closest, sq_dists(x, centres[j:j + 1])[:, 0])
    return centres


def balanced_assign(dist: np.ndarray) -> np.ndarray:
    """Assign ``n`` points to ``k`` clusters of size ``floor(n/k)`` or ``ceil(n/k)`` (module docstring).

    ``dist``: ``[n, k]`` costs. Returns int64 labels ``[n]``.
    """
    n, k = dist.shape
    base, extra = divmod(n, k)
    demand = np.bincount(dist.argmin(1), minlength=k)
    capacity = np.full(k, base, dtype=np.int64)
    capacity[np.argsort(-demand, kind="stable")[:extra]] += 1
    labels = np.full(n, -1, dtype=np.int64)
    open_cost = dist.copy()
    open_cost[:, capacity == 0] = np.inf
    while True:
        todo = np.flatnonzero(labels < 0)
        if len(todo) == 0:
            return labels
        choice = open_cost[todo].argmin(1)
        cost = open_cost[todo, choice]
        order = np.lexsort((cost, choice))  # by cluster, nearest proposer first
        todo, choice = todo[order], choice[order]
        starts = np.r_[0, np.flatnonzero(np.diff(choice)) + 1]
        rank = np.arange(len(choice)) - np.repeat(starts, np.diff(np.r_[starts, len(choice)]))
        accept = rank < capacity[choice]
        labels[todo[accept]] = choice[accept]
        capacity -= np.bincount(choice[accept], minlength=k)
        open_cost[:, capacity == 0] = np.inf


def kmeans(x: np.ndarray, k: int, *, rng: np.random.Generator, n_iter: int = 100, n_init: int = 1,
           balanced: bool = False, backend: Literal["auto", "faiss", "lloyd"] = "lloyd", tol: float = 1e-4,
           gpu: bool | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """Cluster the rows of ``x`` into ``k`` clusters; returns ``(centroids [k, d], labels [n], inertia)``.

    ``inertia`` is the sum of squared distances of the points to their assigned centroid. See
    :func:`kmeans_fit` (which also reports iterations and convergence) for the arguments.
    """
    fit = kmeans_fit(x, k, rng=rng, n_iter=n_iter, n_init=n_init, balanced=balanced, backend=backend, tol=tol,
                     gpu=gpu)
    return fit.centroids, fit.labels, fit.inertia


def kmeans_fit(x: np.ndarray, k: int, *, rng: np.random.Generator, n_iter: int = 100, n_init: int = 1,
               balanced: bool = False, backend: Literal["auto", "faiss", "lloyd"] = "lloyd",
               tol: float = 1e-4, gpu: bool | None = None) -> KMeansFit:
    """Cluster the rows of ``x`` into ``k`` clusters (module docstring).

    Args:
        x: ``[n, d]`` points.
        k: number of clusters.
        rng: source of all randomness (seeding; FAISS's seed is drawn from it).
        n_iter: most Lloyd iterations per run.
        n_init: runs from different seeds; the lowest inertia is kept.
        balanced: equal cluster sizes (always the hand-written loop).
        backend: ``faiss``, ``lloyd`` (hand-written) or ``auto`` (FAISS when there are at least
            :data:`FAISS_MIN_POINTS` points per cluster, the hand-written loop below that).
        tol: ``faiss`` stops when an iteration lowers the inertia by less than this fraction.
        gpu: ``faiss`` on a GPU (``None``: when FAISS sees one).

    Raises:
        ValueError: ``k`` is not in ``1..len(x)``, or an unknown backend.
    """
    x = np.asarray(x, dtype=np.float64)
    if not 1 <= k <= len(x):
        raise ValueError(f"k-means needs 1 <= codebook size <= number of points; got codebook size {k} for "
                         f"{len(x)} points. Use a smaller codebook_size.")
    if backend not in BACKENDS:
        raise ValueError(f"k-means backend={backend!r}; use one of {', '.join(BACKENDS)}.")
    enough = len(x) >= FAISS_MIN_POINTS * k
    use_faiss = not balanced and (backend == "faiss" or (backend == "auto" and enough))
    best = None
    for _ in range(max(1, n_init)):
        if use_faiss:
            run = _faiss_run(x, k, seed=int(rng.integers(2**31 - 1)), n_iter=n_iter, tol=tol, gpu=gpu)
        else:
            run = _lloyd(x, kmeans_plusplus(x, k, rng), n_iter=n_iter, balanced=balanced)
        if best is None or run.inertia < best.inertia:
            best = run
    return best


def _faiss_run(x: np.ndarray, k: int, *, seed: int, n_iter: int, tol: float, gpu: bool | None) -> KMeansFit:
    import faiss

    n, d = x.shape
    on_gpu = faiss.get_num_gpus() > 0 if gpu is None else bool(gpu)
    km = faiss.Kmeans(d, k, niter=max(1, n_iter), seed=seed, gpu=on_gpu, max_points_per_centroid=n,
                      min_points_per_centroid=1, early_stop_threshold=float(tol),
                      init_method=faiss.ClusteringInitMethod_KMEANS_PLUS_PLUS)
    km.train(np.ascontiguousarray(x, dtype=np.float32))
    obj = np.asarray(km.obj, dtype=np.float64)
    converged = len(obj) < max(1, n_iter) or (len(obj) > 1 and obj[-2] - obj[-1] <= tol * obj[-2])
    centres = km.centroids.astype(np.float64)
    labels, dist = nearest(x, centres)
    return KMeansFit(centres, labels, float(dist.sum()), len(obj), bool(converged), "faiss")


def _lloyd(x: np.ndarray, centres: np.ndarray, *, n_iter: int, balanced: bool) -> KMeansFit:
    k = len(centres)
    labels = None
    done, converged = 0, False
    for _ in range(max(1, n_iter)):
        if balanced:
            new = balanced_assign(sq_dists(x, centres))
        else:
            new, _ = nearest(x, centres)
        if labels is not None and np.array_equal(new, labels):
            converged = True
            break
        labels = new
        centres = _update(x, labels, centres, k)
        done += 1
    if not balanced:  # labels = nearest centroid, so encoding the training points reproduces them
        labels, _ = nearest(x, centres)
    inertia = float(((x - centres[labels]) ** 2).sum())
    return KMeansFit(centres, labels, inertia, done, converged, "lloyd")


def _update(x: np.ndarray, labels: np.ndarray, centres: np.ndarray, k: int) -> np.ndarray:
    counts = np.bincount(labels, minlength=k)
    n = len(labels)
    member = sparse.csr_matrix((np.ones(n), (labels, np.arange(n))), shape=(k, n))
    sums = np.asarray(member @ x)
    new = centres.copy()
    filled = counts > 0
    new[filled] = sums[filled] / counts[filled, None]
    empty = np.flatnonzero(~filled)
    if len(empty):  # re-seed empty clusters at the points farthest from their centroid
        far = np.argsort(-((x - new[labels]) ** 2).sum(1), kind="stable")[:len(empty)]
        new[empty] = x[far]
    return new
