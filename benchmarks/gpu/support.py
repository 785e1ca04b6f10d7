"""What every part of the GPU check shares: the device, its memory peak, FAISS's GPU status, timing."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
Emit = Callable[[dict[str, Any]], None]
"""How a part reports a finished row (a JSON-able dict)."""


def pick_device(name: str) -> str:
    """``auto``: ``cuda`` when torch sees a GPU, else ``cpu``."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device here; use --device auto or cpu.")
    return name


def device_name(device: str) -> str:
    """``torch.cuda.get_device_name`` for CUDA, ``"cpu"`` otherwise."""
    import torch

    return torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu"


def faiss_gpu_status() -> tuple[bool, str]:
    """Whether this FAISS build can use a GPU here, and why not when it cannot."""
    try:
        import faiss
    except (ImportError, OSError) as exc:  # not installed, or a GPU build missing its CUDA libraries
        return False, f"FAISS cannot be imported ({exc})"
    if not hasattr(faiss, "StandardGpuResources"):
        return False, f"this FAISS build ({faiss.__version__}) has no GPU support; install the gpu extra"
    if faiss.get_num_gpus() < 1:
        return False, "FAISS sees no GPU"
    return True, ""


def gpu_env() -> dict[str, Any]:
    """torch / CUDA / FAISS facts recorded beside :func:`recframe.callbacks.library_versions`."""
    from importlib import metadata

    import torch

    out: dict[str, Any] = {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
                           "cuda_available": torch.cuda.is_available()}
    try:
        import faiss

        out["faiss"] = faiss.__version__
        out["faiss_gpus"] = int(faiss.get_num_gpus())
    except (ImportError, OSError) as exc:
        out["faiss"] = f"cannot be imported ({exc})"
    ok, why = faiss_gpu_status()
    out["faiss_gpu"] = ok if ok else why
    for dist in ("faiss-cpu", "faiss-gpu-cu12", "faiss-gpu"):
        try:
            out[f"dist:{dist}"] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def set_threads(threads: int) -> int:
    """Pin torch and FAISS to ``threads`` (0: leave the libraries' defaults); the count in effect."""
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    try:
        import faiss

        if threads > 0:
            faiss.omp_set_num_threads(threads)
    except ImportError:
        pass
    return torch.get_num_threads()


def synchronizer(device: str) -> Callable[[], None]:
    import torch

    return torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)


def peak_gib(device: str) -> tuple[float, str]:
    """Peak memory so far: CUDA's ``max_memory_allocated`` on a GPU, else this process's peak RSS."""
    import resource

    import torch

    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**30, "cuda max_memory_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "peak RSS (process so far)"


def reset_peak(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def timed_loop(op: Callable[[], int], min_seconds: float, deadline: float,
               sync: Callable[[], None]) -> tuple[float, int, int]:
    """Repeat ``op`` (returns units done) until ``min_seconds`` passed or the deadline nears; at least once.

    Returns (seconds, units, repetitions)."""
    units = reps = 0
    start = time.perf_counter()
    stop_at = time.time() + max(0.0, min(min_seconds, deadline - time.time() - 1.0))
    while True:
        units += op()
        reps += 1
        sync()
        if time.time() >= stop_at:
            return time.perf_counter() - start, units, reps


def left(deadline: float) -> float:
    return deadline - time.time()
