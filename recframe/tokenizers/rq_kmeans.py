"""RQ-KMeans: residual k-means semantic IDs.

Level 1 clusters the item vectors with k-means into ``K_1`` codes; level ``l + 1`` clusters the
residuals ``r_{l+1} = r_l - C_l[code_l]`` (``r_1 = x``), so a path ``(c_1, ..., c_L)`` encodes
``x ~ C_1[c_1] + ... + C_L[c_L]`` coarse to fine. This is the training-free alternative to
RQ-VAE used for semantic IDs (e.g. OneRec's RQ-Kmeans; the residual-quantisation idea of
Juang & Gray, 1982). Because each centroid is the mean of its cluster, every level can only lower
the total squared reconstruction error; ``stats["residual_mse"]`` records it (mean over items of
the squared residual norm) before the first level and after each level.

``balanced=True`` uses balanced k-means at every level (each code gets ``floor(n/K)`` or
``ceil(n/K)`` items; see :func:`recframe.tokenizers.kmeans.balanced_assign` for the greedy
deferred-acceptance assignment), which maximises codebook usage and perplexity and spreads items
evenly over the trie, at some cost in reconstruction error. Encoding new vectors
(:meth:`RQKMeansTokenizer.encode`) always uses the nearest centroid (no capacity constraint).

Choices the method leaves open, and what is done here: features are used as given (no
normalisation, MiniLM vectors are already unit length); k-means++ seeding with ``n_init`` restarts
(default 1) and at most ``n_iter`` Lloyd iterations; all randomness from ``numpy.random.default_rng(seed)``.
The k-means is FAISS's (``backend="faiss"``: float32 BLAS, a GPU when FAISS sees one, stopping when an
iteration lowers the inertia by less than ``tol``), or the hand-written float64 Lloyd loop
(``backend="lloyd"``, which stops when the assignment stops changing); the default ``auto`` takes FAISS
from 39 points per code and the hand-written loop below that (small catalogues such as ML-100K, where
FAISS's codes were measurably worse; see :mod:`recframe.tokenizers.kmeans`); balanced levels always use
the hand-written loop (see :mod:`recframe.tokenizers.kmeans`). ``stats`` records per level the
iterations run, whether the level converged before ``n_iter``, and its inertia.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from recframe.tokenizers.base import SIDTokenizer, check_positive_int, level_sizes
from recframe.tokenizers.kmeans import BACKENDS, kmeans_fit, nearest


class RQKMeansTokenizer(SIDTokenizer):
    """Residual k-means tokenizer.

    Args:
        n_levels: number of residual levels ``L``.
        codebook_size: codes per level (an int, or one per level). TIGER's size is 3 x 256.
        balanced: balanced k-means (equal cluster sizes) at every level.
        n_iter: maximum Lloyd iterations per level.
        n_init: k-means++ restarts per level (lowest inertia kept).
        seed: seed of all randomness.
        backend: ``auto`` (default: FAISS from 39 points per code, else the hand-written loop; see
            :mod:`recframe.tokenizers.kmeans`), ``faiss`` (FAISS k-means) or ``lloyd`` (hand-written).
        tol: ``faiss`` stops a level when an iteration lowers its inertia by less than this fraction.

    Fitted attributes: ``codebooks_`` (list of ``[K_l, d]`` float32 centroids), ``table_``.
    """

    name = "rq_kmeans"

    def __init__(self, n_levels: int = 3, codebook_size: int | Sequence[int] = 256, *, balanced: bool = False,
                 n_iter: int = 100, n_init: int = 1, seed: int = 0,
                 backend: Literal["auto", "faiss", "lloyd"] = "auto", tol: float = 1e-4) -> None:
        self.n_levels = n_levels
        self.codebook_size = codebook_size
        self.balanced = bool(balanced)
        self.n_iter = check_positive_int("n_iter", n_iter)
        self.n_init = check_positive_int("n_init", n_init)
        self.seed = check_positive_int("seed", seed, minimum=0)
        if backend not in BACKENDS:
            raise ValueError(f"backend={backend!r}; use one of {', '.join(BACKENDS)}.")
        if isinstance(tol, bool) or not isinstance(tol, int | float) or not 0 <= tol < 1:
            raise ValueError(f"tol={tol!r}; it must be a number in [0, 1) (relative inertia decrease).")
        self.backend = backend
        self.tol = float(tol)
        self._sizes = level_sizes(n_levels, codebook_size)

    @property
    def codebook_sizes(self) -> tuple[int, ...]:
        return self._sizes

    def _settings(self) -> dict[str, Any]:
        return {"codebook_sizes": list(self._sizes), "balanced": self.balanced, "n_iter": self.n_iter,
                "n_init": self.n_init, "seed": self.seed, "backend": self.backend, "tol": self.tol}

    def _fit_codes(self, items: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        rng = np.random.default_rng(self.seed)
        residual = items.astype(np.float64)
        codes = np.empty((len(items), len(self._sizes)), dtype=np.int64)
        mse = [float((residual ** 2).sum(1).mean())]
        fits = []
        self.codebooks_ = []
        for level, k in enumerate(self._sizes):
            fit = kmeans_fit(residual, k, rng=rng, n_iter=self.n_iter, n_init=self.n_init,
                             balanced=self.balanced, backend=self.backend, tol=self.tol)
            codes[:, level] = fit.labels
            residual = residual - fit.centroids[fit.labels]
            mse.append(float((residual ** 2).sum(1).mean()))
            self.codebooks_.append(fit.centroids.astype(np.float32))
            fits.append(fit)
        return codes, {"residual_mse": mse, "kmeans_backend": [f.backend for f in fits],
                       "kmeans_iterations": [f.n_iter for f in fits],
                       "kmeans_converged": [f.converged for f in fits],
                       "kmeans_inertia": [f.inertia for f in fits]}

    def _encode(self, vectors: np.ndarray) -> np.ndarray:
        residual = vectors.astype(np.float64)
        codes = np.empty((len(vectors), len(self._sizes)), dtype=np.int64)
        for level, centres in enumerate(self.codebooks_):
            codes[:, level], _ = nearest(residual, centres)
            residual = residual - centres[codes[:, level]]
        return codes

    def reconstruct(self, codes: np.ndarray) -> np.ndarray:
        """``sum_l C_l[codes[:, l]]`` for semantic codes ``[m, L]`` (float32)."""
        if not hasattr(self, "codebooks_"):
            raise ValueError("RQKMeansTokenizer is not fitted; call fit(features) first.")
        codes = np.asarray(codes, dtype=np.int64)
        return sum(c[codes[:, level]] for level, c in enumerate(self.codebooks_)).astype(np.float32)
