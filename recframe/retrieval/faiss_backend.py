"""The FAISS side of :class:`recframe.retrieval.ItemIndex`: build, GPU placement, search knobs.

* Every index is built with ``METRIC_INNER_PRODUCT``; cosine is inner product on unit vectors
  (the caller normalises both sides), which is how FAISS itself recommends doing cosine.
* ``index_factory`` strings pick the structure (``"Flat"``, ``"IVF1024,Flat"``, ``"HNSW32"``,
  ``"IVF1024,PQ16"``, ...). Indexes that need training are trained on the item vectors
  themselves (FAISS's k-means subsamples to 256 points per centroid), without FAISS's
  polysemous PQ training (see :func:`_skip_polysemous_training`).
* GPU: used when FAISS sees one (``faiss.get_num_gpus() > 0`` and a GPU build); otherwise, or
  when FAISS has no GPU version of the structure (HNSW), the CPU index is kept and an info note
  is logged on ``recframe.retrieval``.
* Exact CPU search: FAISS's BLAS path multiplies blocks of ``distance_compute_blas_query_bs``
  queries (default 4096) by blocks of ``distance_compute_blas_database_bs`` items (default 1024)
  and reduces each score block into the running top-k. With ``d = 64`` the GEMM has a tiny inner
  dimension, so the per-block overhead dominates thin blocks: on 200k items x 2000 queries
  (d = 64, k = 100, 2 threads) 1024 x 16384 blocks did 49 GFLOP per CPU-second against 15 with
  the defaults, for the same 64 MiB of scratch as 4096 x 4096 (37). Exact searches therefore run
  with :data:`EXACT_QUERY_BS` x :data:`EXACT_DATABASE_BS` (the globals are restored afterwards).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator
from typing import Any

import numpy as np


class _DropLoaderFallbacks(logging.Filter):
    """Drop FAISS's loader notes about optional builds that are absent (AVX512, AVX2, SVE, GPU variants).

    The loader tries each optimised library in turn and logs "Could not load library with ... support"
    with a traceback for every one this installation lacks, then loads the one it has. Those notes
    (and the "Loading faiss with ..." lines before them) say nothing wrong and read as errors in a
    run's log, so they are dropped; warnings and errors of the loader are kept.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        message = str(record.msg)
        return not message.startswith(("Could not load library", "Loading faiss"))


logging.getLogger("faiss.loader").addFilter(_DropLoaderFallbacks())
import faiss  # noqa: E402 - after the loader filter above, which must see the import's log records

logger = logging.getLogger("recframe.retrieval")

#: Largest k a FAISS GPU index answers (``GPU_MAX_SELECTION_K``); over-fetching stops there.
GPU_MAX_K = 2048
#: Query rows per BLAS block for exact CPU search (FAISS default 4096).
EXACT_QUERY_BS = 1024
#: Item rows per BLAS block for exact CPU search (FAISS default 1024); scratch is
#: ``EXACT_QUERY_BS x EXACT_DATABASE_BS`` floats = 64 MiB.
EXACT_DATABASE_BS = 16384
FACTORY_EXAMPLES = "'Flat', 'IVF1024,Flat', 'HNSW32', 'IVF1024,PQ16'"


def build_index(vectors: np.ndarray, factory: str) -> faiss.Index:
    """A trained CPU FAISS index (inner-product metric) holding ``vectors`` at positions ``0..n-1``."""
    n, dim = vectors.shape
    try:
        index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as exc:
        raise ValueError(f"FAISS cannot build factory={factory!r} for dim={dim} ({faiss_reason(exc)}); "
                         f"use a FAISS index factory string such as {FACTORY_EXAMPLES}.") from None
    if not index.is_trained:
        _skip_polysemous_training(index)
        try:
            index.train(vectors)
        except RuntimeError as exc:
            raise ValueError(f"training factory={factory!r} on {n} item vectors failed "
                             f"({faiss_reason(exc)}); IVF<nlist> needs at least nlist items "
                             "(FAISS suggests 39 x nlist) and PQ<m> "
                             "needs dim divisible by m and >= 256 items: choose smaller settings.") from None
    try:
        index.add(vectors)
    except RuntimeError as exc:
        raise ValueError(f"adding items to factory={factory!r} failed ({faiss_reason(exc)}); "
                         "the factory must describe a plain index (no IDMap: ItemIndex assigns ids "
                         "itself).") from None
    return index


def gpu_available() -> bool:
    """Whether this FAISS build has GPU support and sees at least one GPU."""
    if not (hasattr(faiss, "StandardGpuResources") and hasattr(faiss, "index_cpu_to_gpu")):
        return False
    return faiss.get_num_gpus() > 0


def place(index: faiss.Index, use_gpu: bool | None, factory: str) -> tuple[faiss.Index, Any]:
    """Move ``index`` to GPU 0 when wanted and possible.

    Args:
        index: a CPU index.
        use_gpu: ``None`` = automatic (GPU when available, else CPU with an info note);
            ``True`` = require a GPU (error if impossible); ``False`` = stay on CPU.
        factory: the factory string (for messages).

    Returns:
        ``(index, gpu_resources)``; ``gpu_resources`` is ``None`` on CPU and must be kept alive
        as long as the GPU index is used.
    """
    if use_gpu is False:
        return index, None
    if not gpu_available():
        reason = ("this FAISS build has no GPU support" if not hasattr(faiss, "index_cpu_to_gpu")
                  else "FAISS sees no GPU")
        if use_gpu:
            raise ValueError(f"use_gpu=True but {reason}; install the `gpu` extra (faiss-gpu) on a machine "
                             "with a CUDA GPU, or pass use_gpu=None to fall back to CPU.")
        logger.info("ItemIndex(%s): %s; using the CPU index.", factory, reason)
        return index, None
    try:
        resources = faiss.StandardGpuResources()
        return faiss.index_cpu_to_gpu(resources, 0, index), resources
    except (RuntimeError, AttributeError) as exc:
        if use_gpu:
            raise ValueError(f"use_gpu=True but FAISS cannot put factory={factory!r} on the GPU "
                             f"({faiss_reason(exc)}); use an IVF or Flat factory, or use_gpu=None.") from None
        logger.info("ItemIndex(%s): FAISS has no GPU version of this index (%s); using the CPU index.",
                    factory, faiss_reason(exc))
        return index, None


def to_cpu(index: faiss.Index, on_gpu: bool) -> faiss.Index:
    """The CPU version of ``index`` (a copy for a GPU index; ``index`` itself otherwise)."""
    return faiss.index_gpu_to_cpu(index) if on_gpu else index


def search_params_of(index: faiss.Index) -> dict[str, int]:
    """The search knobs a CPU ``index`` has, with their current values (FAISS ``ParameterSpace``
    names: ``nprobe`` for IVF, ``efSearch`` for HNSW, ``k_factor_rf`` for a ``,RFlat`` re-ranking stage)."""
    params: dict[str, int] = {}
    refine = faiss.downcast_index(index)
    if isinstance(refine, faiss.IndexRefine):
        params["k_factor_rf"] = int(refine.k_factor)
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        params["nprobe"] = int(ivf.nprobe)
    hnsw = _hnsw(index)
    if hnsw is not None:
        params["efSearch"] = int(hnsw.hnsw.efSearch)
    return params


def set_search_param(index: faiss.Index, name: str, value: int, on_gpu: bool) -> None:
    """Set one FAISS search parameter (``nprobe`` / ``efSearch``) on a CPU or GPU index."""
    space = faiss.GpuParameterSpace() if on_gpu else faiss.ParameterSpace()
    space.set_index_parameter(index, name, int(value))


def is_exact_flat(index: faiss.Index) -> bool:
    """Whether ``index`` is a CPU brute-force flat index (the BLAS blocking applies)."""
    return isinstance(faiss.downcast_index(index), faiss.IndexFlat)


@contextlib.contextmanager
def exact_blocking(enabled: bool) -> Iterator[None]:
    """Temporarily use :data:`EXACT_QUERY_BS` x :data:`EXACT_DATABASE_BS` BLAS blocks."""
    if not enabled:
        yield
        return
    cvar = faiss.cvar
    old = cvar.distance_compute_blas_query_bs, cvar.distance_compute_blas_database_bs
    cvar.distance_compute_blas_query_bs = EXACT_QUERY_BS
    cvar.distance_compute_blas_database_bs = EXACT_DATABASE_BS
    try:
        yield
    finally:
        cvar.distance_compute_blas_query_bs, cvar.distance_compute_blas_database_bs = old


def serialize(index: faiss.Index) -> bytes:
    """The bytes of a CPU index (``faiss.serialize_index``)."""
    return faiss.serialize_index(index).tobytes()


def deserialize(data: bytes) -> faiss.Index:
    """A CPU index from :func:`serialize` bytes (raises ``RuntimeError`` on corrupt data)."""
    return faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))


def _skip_polysemous_training(index: faiss.Index) -> None:
    """Turn off FAISS's polysemous training of PQ codes (on by default for ``PQ`` factories).

    It re-orders PQ centroids so that Hamming distances between codes approximate real ones,
    which only pays off with a polysemous Hamming threshold at search time (``polysemous_ht``),
    a knob ItemIndex does not use; it costs most of the build time (measured 46 s vs 2 s for
    ``IVF32,PQ8`` on 4000 vectors). Factories ending in ``np`` ask for the same thing.
    """
    ivf = faiss.try_extract_index_ivf(index)
    for candidate in (index, ivf):
        candidate = faiss.downcast_index(candidate) if candidate is not None else None
        if candidate is not None and hasattr(candidate, "do_polysemous_training"):
            candidate.do_polysemous_training = False


def _hnsw(index: faiss.Index) -> Any:
    down = faiss.downcast_index(index)
    return down if isinstance(down, faiss.IndexHNSW) else None


def faiss_reason(exc: BaseException) -> str:
    """FAISS's reason without the C++ location (``Error in f() at file.cpp:12: Error: 'c' failed: why``)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    msg = lines[0] if lines else type(exc).__name__
    msg = re.sub(r"^Error in .* at \S+:\d+: ", "", msg)
    return re.sub(r"^Error: '.*?' failed: ", "", msg)[:300]
