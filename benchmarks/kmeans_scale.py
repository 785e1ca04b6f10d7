"""RQ-KMeans 3 x 64 at 10^6 items: FAISS k-means against the hand-written Lloyd loop, one thread.

Run::

    python -m benchmarks.kmeans_scale                          # 1M x 64 (minutes; the Lloyd row is slow)
    python -m benchmarks.kmeans_scale --items 20000 --no-write # smoke run

Data: ``--items`` unit-length vectors of width ``--dim`` (like MiniLM features): a mixture of
``--centres`` Gaussian clusters (centres ~ N(0, I), spread ``--spread``), normalised, seed ``--seed``.
Each backend fits :class:`recframe.tokenizers.RQKMeansTokenizer` (``--levels`` x ``--codebook``,
``n_iter`` at most ``--n-iter``, FAISS stopping at relative inertia decrease ``--tol``) in its own
process with every thread pool at ``--threads`` (so its peak RSS is its own). Reported per backend:
fit seconds (:meth:`SIDTokenizer.fit`, disambiguation and statistics included), per level the
iterations, whether it converged before the cap, the inertia, and the residual MSE; the table gives
the hand-written / FAISS time ratio. ``--lloyd-n-iter`` caps the hand-written loop separately (its
rows then say so) when a converged hand-written run would take too long.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from typing import Any

from benchmarks.common import worker_row

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def synthetic(n: int, dim: int, centres: int, spread: float, seed: int):
    """Unit-length ``[n + 1, dim]`` float32 features (row 0 = padding, zeros) from a Gaussian mixture."""
    import numpy as np

    rng = np.random.default_rng(seed)
    mu = rng.standard_normal((centres, dim)).astype(np.float32)
    x = np.zeros((n + 1, dim), dtype=np.float32)
    x[1:] = mu[rng.integers(centres, size=n)] + spread * rng.standard_normal((n, dim), dtype=np.float32)
    x[1:] /= np.linalg.norm(x[1:], axis=1, keepdims=True)
    return x


def run_one(backend: str, args: argparse.Namespace) -> dict[str, Any]:
    """Fit RQ-KMeans with ``backend`` in this process."""
    import faiss

    from recframe.tokenizers import RQKMeansTokenizer

    faiss.omp_set_num_threads(args.threads)
    x = synthetic(args.items, args.dim, args.centres, args.spread, args.seed)
    n_iter = args.lloyd_n_iter if backend == "lloyd" and args.lloyd_n_iter else args.n_iter
    tok = RQKMeansTokenizer(args.levels, args.codebook, n_iter=n_iter, seed=args.seed, backend=backend,
                            tol=args.tol)
    start, cpu = time.perf_counter(), time.process_time()
    table = tok.fit(x)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    st = table.stats
    return {"backend": backend, "items": args.items, "seconds": seconds, "cpu_seconds": cpu,
            "n_iter_cap": n_iter,
            "fit_seconds": st["fit_seconds"], "iterations": st["kmeans_iterations"],
            "converged": st["kmeans_converged"], "inertia": st["kmeans_inertia"],
            "residual_mse": st["residual_mse"], "collision_rate": st.get("collision_rate"),
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
            "gpu": bool(faiss.get_num_gpus()) and backend == "faiss", "threads": args.threads}


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    env = {**os.environ, **{v: str(args.threads) for v in THREAD_VARS}}
    for backend in args.backends:
        row = worker_row("benchmarks.kmeans_scale", [backend, *_shared_flags(args)], env)
        rows.append(row)
        print(f"{backend}: {row['seconds']:.1f} s ({row['cpu_seconds']:.1f} s CPU), iterations "
              f"{row['iterations']}, converged {row['converged']}", flush=True)
    return rows


def _shared_flags(args: argparse.Namespace) -> list[str]:
    flags = ["--items", str(args.items), "--dim", str(args.dim), "--levels", str(args.levels), "--codebook",
             str(args.codebook), "--n-iter", str(args.n_iter), "--tol", str(args.tol), "--threads",
             str(args.threads), "--seed", str(args.seed), "--centres", str(args.centres), "--spread",
             str(args.spread)]
    return flags + (["--lloyd-n-iter", str(args.lloyd_n_iter)] if args.lloyd_n_iter else [])


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    faiss_row = next((r for r in rows if r["backend"] == "faiss"), None)
    lines = [f"# RQ-KMeans {args.levels}x{args.codebook} over {args.items:,} x {args.dim} ({args.threads} "
             "thread(s))", "",
             f"Gaussian-mixture unit vectors ({args.centres} centres, spread {args.spread}), seed "
             f"{args.seed}; FAISS stops a level at relative inertia decrease < {args.tol}, the hand-written "
             "loop when the assignment stops changing; both at most the iteration cap.", "",
             "Wall and CPU seconds of the fit: with one thread, CPU seconds are what an idle machine's wall "
             "time would be (the wall time also counts waiting for a busy machine's cores).", "",
             "| k-means | fit wall s | fit CPU s | CPU time / FAISS | iterations per level (cap) | converged "
             "| inertia per level | final residual MSE | peak RSS (GiB) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['cpu_seconds'] / faiss_row['cpu_seconds']:.1f}x" if faiss_row else "–"
        name = "FAISS" + (" (GPU)" if r["gpu"] else "") if r["backend"] == "faiss" else "hand-written Lloyd"
        inertia = ", ".join(f"{v:.4g}" for v in r["inertia"])
        lines.append(f"| {name} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | {ratio} | {r['iterations']} "
                     f"({r['n_iter_cap']}) | {r['converged']} | {inertia} | {r['residual_mse'][-1]:.4f} | "
                     f"{r['peak_rss_gb']:.2f} |")
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--levels", type=int, default=3)
    ap.add_argument("--codebook", type=int, default=64)
    ap.add_argument("--n-iter", type=int, default=100)
    ap.add_argument("--lloyd-n-iter", type=int, default=0,
                    help="separate cap of the hand-written loop (0: same)")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--backends", nargs="+", choices=("faiss", "lloyd"), default=["faiss", "lloyd"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--centres", type=int, default=1000)
    ap.add_argument("--spread", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="kmeans_scale", help="results file stem")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--worker", choices=("faiss", "lloyd"), help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    args = parse(argv)
    if args.worker:
        print(json.dumps(run_one(args.worker, args)))
        return []
    rows = measure(args)
    if not args.no_write:
        from benchmarks.common import write_measured

        write_measured(args.name, "benchmarks.kmeans_scale", argv, vars(args), rows, markdown(rows, args))
    print(markdown(rows, args))
    return rows


if __name__ == "__main__":
    main()
