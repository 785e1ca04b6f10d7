"""``ItemIndex``: top-k item retrieval on FAISS with per-user exclusion of seen items.

Ids: the index holds items ``1..n_items`` (row ``i`` of ``item_embeddings()``); FAISS position
``p`` is item ``p + 1``, so the padding item 0 is never indexed and never returned.

Metric: ``"ip"`` (inner product, what :class:`recframe.models.base.EmbeddingModel` scores with)
or ``"cosine"`` (both sides normalised, then inner product). It must equal the model's
``score_metric``; a mismatch is refused, because the index would rank differently from the
model's own ``score`` and from the evaluator.

Exclusion: FAISS's ID selectors apply one set to a whole batch, not one per query, so the
search over-fetches and filters (vectorised, :mod:`recframe.retrieval.exclusion`). The first
pass asks for ``k + q90`` candidates per row, where ``q90`` is the 90th percentile of the rows'
exclusion counts (for an exact index every row with at most ``q90`` exclusions is then
complete). Rows that came up short are searched again, only they, with
``k_fetch = max(2 * k_fetch, k + their largest exclusion count)``, until each is complete, or
the index stops giving it more labels than the round before (an IVF index returns ``-1`` once
its probed lists are used up, and asking for more does not help; an HNSW index widens its beam
with k, so it does get another round), or ``k_fetch`` reached the catalogue size (or 2048 on a
GPU, FAISS's GPU limit). Rows that stay short keep item 0 / ``-inf`` past
``SearchResult.counts`` and one warning is logged per call.

Search knobs default to FAISS's own (``nprobe=1``; ``efSearch=16``, which FAISS raises to k);
set them explicitly for useful recall (``benchmarks/retrieval.py`` reports the recall/speed
trade-off on 1M items).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

import numpy as np

from recframe.checkpoint_io import CheckpointError
from recframe.retrieval import faiss_backend as fb
from recframe.retrieval.exclusion import Exclusions, ExclusionSet, as_exclusion_set, select_top_k
from recframe.retrieval.persistence import (
    embedding_fingerprint,
    index_paths,
    read_index_files,
    write_index_files,
)
from recframe.retrieval.result import SearchResult

logger = logging.getLogger("recframe.retrieval")

Metric = Literal["ip", "cosine"]
METRICS = ("ip", "cosine")
#: Python keyword -> FAISS parameter name of the search knobs.
KNOBS = {"nprobe": "nprobe", "ef_search": "efSearch", "k_factor": "k_factor_rf"}


class ItemIndex:
    """A FAISS index over items ``1..n_items`` that answers batched top-k queries with exclusions.

    Build it with :meth:`from_model`, :meth:`from_embeddings` or :meth:`load`; the constructor
    wraps an already built index.

    Args:
        index: a FAISS index (CPU or GPU) holding item ``p + 1`` at position ``p``, inner-product metric.
        factory: the FAISS factory string it was built from.
        metric: ``"ip"`` or ``"cosine"`` (vectors in ``index`` are then unit length).
        n_items: number of real items (``index.ntotal``).
        fingerprint: sha256 of the item embeddings it was built from (:func:`embedding_fingerprint`).
        search_params: current FAISS search knobs (``{"nprobe": ..}`` / ``{"efSearch": ..}``).
        gpu_resources: the ``StandardGpuResources`` of a GPU index (``None`` on CPU).
    """

    def __init__(self, index: Any, *, factory: str, metric: Metric, n_items: int, fingerprint: str,
                 search_params: dict[str, int], gpu_resources: Any = None) -> None:
        _check_metric_name(metric)
        if int(index.ntotal) != n_items:
            raise ValueError(f"n_items={n_items} but the FAISS index holds {index.ntotal} vectors; "
                             "build with ItemIndex.from_embeddings / from_model, which keep them in step.")
        self._index = index
        self._gpu_resources = gpu_resources
        self.factory = factory
        self.metric: Metric = metric
        self.dim = int(index.d)
        self.n_items = int(n_items)
        self.fingerprint = fingerprint
        self._params = dict(search_params)
        self._exact = not self.on_gpu and fb.is_exact_flat(index)

    # ------------------------------------------------------------- building
    @classmethod
    def from_embeddings(cls, embeddings: Any, *, factory: str = "Flat", metric: Metric = "ip",
                        padding_row: bool = True, nprobe: int | None = None, ef_search: int | None = None,
                        k_factor: int | None = None, use_gpu: bool | None = None) -> ItemIndex:
        """Build from a raw item matrix.

        Args:
            embeddings: ``[n_items + 1, d]`` (row 0 = padding, as ``item_embeddings()`` returns) or,
                with ``padding_row=False``, ``[n_items, d]`` (row ``i`` = item ``i + 1``);
                numpy or torch, cast to float32.
            factory: FAISS index factory string (``"Flat"``, ``"IVF1024,Flat"``, ``"HNSW32"``,
                ``"IVF1024,PQ16"``, ``"IVF2048,PQ64x4fs,RFlat"`` (4-bit fast-scan PQ codes, the best
                ``k_factor * k`` re-ranked exactly: the best recall/speed trade-off on CPU in
                ``benchmarks/retrieval.py``), ...).
            metric: ``"ip"`` or ``"cosine"``.
            padding_row: whether row 0 is the padding item (dropped).
            nprobe: IVF lists probed per query (IVF factories only).
            ef_search: HNSW search beam (HNSW factories only).
            k_factor: a ``,RFlat`` factory re-ranks ``k_factor * k`` candidates exactly (FAISS's
                ``k_factor_rf``; default 1).
            use_gpu: ``None`` = GPU when FAISS sees one, else CPU (info log); ``True`` = require;
                ``False`` = CPU.
        """
        _check_metric_name(metric)
        matrix = _as_matrix(embeddings, "embeddings")
        vectors = matrix[1:] if padding_row else matrix
        if vectors.shape[0] < 1:
            raise ValueError(f"embeddings has {matrix.shape[0]} rows; it needs at least one real item "
                             f"{'after the padding row 0 ' if padding_row else ''}to index.")
        fingerprint = embedding_fingerprint(vectors)
        if metric == "cosine":
            vectors = _unit_rows(vectors)
        cpu = fb.build_index(vectors, factory)
        index = cls(cpu, factory=factory, metric=metric, n_items=vectors.shape[0], fingerprint=fingerprint,
                    search_params=fb.search_params_of(cpu))
        index.set_search_params(nprobe=nprobe, ef_search=ef_search, k_factor=k_factor)
        return index._placed(use_gpu)

    @classmethod
    def from_model(cls, model: Any, *, factory: str = "Flat", metric: Metric | None = None,
                   nprobe: int | None = None, ef_search: int | None = None, k_factor: int | None = None,
                   use_gpu: bool | None = None) -> ItemIndex:
        """Build from an :class:`~recframe.models.base.EmbeddingModel`'s ``item_embeddings()``.

        ``metric=None`` takes the model's ``score_metric``; an explicit metric that differs from it
        is refused (ValueError naming both and the fix). Other arguments as in :meth:`from_embeddings`.
        """
        model_metric = _model_metric(model)
        if metric is not None:
            check_metric(metric, model_metric, type(model).__name__)
        return cls.from_embeddings(_model_items(model), factory=factory, metric=model_metric,
                                   padding_row=True, nprobe=nprobe, ef_search=ef_search, k_factor=k_factor,
                                   use_gpu=use_gpu)

    # ------------------------------------------------------------ properties
    @property
    def on_gpu(self) -> bool:
        """Whether the FAISS index lives on a GPU."""
        return self._gpu_resources is not None

    @property
    def search_params(self) -> dict[str, int]:
        """The FAISS search knobs of this index and their values (``nprobe`` / ``efSearch``)."""
        return dict(self._params)

    @property
    def nprobe(self) -> int | None:
        """IVF lists probed per query (``None`` for non-IVF indexes)."""
        return self._params.get("nprobe")

    @property
    def ef_search(self) -> int | None:
        """HNSW search beam width (``None`` for non-HNSW indexes)."""
        return self._params.get("efSearch")

    @property
    def k_factor(self) -> int | None:
        """Candidates re-ranked per result by a ``,RFlat`` stage (``None`` without one)."""
        return self._params.get("k_factor_rf")

    def __len__(self) -> int:
        return self.n_items

    def __repr__(self) -> str:
        knobs = "".join(f", {k}={v}" for k, v in self._params.items())
        return (f"ItemIndex(factory={self.factory!r}, metric={self.metric!r}, n_items={self.n_items}, "
                f"dim={self.dim}{knobs}, device={'gpu' if self.on_gpu else 'cpu'})")

    def set_search_params(self, *, nprobe: int | None = None, ef_search: int | None = None,
                          k_factor: int | None = None) -> ItemIndex:
        """Set search-time knobs (``None`` leaves one unchanged); returns ``self``."""
        for name, value in (("nprobe", nprobe), ("ef_search", ef_search), ("k_factor", k_factor)):
            if value is None:
                continue
            key = KNOBS[name]
            if key not in self._params:
                have = ", ".join(py for py, fname in KNOBS.items() if fname in self._params) or "none"
                raise ValueError(f"{name} does not apply to factory={self.factory!r} "
                                 f"(its search knobs: {have}); nprobe is for IVF factories, "
                                 "ef_search for HNSW ones, k_factor for ',RFlat' (re-ranking) ones.")
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name}={value!r}; it must be a positive integer.")
            fb.set_search_param(self._index, key, int(value), self.on_gpu)
            self._params[key] = int(value)
        return self

    # --------------------------------------------------------------- search
    def search(self, queries: Any, k: int, *, exclude: Exclusions = None,
               warn_short: bool = True) -> SearchResult:
        """Top-``k`` items per query row, best first, never an excluded item, 0 or -1.

        Args:
            queries: ``[B, d]`` (or ``[d]``) query vectors, numpy or torch; normalised here for cosine.
            k: items per row.
            exclude: per-row item ids never to return (seen items): ``None``, a CSR tuple
                ``(indptr, indices)``, a ``scipy.sparse`` matrix with ``B`` rows, or a list of ``B``
                id arrays.
            warn_short: log one warning per call when some row has fewer than ``k`` eligible items;
                ``False`` for callers that trim each row to ``counts`` themselves (the Recommender).

        Returns:
            :class:`SearchResult`; ``counts[i] < k`` (rest item 0 / ``-inf``) where row ``i`` had
            fewer than ``k`` eligible items found, with one warning logged per call (``warn_short``).
        """
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k={k!r}; it must be a positive integer (items per query).")
        q = _as_matrix(queries, "queries", one_row_ok=True)
        if q.shape[1] != self.dim:
            raise ValueError(f"queries have dim {q.shape[1]} but the index holds dim {self.dim} item "
                             "vectors; use the query embeddings of the model the index was built from.")
        if self.metric == "cosine":
            q = _unit_rows(q)
        excl = as_exclusion_set(exclude, q.shape[0], self.n_items)
        result = self._search_excluding(q, int(k), excl)
        short = result.counts < k
        if warn_short and short.any():
            logger.warning("ItemIndex.search: %d of %d query rows have fewer than k=%d eligible "
                           "items (fewest: %d); their missing entries are item 0 with score -inf "
                           "(see SearchResult.counts).",
                           int(short.sum()), len(result), k, int(result.counts.min()))
        return result

    def _search_excluding(self, q: np.ndarray, k: int, excl: ExclusionSet) -> SearchResult:
        n_rows = q.shape[0]
        items = np.zeros((n_rows, k), dtype=np.int64)
        scores = np.full((n_rows, k), -np.inf, dtype=np.float32)
        counts = np.zeros(n_rows, dtype=np.int64)
        if n_rows == 0:
            return SearchResult(items, scores, counts)
        cap = min(self.n_items, fb.GPU_MAX_K) if self.on_gpu else self.n_items
        k_fetch = min(cap, k + int(np.quantile(excl.per_row, 0.9, method="higher")))
        rows = np.arange(n_rows)
        returned_before = np.full(n_rows, -1, dtype=np.int64)
        while True:
            dist, labels = self._raw_search(q[rows], k_fetch)
            items[rows], scores[rows], counts[rows] = select_top_k(labels, dist, rows, excl, k)
            returned = (labels >= 0).sum(axis=1)
            grew, returned_before[rows] = returned > returned_before[rows], returned
            more = (counts[rows] < k) & grew & (k_fetch < cap)
            if not more.any():
                return SearchResult(items, scores, counts)
            rows = rows[more]
            k_fetch = min(cap, max(2 * k_fetch, k + int(excl.per_row[rows].max())))

    def _raw_search(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        with fb.exact_blocking(self._exact):
            dist, labels = self._index.search(np.ascontiguousarray(q), k)
        return dist, labels

    # ------------------------------------------------------------ model checks
    def is_stale(self, embeddings: Any, *, padding_row: bool = True) -> bool:
        """Whether ``embeddings`` (``item_embeddings()`` layout by default) differ from those indexed."""
        matrix = _as_matrix(embeddings, "embeddings")
        return embedding_fingerprint(matrix[1:] if padding_row else matrix) != self.fingerprint

    def check_model(self, model: Any, *, check_fingerprint: bool = True) -> None:
        """Refuse to serve ``model`` from this index: metric, dim or n_items mismatch, or (by default) a
        stale index (different item embeddings). Raises ValueError naming the mismatch and the fix."""
        name = type(model).__name__
        check_metric(self.metric, _model_metric(model), name)
        items = _model_items(model)
        if items.shape != (self.n_items + 1, self.dim):
            raise ValueError(f"{name} has item embeddings of shape {tuple(items.shape)} but the index holds "
                             f"{self.n_items} items of dim {self.dim} "
                             f"(expected [{self.n_items + 1}, {self.dim}]); rebuild the index with "
                             "ItemIndex.from_model(model).")
        if check_fingerprint and self.is_stale(items):
            raise ValueError(f"the index is stale: {name}'s item embeddings differ from those it was "
                             f"built from (fingerprint {self.fingerprint[:12]}...); rebuild it with "
                             f"ItemIndex.from_model(model, factory={self.factory!r}) and save it again.")

    # ------------------------------------------------------------- save / load
    def save(self, path: str | Path) -> Path:
        """Write ``<path stem>.faiss`` + ``.faiss.json`` atomically (a GPU index is copied to CPU first).

        ``path`` is a checkpoint path (``best.ckpt`` -> ``best.faiss``) or a ``.faiss`` path.
        Returns the ``.faiss`` path.
        """
        data = fb.serialize(fb.to_cpu(self._index, self.on_gpu))
        meta = {"factory": self.factory, "metric": self.metric, "dim": self.dim, "n_items": self.n_items,
                "search_params": self._params, "fingerprint": self.fingerprint,
                "faiss_version": getattr(fb.faiss, "__version__", "unknown")}
        return write_index_files(path, data, meta)

    @classmethod
    def load(cls, path: str | Path, *, use_gpu: bool | None = None) -> ItemIndex:
        """Read an index written by :meth:`save` (checkpoint path or ``.faiss`` path).

        Raises :class:`~recframe.checkpoint_io.CheckpointError` naming the file when it is missing,
        truncated, corrupted or does not match its metadata.
        """
        data, meta = read_index_files(path)
        index_file = index_paths(path)[0]
        try:
            cpu = fb.deserialize(data)
        except RuntimeError as exc:
            raise CheckpointError(f"FAISS index {index_file} cannot be read by FAISS "
                                  f"({fb.faiss_reason(exc)}); rebuild the index and save it again.") from None
        if cpu.d != meta["dim"] or cpu.ntotal != meta["n_items"] or meta["metric"] not in METRICS:
            raise CheckpointError(f"FAISS index {index_file} holds {cpu.ntotal} vectors of dim {cpu.d}, "
                                  f"but its metadata says {meta['n_items']} of dim {meta['dim']} "
                                  f"({meta['metric']}); "
                                  "rebuild the index and save it again.")
        index = cls(cpu, factory=meta["factory"], metric=meta["metric"], n_items=meta["n_items"],
                    fingerprint=meta["fingerprint"], search_params=fb.search_params_of(cpu))
        params = {py: meta["search_params"][key] for py, key in KNOBS.items() if key in meta["search_params"]}
        index.set_search_params(**params)
        return index._placed(use_gpu)

    def _placed(self, use_gpu: bool | None) -> ItemIndex:
        """This index moved to the GPU when wanted and possible (knobs re-applied there)."""
        placed, resources = fb.place(self._index, use_gpu, self.factory)
        if resources is None:
            return self
        moved = ItemIndex(placed, factory=self.factory, metric=self.metric, n_items=self.n_items,
                          fingerprint=self.fingerprint, search_params=self._params, gpu_resources=resources)
        for key, value in self._params.items():
            fb.set_search_param(placed, key, value, on_gpu=True)
        return moved


def check_metric(index_metric: str, model_metric: str, model_name: str) -> None:
    """ValueError unless an index of ``index_metric`` ranks like a model scoring with ``model_metric``."""
    if index_metric != model_metric:
        raise ValueError(f"metric mismatch: the index uses metric={index_metric!r} but {model_name} scores "
                         f"with {model_metric!r} (its score_metric); build the index with "
                         f"metric={model_metric!r} "
                         "(ItemIndex.from_model takes the model's metric when metric=None).")


def _check_metric_name(metric: str) -> None:
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r}; use 'ip' (inner product) or 'cosine'.")


def _model_metric(model: Any) -> str:
    if not callable(getattr(model, "item_embeddings", None)):
        raise TypeError(f"{type(model).__name__} has no item_embeddings(); only EmbeddingModels (score = "
                        "query embedding x item embeddings) can be served from a FAISS index.")
    metric = getattr(model, "score_metric", "ip")
    _check_metric_name(metric)
    return metric


def _model_items(model: Any) -> np.ndarray:
    import torch

    with torch.no_grad():
        return _as_matrix(model.item_embeddings(), f"{type(model).__name__}.item_embeddings()")


def _as_matrix(x: Any, name: str, one_row_ok: bool = False) -> np.ndarray:
    """``x`` as a finite, C-contiguous float32 ``[n, d]`` numpy array."""
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach().float().cpu().numpy()
    arr = np.ascontiguousarray(x, dtype=np.float32)
    if arr.ndim == 1 and one_row_ok:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise ValueError(f"{name} has shape {arr.shape}; it must be a 2-D [rows, dim] array.")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} holds NaN or infinite values; FAISS cannot rank them. Check the model.")
    return arr


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (all-zero rows stay zero)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.ascontiguousarray(x / np.maximum(norms, np.finfo(np.float32).tiny), dtype=np.float32)
