"""Part (b) of the GPU check: ItemIndex exact top-k on the GPU against raw FAISS GPU and the CPU."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from benchmarks.gpu.support import Emit, faiss_gpu_status, left, timed_loop


def part_item_index(args: argparse.Namespace, deadline: float, emit: Emit) -> None:
    import faiss
    import numpy as np

    from recframe.retrieval import ItemIndex

    rng = np.random.default_rng(args.seed)
    n, d, k = args.index_items, args.index_dim, args.k
    vectors = rng.standard_normal((n, d), dtype=np.float32)
    queries = rng.standard_normal((args.queries, d), dtype=np.float32)
    cpu_queries = queries[: args.cpu_queries]
    gpu_ok, gpu_why = faiss_gpu_status()
    emit({"kind": "setup", "items": n, "dim": d, "k": k, "gpu_queries": len(queries),
          "cpu_queries": len(cpu_queries), "faiss_threads": faiss.omp_get_max_threads()})
    reference: dict[str, np.ndarray] = {}
    rates: dict[str, float] = {}
    gpu_resources: list[Any] = []  # a raw GPU index needs its StandardGpuResources alive

    def run(name: str, build: Callable[[], Any], search: Callable[[Any, np.ndarray], np.ndarray],
            batch: np.ndarray, gpu: bool) -> None:
        if gpu and not gpu_ok:
            emit({"kind": "method", "method": name, "skipped": gpu_why})
            return
        if left(deadline) < 3.0:
            emit({"kind": "method", "method": name, "skipped": "time budget gone"})
            return
        start = time.perf_counter()
        index = build()
        build_s = time.perf_counter() - start
        labels = search(index, cpu_queries)  # warm-up, and the rows compared across methods
        reference[name] = labels

        def once() -> int:
            search(index, batch)
            return len(batch)

        seconds, done, reps = timed_loop(once, args.min_seconds, deadline, lambda: None)
        rates[name] = done / seconds
        emit({"kind": "method", "method": name, "build_seconds": build_s, "queries_per_s": done / seconds,
              "seconds": seconds, "queries": done, "batch": len(batch), "repetitions": reps,
              "on_gpu": gpu})

    def item_index(gpu: bool) -> Callable[[], Any]:
        return lambda: ItemIndex.from_embeddings(vectors, factory="Flat", padding_row=False, use_gpu=gpu)

    def raw(gpu: bool) -> Callable[[], Any]:
        def build() -> Any:
            if gpu:
                gpu_resources.append(faiss.StandardGpuResources())
                index = faiss.GpuIndexFlatIP(gpu_resources[-1], d)
            else:
                index = faiss.IndexFlatIP(d)
            index.add(vectors)
            return index
        return build

    def search_item_index(index: Any, q: np.ndarray) -> np.ndarray:
        return index.search(q, k).items - 1  # item p + 1 sits at FAISS position p

    def search_raw(index: Any, q: np.ndarray) -> np.ndarray:
        return index.search(q, k)[1]

    run("itemindex_gpu", item_index(True), search_item_index, queries, gpu=True)
    run("faiss_gpu_raw", raw(True), search_raw, queries, gpu=True)
    run("itemindex_cpu", item_index(False), search_item_index, cpu_queries, gpu=False)
    run("faiss_cpu_raw", raw(False), search_raw, cpu_queries, gpu=False)
    exact = reference.get("faiss_cpu_raw")
    if exact is not None:
        agree = {name: float(np.mean([len(set(a) & set(b)) / k for a, b in zip(labels, exact)]))
                 for name, labels in reference.items() if name != "faiss_cpu_raw"}
        emit({"kind": "agreement", "top_k_overlap_with_faiss_cpu_raw": agree})
    pairs = {"itemindex_gpu / faiss_gpu_raw": ("itemindex_gpu", "faiss_gpu_raw"),
             "itemindex_gpu / itemindex_cpu": ("itemindex_gpu", "itemindex_cpu"),
             "faiss_gpu_raw / faiss_cpu_raw": ("faiss_gpu_raw", "faiss_cpu_raw"),
             "itemindex_cpu / faiss_cpu_raw": ("itemindex_cpu", "faiss_cpu_raw")}
    emit({"kind": "ratios", "queries_per_s_ratios": {label: rates[a] / rates[b] for label, (a, b)
                                                     in pairs.items() if a in rates and b in rates}})
