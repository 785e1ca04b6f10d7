"""The GPU check of issue 32 (item 5): one prepared script for a lent device, the same script on the CPU.

Run (from the repository root; ``benchmarks/gpu_check.sh`` bootstraps the environment first and caps the
whole run at about 9 minutes)::

    python -m benchmarks.gpu_check --s3rec-dir FOLDER          # every part, full sizes, CUDA when present
    python -m benchmarks.gpu_check --parts item_index,evaluator --index-items 200000

The device is picked automatically (``--device auto``: CUDA when torch sees it, else the CPU) and recorded,
with the library versions and FAISS's GPU status, in every JSON written. Parts, each in its own process with
its own time budget (``--budget PART=SECONDS``; a part whose budget is gone is skipped with a note, and a part
stopped at its budget keeps the rows it had finished):

* ``cuda_tests`` -- the tests that skip without CUDA (found by reading ``tests/``: a ``skipif`` whose
  condition names CUDA or FAISS GPUs), run with pytest; each test's outcome.
* ``item_index`` -- exact top-``--k`` over ``--index-items`` x ``--index-dim`` random vectors:
  :class:`~recframe.retrieval.ItemIndex` on the GPU, raw FAISS on the GPU (``StandardGpuResources`` +
  ``GpuIndexFlatIP``), ``ItemIndex`` on the CPU and raw FAISS on the CPU (``IndexFlatIP``); queries per
  second, the ratios between them and the top-k agreement with raw FAISS on the CPU.
* ``evaluator`` -- :class:`~recframe.metrics.evaluator.FullRankingEvaluator` (default metrics, K = 10, 20,
  50 seen items masked) on synthetic scores on the device at each of ``--eval-items``; users per second.
* ``sasrec_beauty`` -- SASRec epochs on Amazon Beauty (``configs/amazon/sasrec_beauty.yaml``, validation
  off) with each of ``--sasrec-losses`` (``ce`` = full softmax, ``chunked``, ``sampled_logq``); seconds per
  epoch and peak GPU memory (``torch.cuda.max_memory_allocated``; on the CPU the process's peak RSS). The
  dataset is prepared first (``recframe data prepare amazon-beauty``), from the raw S3-Rec files in
  ``--s3rec-dir`` when given (the folder travels with the repository to a bare machine; it is passed on
  as ``RECFRAME_S3REC_DIR``); nothing is fetched when a verified copy is already under ``--data-root``.
* ``rq_kmeans`` -- :class:`~recframe.tokenizers.RQKMeansTokenizer` ``--kmeans-levels`` x
  ``--kmeans-codebook`` with FAISS k-means (on the GPU when FAISS sees one) over ``--kmeans-items`` x
  ``--kmeans-dim`` unit vectors (:func:`benchmarks.kmeans_scale.synthetic`); seconds, iterations and inertia
  per level.

Writes ``benchmarks/results/gpu_check/PART.{json,md}`` after each part and ``summary.{json,md}`` (every
part's status) via :func:`benchmarks.common.write_results`. Sizes are arguments, so the same script runs
tiny on the CPU (``tests/benchmarks/test_gpu_check.py``). Each part is a module of :mod:`benchmarks.gpu`;
this one runs them, each in its own process, and writes the results.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.gpu.cuda_tests import cuda_only_tests, part_cuda_tests
from benchmarks.gpu.evaluator import part_evaluator
from benchmarks.gpu.item_index import part_item_index
from benchmarks.gpu.rq_kmeans import part_rq_kmeans
from benchmarks.gpu.sasrec_beauty import part_sasrec_beauty
from benchmarks.gpu.support import ROOT, Emit, device_name, gpu_env, pick_device, set_threads

__all__ = ["PARTS", "BUDGETS", "RESULT_DIR", "cuda_only_tests", "main", "parse"]

PARTS: dict[str, str] = {
    "cuda_tests": "(a) CUDA-only tests",
    "item_index": "(b) ItemIndex exact top-k: GPU vs raw FAISS GPU vs CPU",
    "evaluator": "(c) evaluator users/s on the device",
    "sasrec_beauty": "(d) SASRec epoch on Amazon Beauty, full softmax vs scalable losses",
    "rq_kmeans": "(e) RQ-KMeans fit",
}
#: Default seconds each part may take; they add up to 480, under the 510 s of ``--time-limit``.
BUDGETS: dict[str, float] = {"cuda_tests": 60, "item_index": 120, "evaluator": 60, "sasrec_beauty": 150,
                             "rq_kmeans": 90}
#: Modules the parts import (``--missing-modules`` lists those absent; the shell wrapper installs them).
MODULES = ("torch", "lightning", "jsonargparse", "docstring_parser", "typeshed_client", "torch_geometric",
           "numpy", "scipy", "pandas", "pyarrow", "yaml", "faiss", "sklearn", "tqdm", "threadpoolctl",
           "numba", "pytest")
ROW_TAG = "GPU_CHECK_ROW "
MIN_PART_SECONDS = 5.0
RESULT_DIR = "gpu_check"


WORKERS: dict[str, Callable[[argparse.Namespace, float, Emit], None]] = {
    "cuda_tests": part_cuda_tests,
    "item_index": part_item_index,
    "evaluator": part_evaluator,
    "sasrec_beauty": part_sasrec_beauty,
    "rq_kmeans": part_rq_kmeans,
}


def work(part: str, args: argparse.Namespace) -> None:
    """Worker process: run ``part``, printing one tagged JSON line per finished row."""
    def emit(row: dict[str, Any]) -> None:
        print(ROW_TAG + json.dumps(row, default=str), flush=True)

    set_threads(args.threads)
    deadline = args.deadline if args.deadline is not None else time.time() + args.budgets[part]
    emit({"kind": "device", "device": args.device, "device_name": device_name(args.device)})
    WORKERS[part](args, deadline, emit)


# ------------------------------------------------------------------------------- orchestration
def run_part(part: str, argv: list[str], budget: float, env: dict[str, str]) -> dict[str, Any]:
    """``part`` in a fresh process (its own session) stopped after ``budget`` seconds; its record."""
    deadline = time.time() + budget
    cmd = [sys.executable, "-m", "benchmarks.gpu_check", *argv, "--worker", part,
           "--deadline", f"{deadline:.3f}"]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=budget + 5.0)  # the worker watches the deadline itself first
        status = "ran" if proc.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the worker and the processes it started (pytest)
        out, err = proc.communicate()
        status = "stopped"
    rows = [json.loads(line[len(ROW_TAG):]) for line in out.splitlines() if line.startswith(ROW_TAG)]
    record: dict[str, Any] = {"part": part, "title": PARTS[part], "status": status, "budget_s": budget,
                              "wall_s": time.perf_counter() - start, "rows": rows}
    if status == "failed":
        tail = [line for line in err.strip().splitlines() if line.strip()][-1:] or ["no output"]
        record["reason"] = f"exit {proc.returncode}: {tail[0][:300]}"
    elif status == "stopped":
        record["reason"] = f"stopped at its budget of {budget:.0f} s; the rows finished before are kept"
    return record


def run_part_here(part: str, args: argparse.Namespace, budget: float) -> dict[str, Any]:
    """``part`` in this process (``--in-process``, for tests): the deadline is checked between rows only."""
    import torch

    rows: list[dict[str, Any]] = []
    threads = torch.get_num_threads()
    start = time.perf_counter()
    record: dict[str, Any] = {"part": part, "title": PARTS[part], "status": "ran", "budget_s": budget}
    try:
        set_threads(args.threads)
        rows.append({"kind": "device", "device": args.device, "device_name": device_name(args.device)})
        WORKERS[part](args, time.time() + budget, rows.append)
    except Exception as exc:  # recorded like a failed worker process: one line
        record.update(status="failed", reason=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
    finally:
        torch.set_num_threads(threads)
    rows = json.loads(json.dumps(rows, default=str))  # the same values a worker's JSON lines carry
    return {**record, "wall_s": time.perf_counter() - start, "rows": rows}


def part_markdown(record: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [f"# GPU check {record['title']}", "",
             f"`{meta['command']}` on {meta['device_name']} ({meta['device']}), {meta['date']}. "
             f"Status: **{record['status']}**" + (f" ({record['reason']})" if record.get("reason") else "")
             + f"; {record['wall_s']:.1f} s of a {record['budget_s']:.0f} s budget.", ""]
    for row in record["rows"]:
        if row.get("kind") == "device":
            continue
        lines.append("- " + ", ".join(f"{key}: {_short(value)}" for key, value in row.items()))
    return "\n".join(lines) + "\n"


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_short(v)}" for k, v in value.items()) + "}"
    return str(value)


def summary_markdown(records: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"# GPU check: {meta['device_name']} ({meta['device']})", "",
             f"`{meta['command']}`, {meta['date']}; {meta['total_s']:.0f} s of a {meta['time_limit']:.0f} s "
             "limit. One file per part beside this one.", "",
             "| part | status | wall s | note |", "|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['title']} | {r['status']} | {r.get('wall_s', 0.0):.1f} | {r.get('reason', '')} |")
    return "\n".join(lines) + "\n"


def orchestrate(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    from benchmarks.common import write_results

    start = time.time()
    end = start + args.time_limit
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if args.threads > 0:
        env.update({var: str(args.threads) for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                       "MKL_NUM_THREADS")})
    meta = {"command": "python -m benchmarks.gpu_check " + " ".join(argv), "device": args.device,
            "device_name": device_name(args.device), "gpu_env": gpu_env(), "seed": args.seed,
            "time_limit": args.time_limit, "date": time.strftime("%Y-%m-%d"),
            "settings": {k: v for k, v in vars(args).items() if k not in ("worker", "deadline")}}
    records: list[dict[str, Any]] = []
    for part in args.parts:
        remaining = end - time.time()
        budget = min(args.budgets[part], remaining)
        if remaining < MIN_PART_SECONDS or budget <= 0:
            reason = (f"its budget is {args.budgets[part]:g} s (--budget)" if args.budgets[part] <= 0 else
                      f"time budget gone: {max(0.0, remaining):.0f} s left of --time-limit "
                      f"{args.time_limit:.0f}")
            record = {"part": part, "title": PARTS[part], "status": "skipped", "budget_s": args.budgets[part],
                      "wall_s": 0.0, "rows": [], "reason": reason}
        elif args.in_process:
            record = run_part_here(part, args, budget)
        else:
            record = run_part(part, argv, budget, env)
        records.append(record)
        print(f"{part:14s} {record['status']:8s} {record['wall_s']:6.1f} s  {record.get('reason', '')}",
              flush=True)
        write_results(f"{RESULT_DIR}/{part}", {**meta, **record}, part_markdown(record, meta))
        meta["total_s"] = time.time() - start
        summary = [{k: r.get(k) for k in ("part", "title", "status", "wall_s", "budget_s", "reason")}
                   for r in records]
        write_results(f"{RESULT_DIR}/summary", {**meta, "parts": summary}, summary_markdown(records, meta))
    return {"meta": meta, "records": records}


# ------------------------------------------------------------------------------------------ main
def _budgets(values: list[str]) -> dict[str, float]:
    budgets = dict(BUDGETS)
    for item in values:
        name, _, seconds = item.partition("=")
        if name not in PARTS or not seconds:
            raise SystemExit(f"--budget {item!r}: use PART=SECONDS with PART one of {', '.join(PARTS)}")
        try:
            budgets[name] = float(seconds)
        except ValueError:
            raise SystemExit(f"--budget {item!r}: {seconds!r} is not a number of seconds") from None
    return budgets


def _int_list(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated subset of: " + ", ".join(PARTS))
    ap.add_argument("--time-limit", type=float, default=510.0, help="seconds for all parts together")
    ap.add_argument("--budget", action="append", default=[], metavar="PART=SECONDS",
                    help="a part's own time budget (defaults: "
                         + ", ".join(f"{k}={v:g}" for k, v in BUDGETS.items()) + ")")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads for torch/FAISS (0: their default)")
    ap.add_argument("--min-seconds", type=float, default=3.0, help="time of each throughput measurement")
    ap.add_argument("--index-items", type=int, default=1_000_000)
    ap.add_argument("--index-dim", type=int, default=64)
    ap.add_argument("--queries", type=int, default=4096, help="query batch on the GPU")
    ap.add_argument("--cpu-queries", type=int, default=256, help="query batch on the CPU")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--eval-items", type=_int_list, default=[170_000, 1_000_000])
    ap.add_argument("--eval-users", type=int, default=1024, help="users per evaluator update (<= 1 GiB)")
    ap.add_argument("--s3rec-dir", type=Path, default=None,
                    help="folder holding Beauty.txt and Beauty_item2attributes.json (prepares amazon-beauty)")
    ap.add_argument("--data-root", type=Path, default=None,
                    help="dataset cache (default: $RECFRAME_DATA or datasets/)")
    ap.add_argument("--sasrec-config", default="configs/amazon/sasrec_beauty.yaml")
    ap.add_argument("--sasrec-losses", type=lambda s: s.split(","), default=["ce", "chunked", "sampled_logq"])
    ap.add_argument("--sasrec-epochs", type=int, default=2, help="epochs per loss (the last one is reported)")
    ap.add_argument("--sasrec-batches", type=int, default=0, help="training batches per epoch (0: all)")
    ap.add_argument("--kmeans-items", type=int, default=1_000_000)
    ap.add_argument("--kmeans-dim", type=int, default=64)
    ap.add_argument("--kmeans-levels", type=int, default=3)
    ap.add_argument("--kmeans-codebook", type=int, default=64)
    ap.add_argument("--kmeans-n-iter", type=int, default=100)
    ap.add_argument("--in-process", action="store_true",
                    help="run the parts in this process (tests): faster, budgets checked between rows only")
    ap.add_argument("--missing-modules", action="store_true",
                    help="print the modules the parts need that are not installed, then exit")
    ap.add_argument("--worker", choices=tuple(PARTS), help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.parts = [p for p in args.parts.split(",") if p]
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        ap.error(f"--parts: unknown part {unknown[0]!r}; choose from {', '.join(PARTS)}")
    bad_loss = [x for x in args.sasrec_losses if x not in ("ce", "chunked", "sampled", "sampled_logq")]
    if bad_loss:
        ap.error(f"--sasrec-losses: unknown loss {bad_loss[0]!r}; use ce, chunked, sampled or sampled_logq")
    args.budgets = _budgets(args.budget)
    return args


def missing_modules() -> list[str]:
    """Modules of :data:`MODULES` that cannot be imported here (found without importing them)."""
    from importlib.util import find_spec

    return [name for name in MODULES if find_spec(name) is None]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse(argv)
    if args.missing_modules:
        print(" ".join(missing_modules()))
        return {}
    args.device = pick_device(args.device)
    if args.worker:
        work(args.worker, args)
        return {}
    return orchestrate(args, argv)


if __name__ == "__main__":
    main()
