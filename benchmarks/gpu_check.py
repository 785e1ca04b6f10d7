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
tiny on the CPU (``tests/benchmarks/test_gpu_check.py``).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
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
SKIP_MARKERS = ("cuda", "get_num_gpus", "gpu")
Emit = Callable[[dict[str, Any]], None]


# ------------------------------------------------------------------------------------------ helpers
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


# --------------------------------------------------------------------------------- (a) CUDA tests
def _skip_condition_text(node: ast.expr, source: str) -> str | None:
    """The condition source of a ``pytest.mark.skipif(...)`` decorator or mark, else ``None``."""
    if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("mark.skipif"):
        return ast.get_source_segment(source, node) or ast.unparse(node)
    return None


def _mentions_gpu(text: str) -> bool:
    low = text.lower()
    return any(marker in low for marker in SKIP_MARKERS)


def cuda_only_tests(tests: Path) -> list[str]:
    """Node ids (``tests/x.py::test_y``) of tests marked to skip without CUDA or FAISS GPUs.

    A function or class decorated with ``pytest.mark.skipif(...)`` whose condition names CUDA/GPUs, or a
    whole module whose ``pytestmark`` is such a mark."""
    found: list[str] = []
    for path in sorted(tests.rglob("test_*.py")):
        source = path.read_text(encoding="utf-8")
        if "skipif" not in source:
            continue
        rel = path.relative_to(tests.parent).as_posix()
        tree = ast.parse(source)
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark"
                                                    for t in node.targets):
                marks = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                if any(_mentions_gpu(_skip_condition_text(m, source) or "") for m in marks):
                    found.append(rel)
                    break
        else:
            for node in tree.body:
                candidates = [(node, node.name)] if isinstance(
                    node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else []
                if isinstance(node, ast.ClassDef):
                    candidates += [(m, f"{node.name}::{m.name}") for m in node.body
                                   if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
                for item, name in candidates:
                    if any(_mentions_gpu(_skip_condition_text(d, source) or "") for d in item.decorator_list):
                        found.append(f"{rel}::{name}")
    return found


def part_cuda_tests(args: argparse.Namespace, deadline: float, emit: Emit) -> None:
    nodes = cuda_only_tests(ROOT / "tests")
    emit({"kind": "discovered", "tests": nodes})
    if not nodes:
        emit({"kind": "note", "note": "no CUDA-only test found under tests/"})
        return
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-rA",
               f"--junitxml={junit}", *nodes]
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                              timeout=max(1.0, left(deadline) - 2.0))
        seconds = time.perf_counter() - start
        if not junit.is_file():
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            raise RuntimeError(f"pytest wrote no report (exit {done.returncode}): {' | '.join(tail)}")
        for case in ET.parse(junit).getroot().iter("testcase"):
            outcome, message = "passed", ""
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                    message = (child.get("message") or child.text or "").strip().splitlines()[0][:300] \
                        if (child.get("message") or child.text) else ""
            emit({"kind": "test", "test": f"{case.get('classname')}::{case.get('name')}", "outcome": outcome,
                  "message": message, "seconds": float(case.get("time") or 0.0)})
    emit({"kind": "pytest", "exit_code": done.returncode, "seconds": seconds})


# ------------------------------------------------------------------------------- (b) ItemIndex
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


# ------------------------------------------------------------------------------- (c) evaluator
def part_evaluator(args: argparse.Namespace, deadline: float, emit: Emit) -> None:
    import torch

    from recframe.metrics.evaluator import FullRankingEvaluator

    device = torch.device(args.device)
    sync = synchronizer(args.device)
    for n_items in args.eval_items:
        if left(deadline) < 3.0:
            emit({"kind": "size", "items": n_items, "skipped": "time budget gone"})
            continue
        users = int(max(1, min(args.eval_users, 2**28 // (n_items + 1))))  # a chunk's scores <= 1 GiB
        reset_peak(args.device)
        gen = torch.Generator(device=device).manual_seed(args.seed)
        scores = torch.randn(users, n_items + 1, generator=gen, device=device)
        targets = torch.randint(1, n_items + 1, (users, 1), generator=gen, device=device)
        labels = torch.ones_like(targets)
        seen = torch.randint(1, n_items + 1, (users, 50), generator=gen, device=device)
        seen[seen == targets] = 0
        evaluator = FullRankingEvaluator(n_items, ks=(10, 20))

        def chunk(evaluator: Any = evaluator, scores: Any = scores, targets: Any = targets,
                  labels: Any = labels, seen: Any = seen, users: int = users) -> int:
            evaluator.update(scores, targets, labels, seen)
            return users

        chunk()
        sync()
        seconds, done, reps = timed_loop(chunk, args.min_seconds, deadline, sync)
        metrics = evaluator.compute()
        peak, kind = peak_gib(args.device)
        emit({"kind": "size", "items": n_items, "users_per_s": done / seconds, "chunk_users": users,
              "seconds": seconds, "users": done, "repetitions": reps, "state_device": str(evaluator.device),
              "ndcg@10": metrics.get("ndcg@10"), "peak_gib": peak, "peak_kind": kind})
        del scores, targets, labels, seen, evaluator


# --------------------------------------------------------------------------- (d) SASRec on Beauty
def prepare_beauty(args: argparse.Namespace) -> tuple[Path, float]:
    """``recframe data prepare amazon-beauty`` (from ``--s3rec-dir`` when given); folder and seconds."""
    from recframe.data import catalog
    from recframe.data.s3rec_format import ENV_MIRROR

    if args.s3rec_dir is not None:
        os.environ[ENV_MIRROR] = str(Path(args.s3rec_dir).resolve())
    root = Path(args.data_root) if args.data_root is not None else catalog.default_root()
    start = time.perf_counter()
    folder = catalog.prepare("amazon-beauty", root, verbose=False)
    os.environ["RECFRAME_DATA"] = str(root)  # the datamodule reads its catalogued copy from here
    return folder, time.perf_counter() - start


def _epoch_clock(device: str, deadline: float) -> Any:
    import lightning as L

    sync = synchronizer(device)

    class EpochClock(L.Callback):
        """Seconds of each training epoch (device synchronised); stops fitting when the budget nears."""

        def __init__(self) -> None:
            self.seconds: list[float] = []
            self.stopped_early = False
            self._start = 0.0

        def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            sync()
            self._start = time.perf_counter()

        def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            sync()
            self.seconds.append(time.perf_counter() - self._start)
            last = trainer.current_epoch + 1 >= trainer.max_epochs
            if not last and left(deadline) < 1.5 * self.seconds[-1] + 2.0:
                trainer.should_stop = True
                self.stopped_early = True

    return EpochClock()


def sasrec_epochs(loss: str, args: argparse.Namespace, deadline: float) -> dict[str, Any]:
    """Fit SASRec from the Beauty config with ``loss`` for ``--sasrec-epochs`` epochs, validation off."""
    import torch
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from recframe.cli import run_cli

    overrides = ["--config", str(ROOT / args.sasrec_config), "--seed_everything", str(args.seed),
                 "--model.init_args.loss_type", loss, "--trainer.max_epochs", str(args.sasrec_epochs),
                 "--trainer.limit_val_batches", "0", "--trainer.logger", "false",
                 "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
                 "--trainer.accelerator", "gpu" if args.device.startswith("cuda") else "cpu",
                 "--trainer.devices", "1"]
    if args.sasrec_batches:
        overrides += ["--trainer.limit_train_batches", str(args.sasrec_batches)]
    cli = run_cli(overrides, run=False)
    trainer, model, dm = cli.trainer, cli.model, cli.datamodule
    clock = _epoch_clock(args.device, deadline)
    # validation is off, so neither early stopping nor checkpoints (both watch val_ndcg) have work here
    trainer.callbacks[:] = [c for c in trainer.callbacks
                            if not isinstance(c, (EarlyStopping, ModelCheckpoint))]
    trainer.callbacks.append(clock)
    reset_peak(args.device)
    trainer.fit(model, dm)
    peak, kind = peak_gib(args.device)
    metrics = trainer.callback_metrics
    loss_value = metrics.get("train/loss_epoch", metrics.get("train/loss"))
    return {"loss": loss, "epochs": len(clock.seconds), "epoch_seconds": clock.seconds,
            "s_per_epoch": clock.seconds[-1] if clock.seconds else None,
            "steps_per_epoch": int(trainer.num_training_batches), "n_items": int(dm.n_items),
            "users": int(dm.n_users), "batch_size": int(dm.batch_size), "peak_gib": peak, "peak_kind": kind,
            "chunk_size": int(model.next_item.chunk_size), "n_negatives": int(model.n_negatives),
            "deterministic": "warn" if torch.is_deterministic_algorithms_warn_only_enabled()
            else torch.are_deterministic_algorithms_enabled(),
            "stopped_early_for_budget": clock.stopped_early,
            "last_train_loss": float(loss_value) if loss_value is not None else None,
            "device": str(trainer.strategy.root_device)}


def part_sasrec_beauty(args: argparse.Namespace, deadline: float, emit: Emit) -> None:
    folder, seconds = prepare_beauty(args)
    emit({"kind": "prepare", "dataset": "amazon-beauty", "seconds": seconds, "folder": folder.name,
          "from_s3rec_dir": args.s3rec_dir is not None})
    for loss in args.sasrec_losses:
        if left(deadline) < 10.0:
            emit({"kind": "loss", "loss": loss, "skipped": "time budget gone"})
            continue
        emit({"kind": "loss", **sasrec_epochs(loss, args, deadline)})


# ----------------------------------------------------------------------------- (e) RQ-KMeans
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
