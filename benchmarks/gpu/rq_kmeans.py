"""Part (e) of the GPU check: an RQ-KMeans fit with FAISS k-means (on the GPU when FAISS sees one)."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks.gpu.support import Emit


@contextmanager
def level_timer() -> Iterator[list[float]]:
    """Seconds of each k-means level of an RQ-KMeans fit in this block (times the tokenizer's own calls)."""
    from recframe.tokenizers import rq_kmeans

    seconds: list[float] = []
    original = rq_kmeans.kmeans_fit

    def timed(*a: Any, **kw: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*a, **kw)
        finally:
            seconds.append(time.perf_counter() - start)

    rq_kmeans.kmeans_fit = timed
    try:
        yield seconds
    finally:
        rq_kmeans.kmeans_fit = original


def part_rq_kmeans(args: argparse.Namespace, deadline: float, emit: Emit) -> None:
    from benchmarks import kmeans_scale

    threads = args.threads or os.cpu_count() or 1
    settings = kmeans_scale.parse(["--items", str(args.kmeans_items), "--dim", str(args.kmeans_dim),
                                   "--levels", str(args.kmeans_levels),
                                   "--codebook", str(args.kmeans_codebook),
                                   "--n-iter", str(args.kmeans_n_iter), "--threads", str(threads),
                                   "--seed", str(args.seed)])
    with level_timer() as level_seconds:
        row = kmeans_scale.run_one("faiss", settings)
    emit({"kind": "fit", "items": row["items"], "dim": args.kmeans_dim, "levels": args.kmeans_levels,
          "codebook": args.kmeans_codebook, "seconds": row["seconds"], "cpu_seconds": row["cpu_seconds"],
          "level_seconds": level_seconds, "iterations": row["iterations"], "converged": row["converged"],
          "inertia": row["inertia"], "residual_mse": row["residual_mse"], "n_iter_cap": row["n_iter_cap"],
          "faiss_on_gpu": row["gpu"], "threads": threads, "peak_rss_gib": row["peak_rss_gb"]})
