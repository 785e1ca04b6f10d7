"""Scale benchmark: every component's cost at 1x, 10x and 100x ML-100K (and 1M items), one thread.

Run::

    python -m benchmarks.scale                                  # S, M, L (tens of minutes)
    python -m benchmarks.scale --sizes S,M --components data,evaluator
    python -m benchmarks.scale --sizes XL --components rq_kmeans,evaluator,item_index

Sizes (items, rows): ``S`` = 1,682 / 100k (ML-100K's shape), ``M`` = 16,820 / 1M, ``L`` = 168,200 / 10M,
``XL`` = 1M / 10M; ``ITEMSxROWS`` (e.g. ``300x5000``) names any other. Users = rows / 106 (ML-100K's
mean history length). Every cell (component x size) runs in a fresh subprocess with one thread for torch,
BLAS, OpenMP and FAISS, and reports the child's peak resident memory (``resource.getrusage``,
``ru_maxrss``, imports included) beside its time. Components, each through the project's own API:

* ``data`` -- :class:`~recframe.data.datamodule.RecDataModule` on the synthetic generator: generate,
  drop exact duplicates, label, leave-one-out split (``setup``); seconds and bytes per row above the
  memory after the imports.
* ``sasrec_ce`` / ``sasrec_chunked`` / ``sasrec_sampled_logq`` -- one SASRec optimiser step (batch 128 x 50
  positions, hidden 64) with the full softmax, the chunked exact CE and the sampled softmax with logQ
  (:mod:`benchmarks.scalable_loss`'s step); the full softmax is not run where its logits alone exceed
  ``--max-logits-gb``.
* ``tiger_step`` -- one TIGER optimiser step (``configs/tiger_ml100k.yaml``'s sizes, batch 128 x 50) on a
  random valid 3 x 64 semantic-ID table.
* ``rq_kmeans`` -- :class:`~recframe.tokenizers.RQKMeansTokenizer` 3 x 64 fit on ``items x 64`` unit
  vectors (:func:`benchmarks.kmeans_scale.synthetic`).
* ``evaluator`` -- :class:`~recframe.metrics.evaluator.FullRankingEvaluator` (default metrics, K = 10, 20)
  on random scores, 50 seen items masked; users per second.
* ``generative_exact`` -- TIGER's exact scoring of every item's code path (``score``); users per second.
* ``item_index`` -- :class:`~recframe.retrieval.ItemIndex` ``Flat`` (exact) top-10 over ``items x 64``;
  queries per second.

Throughputs repeat the operation until ``--min-seconds`` have passed (at least once). Writes
``benchmarks/results/scale.json`` (every cell, the device, versions, machine), ``scale.md`` (the issue-32
table: one column per size) and ``scale.png`` (cost against size, log-log, beside a linear reference).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SIZES: dict[str, tuple[int, int]] = {
    "S": (1_682, 100_000),
    "M": (16_820, 1_000_000),
    "L": (168_200, 10_000_000),
    "XL": (1_000_000, 10_000_000),
}
SIZE_LABEL = {"S": "1.7k items", "M": "17k", "L": "170k", "XL": "1M"}
MEAN_LENGTH = 106  # ML-100K: 100,000 rows / 943 users
BATCH, MAX_LEN = 128, 50
COMPONENTS: dict[str, str] = {
    "data": "data: generate + split + datamodule",
    "sasrec_ce": "SASRec training step (batch 128), full softmax",
    "sasrec_chunked": "SASRec training step, chunked exact CE",
    "sasrec_sampled_logq": "SASRec training step, sampled softmax + logQ",
    "tiger_step": "TIGER training step",
    "rq_kmeans": "RQ-KMeans 3x64 fit",
    "evaluator": "evaluator, users/s",
    "generative_exact": "exact generative scoring, users/s",
    "item_index": "ItemIndex exact top-10, queries/s",
}
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")


# ------------------------------------------------------------------------------------------ helpers
def peak_mb() -> float:
    """Peak resident memory of this process so far, MB (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pick_device(name: str) -> str:
    """``auto``: CUDA when torch sees it, else CPU."""
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def device_name(device: str) -> str:
    """The accelerator's name, or the CPU's."""
    import platform

    import torch

    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def repeat_until(op: Callable[[], int], min_seconds: float, sync: Callable[[], None]) -> tuple[float, int]:
    """Run ``op`` (returns units done) until ``min_seconds`` passed; (seconds, units)."""
    units, start = 0, time.perf_counter()
    while True:
        units += op()
        sync()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed, units


def random_codes(n_items: int, seed: int, levels: int = 3,
                 codebook: int = 64) -> tuple[np.ndarray, tuple[int, ...]]:
    """A valid semantic-ID table ``[n_items + 1, levels + 1]``: uniform codes plus a disambiguation level."""
    rng = np.random.default_rng(seed)
    sem = rng.integers(0, codebook, size=(n_items, levels))
    key = (sem * codebook ** np.arange(levels)).sum(axis=1)
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    start = np.flatnonzero(np.concatenate([[True], sorted_key[1:] != sorted_key[:-1]]))
    group = np.cumsum(np.concatenate([[True], sorted_key[1:] != sorted_key[:-1]])) - 1
    rank = np.empty(n_items, dtype=np.int64)
    rank[order] = np.arange(n_items) - start[group]  # position within the colliding group
    codes = np.zeros((n_items + 1, levels + 1), dtype=np.int64)
    codes[1:, :levels], codes[1:, levels] = sem, rank
    return codes, (codebook,) * levels + (int(rank.max()) + 1,)


def tiger_model(n_items: int, seed: int, device: str) -> Any:
    """TIGER sized as ``configs/tiger_ml100k.yaml``, random init, on a random valid code table."""
    import torch
    import yaml

    from recframe.models.generative import TIGER

    config = Path(__file__).resolve().parent.parent / "configs" / "tiger_ml100k.yaml"
    with open(config) as fh:
        init = yaml.safe_load(fh)["model"]["init_args"]
    keys = ("dim", "n_layers", "n_heads", "inner", "dropout", "attn_dropout", "embedding_std",
            "history_tokens", "normalize")
    torch.manual_seed(seed)
    model = TIGER(n_items=n_items, max_len=MAX_LEN, **{k: init[k] for k in keys if k in init})
    model.build_backbone(*random_codes(n_items, seed))
    return model.to(device)


# --------------------------------------------------------------------------------------- components
def run_data(items: int, rows: int, args: argparse.Namespace) -> dict[str, Any]:
    from recframe.data.datamodule import RecDataModule

    base = peak_mb()
    synthetic = {"n_users": max(2, round(rows / MEAN_LENGTH)), "n_items": items,
                 "mean_length": MEAN_LENGTH, "seed": args.seed}
    start = time.perf_counter()
    dm = RecDataModule(dataset="synthetic", synthetic=synthetic)
    dm.setup("fit")
    seconds = time.perf_counter() - start
    split = dm.split
    n = len(split.train) + len(split.valid) + len(split.test)
    return {"seconds": seconds, "rows": n, "users": dm.n_users, "items_present": dm.n_items,
            "mb_after_imports": base, "bytes_per_row_above_imports": (peak_mb() - base) * 2**20 / n}


def run_sasrec(loss: str) -> Callable[[int, int, argparse.Namespace], dict[str, Any]]:
    def run(items: int, rows: int, args: argparse.Namespace) -> dict[str, Any]:
        from benchmarks import scalable_loss

        flags = ["--steps", "1", "--warmup", "1", "--threads", "1", "--device", args.device,
                 "--seed", str(args.seed), "--batch", str(BATCH), "--max-len", str(MAX_LEN)]
        row = scalable_loss.run_one(items, loss, scalable_loss.parse(flags))
        return {"seconds": row["s_per_step"], "positions": row["positions"],
                "loss_values": row["loss_values"]}

    return run


def run_tiger_step(items: int, rows: int, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    model = tiger_model(items, args.seed, args.device)
    model.train()
    gen = torch.Generator().manual_seed(args.seed)
    seq = torch.randint(1, items + 1, (BATCH, MAX_LEN + 1), generator=gen)
    batch = {"input": seq[:, :-1].to(args.device), "target": seq[:, 1:].to(args.device)}
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step() -> int:
        opt.zero_grad(set_to_none=True)
        model.loss(batch).backward()
        opt.step()
        return 1

    step()  # warm-up
    seconds, steps = repeat_until(step, args.min_seconds, _sync(args.device))
    return {"seconds": seconds / steps, "steps": steps}


def run_rq_kmeans(items: int, rows: int, args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.kmeans_scale import synthetic
    from recframe.tokenizers import RQKMeansTokenizer

    x = synthetic(items, 64, 1000, 0.5, args.seed)
    start = time.perf_counter()
    table = RQKMeansTokenizer(3, 64, seed=args.seed).fit(x)
    seconds = time.perf_counter() - start
    levels = table.stats.get("levels") if isinstance(table.stats, dict) else None
    return {"seconds": seconds, "levels": levels}


def run_evaluator(items: int, rows: int, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from recframe.metrics.evaluator import FullRankingEvaluator

    users = int(min(1024, max(16, 2**26 // (items + 1))))  # a chunk's scores stay <= 256 MB
    gen = torch.Generator().manual_seed(args.seed)
    scores = torch.randn(users, items + 1, generator=gen).to(args.device)
    targets = torch.randint(1, items + 1, (users, 1), generator=gen).to(args.device)
    labels = torch.ones_like(targets)
    seen = torch.randint(1, items + 1, (users, 50), generator=gen).to(args.device)
    seen[seen == targets] = 0
    evaluator = FullRankingEvaluator(items, ks=(10, 20))

    def chunk() -> int:
        evaluator.update(scores, targets, labels, seen)
        return users

    chunk()
    seconds, done = repeat_until(chunk, args.min_seconds, _sync(args.device))
    evaluator.compute()
    return {"seconds": seconds / done, "rate": done / seconds, "chunk_users": users}


def run_generative_exact(items: int, rows: int, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    model = tiger_model(items, args.seed, args.device).eval()
    users = 8
    gen = torch.Generator().manual_seed(args.seed)
    history = torch.randint(1, items + 1, (users, MAX_LEN), generator=gen).to(args.device)

    def score() -> int:
        with torch.no_grad():
            model.score({"history": history})
        return users

    seconds, done = repeat_until(score, args.min_seconds, _sync(args.device))
    return {"seconds": seconds / done, "rate": done / seconds, "batch_users": users}


def run_item_index(items: int, rows: int, args: argparse.Namespace) -> dict[str, Any]:
    from recframe.retrieval import ItemIndex

    rng = np.random.default_rng(args.seed)
    vectors = rng.standard_normal((items + 1, 64), dtype=np.float32)
    queries = rng.standard_normal((256, 64), dtype=np.float32)
    index = ItemIndex.from_embeddings(vectors, factory="Flat", use_gpu=args.device.startswith("cuda"))

    def search() -> int:
        index.search(queries, 10)
        return len(queries)

    search()
    seconds, done = repeat_until(search, args.min_seconds, lambda: None)
    return {"seconds": seconds / done, "rate": done / seconds, "on_gpu": index.on_gpu}


RUNNERS: dict[str, Callable[[int, int, argparse.Namespace], dict[str, Any]]] = {
    "data": run_data,
    "sasrec_ce": run_sasrec("ce"),
    "sasrec_chunked": run_sasrec("chunked"),
    "sasrec_sampled_logq": run_sasrec("sampled_logq"),
    "tiger_step": run_tiger_step,
    "rq_kmeans": run_rq_kmeans,
    "evaluator": run_evaluator,
    "generative_exact": run_generative_exact,
    "item_index": run_item_index,
}


def _sync(device: str) -> Callable[[], None]:
    import torch

    return (lambda: torch.cuda.synchronize()) if device.startswith("cuda") else (lambda: None)


def one_thread() -> None:
    """Pin torch and FAISS to one thread (the environment pins BLAS/OpenMP before they load)."""
    import torch

    torch.set_num_threads(1)
    try:
        import faiss

        faiss.omp_set_num_threads(1)
    except ImportError:  # the FAISS-free components still run
        pass


def cell(component: str, size: str, args: argparse.Namespace) -> dict[str, Any]:
    """One measurement in this process: the runner's numbers plus device and peak RSS."""
    items, rows = parse_size(size)
    one_thread()
    out = RUNNERS[component](items, rows, args)
    return {"component": component, "size": size, "items": items, "rows": rows, "device": args.device,
            "device_name": device_name(args.device), "threads": 1, "peak_rss_mb": peak_mb(), **out}


def skip_reason(component: str, size: str, args: argparse.Namespace) -> str | None:
    """Why a cell is not run (``None``: it runs)."""
    items, _ = parse_size(size)
    if component == "sasrec_ce":
        logits_gb = BATCH * MAX_LEN * (items + 1) * 4 / 2**30
        if logits_gb > args.max_logits_gb:
            return (f"not feasible here: {logits_gb:.1f} GiB of logits alone "
                    f"(> --max-logits-gb {args.max_logits_gb})")
    return None


def run_cell(component: str, size: str, args: argparse.Namespace) -> dict[str, Any]:
    """A cell in a fresh subprocess (one thread), or in this process with ``--in-process``."""
    reason = skip_reason(component, size, args)
    base = {"component": component, "size": size, "items": parse_size(size)[0], "rows": parse_size(size)[1]}
    if reason:
        return {**base, "skipped": reason}
    if args.in_process:
        return cell(component, size, args)
    env = {**os.environ, **{var: "1" for var in THREAD_VARS}}
    cmd = [sys.executable, "-m", "benchmarks.scale", "--worker", component, size, "--device", args.device,
           "--seed", str(args.seed), "--min-seconds", str(args.min_seconds)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.cell_timeout,
                              cwd=Path(__file__).resolve().parent.parent)
    except subprocess.TimeoutExpired:
        return {**base, "skipped": f"stopped after --cell-timeout {args.cell_timeout:g} s"}
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        return {**base, "skipped": f"failed (exit {done.returncode}): {tail[0][:200]}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def parse_size(size: str) -> tuple[int, int]:
    """``S``/``M``/``L``/``XL`` or ``ITEMSxROWS``."""
    if size in SIZES:
        return SIZES[size]
    try:
        items, rows = (int(part) for part in size.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--sizes: unknown size {size!r}; use {', '.join(SIZES)} or ITEMSxROWS "
                         "(e.g. 300x5000)") from None
    if items < 64 or rows < 2 * items // 10:
        raise SystemExit(f"--sizes: {size!r} is too small; use at least 64 items (RQ-KMeans needs 64 per "
                         "level) and 0.2 rows per item")
    return items, rows


# ------------------------------------------------------------------------------------------- report
def cost(row: dict[str, Any]) -> float | None:
    """Seconds per operation (per step, fit, user or query), or ``None`` for a skipped cell."""
    return None if "skipped" in row else float(row["seconds"])


def format_cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "not run"
    if "skipped" in row:
        return row["skipped"].split(":")[0]
    mb = row["peak_rss_mb"]
    peak = f"{mb / 1024:.1f} GB" if mb >= 1024 else f"{mb:.0f} MB"
    if "rate" in row:
        value = f"{row['rate']:,.0f}" if row["rate"] >= 10 else f"{row['rate']:.2g}"
    else:
        value = f"{row['seconds']:.2f} s" if row["seconds"] < 100 else f"{row['seconds']:.0f} s"
    per_row = row.get("bytes_per_row_above_imports")
    extra = f", {per_row:.0f} B/row" if per_row is not None else ""
    return f"{value}, {peak}{extra}"


def slope(rows: list[dict[str, Any]]) -> float | None:
    """Log-log slope of cost against catalogue size (rows for ``data``) between the extreme measured sizes."""
    points = [(r["rows"] if r["component"] == "data" else r["items"], cost(r)) for r in rows]
    points = sorted((x, c) for x, c in points if c is not None and c > 0)
    if len(points) < 2 or points[0][0] == points[-1][0]:
        return None
    (x0, c0), (x1, c1) = points[0], points[-1]
    return float(np.log(c1 / c0) / np.log(x1 / x0))


def commands_line(meta: dict[str, Any]) -> str:
    """The invocation, or every invocation merged into the table, oldest first."""
    commands = meta.get("commands") or [meta["command"]]
    if len(commands) == 1:
        return f"`{commands[0]}`"
    return "Merged from " + "; then ".join(f"`{c}`" for c in commands) + ";"


def plot_label(title: str) -> str:
    """A component's title as plotted: throughputs are drawn as their inverse (seconds per unit)."""
    return title.replace("users/s", "s per user").replace("queries/s", "s per query")


def markdown(results: list[dict[str, Any]], sizes: list[str], meta: dict[str, Any]) -> str:
    label = {s: SIZE_LABEL.get(s, f"{parse_size(s)[0]:,} items") for s in sizes}
    lines = [
        "# Scale: cost of each component at 1x / 10x / 100x ML-100K (and 1M items)",
        "",
        f"{commands_line(meta)} on {meta['device_name']} ({meta['device']}), one thread; each cell in a "
        "fresh "
        "process, value then that process's peak RSS (imports included). Rows: 100k / 1M / 10M at 1.7k / 17k "
        "/ 170k items (1M items: 10M rows). Training steps and fits: seconds; throughputs: per second. "
        "Slope: log-log slope of cost against items (rows for data) between the smallest and largest size "
        "measured; 1 = linear.",
        "",
        "| component | " + " | ".join(label[s] for s in sizes) + " | what grows badly, and where |",
        "|---|" + "---|" * len(sizes) + "---|",
    ]
    for comp, title in COMPONENTS.items():
        rows = [r for r in results if r["component"] == comp]
        if not rows:
            continue
        by_size = {r["size"]: r for r in rows}
        s = slope(rows)
        lines.append(f"| {title} | " + " | ".join(format_cell(by_size.get(z)) for z in sizes)
                     + f" | {f'slope {s:.2f}' if s is not None else '–'} |")
    skipped = [r for r in results if "skipped" in r]
    if skipped:
        lines += ["", "Cells not run:"]
        lines += [f"- {r['component']} at {r['size']}: {r['skipped']}" for r in skipped]
    return "\n".join(lines) + "\n"


def plot(results: list[dict[str, Any]], path: Path) -> Path:
    """Cost against size, log-log, one line per component, beside a linear (slope 1) reference."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.common import save_figure

    fig, ax = plt.subplots(figsize=(10.5, 5.5))
    lo, hi = np.inf, 0.0
    for comp, title in COMPONENTS.items():
        pts = sorted((r["rows"] if comp == "data" else r["items"], cost(r)) for r in results
                     if r["component"] == comp and cost(r))
        if not pts:
            continue
        xs, ys = zip(*pts)
        line, = ax.plot(xs, ys, marker="o", label=plot_label(title))
        ref = np.array([xs[0], xs[-1]], dtype=float)
        if len(pts) > 1:
            ax.plot(ref, ys[0] * ref / ref[0], linestyle=":", color=line.get_color(), alpha=0.6)
        lo, hi = min(lo, min(xs)), max(hi, max(xs))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("catalogue size (items; rows for data)")
    ax.set_ylabel("seconds per step / fit / user / query")
    ax.set_title("Cost against size (dotted: linear from each first point)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


def write(results: list[dict[str, Any]], sizes: list[str], meta: dict[str, Any], out: Path, name: str,
          merge: bool) -> list[Path]:
    """``NAME.json`` / ``NAME.md`` / ``NAME.png`` under ``out``; ``merge`` keeps the cells not rerun."""
    from benchmarks.common import machine
    from recframe.callbacks import library_versions
    from recframe.checkpoint_io import atomic_write

    js = out / f"{name}.json"
    if merge and js.is_file():
        fresh = {(r["component"], r["size"]) for r in results}
        old = json.loads(js.read_text())
        results = [r for r in old.get("cells", []) if (r["component"], r["size"]) not in fresh] + results
        sizes = [s for s in old.get("sizes", []) if s not in sizes] + sizes
        meta = {**meta, "commands": list(old.get("commands") or [old["command"]]) + [meta["command"]]}
    order = {s: k for k, s in enumerate(sorted(sizes, key=lambda s: parse_size(s)))}
    sizes = sorted(set(sizes), key=order.get)
    payload = {**meta, "sizes": sizes, "cells": results, "versions": library_versions(), "machine": machine(),
               "date": time.strftime("%Y-%m-%d")}
    md = out / f"{name}.md"
    atomic_write(js, lambda fh: fh.write(json.dumps(payload, indent=2, default=str).encode()))
    atomic_write(md, lambda fh: fh.write(markdown(results, sizes, meta).encode()))
    return [js, md, plot(results, out / f"{name}.png")]


# --------------------------------------------------------------------------------------------- main
def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="S,M,L", help="comma-separated: S, M, L, XL or ITEMSxROWS")
    ap.add_argument("--components", default=",".join(COMPONENTS),
                    help="comma-separated subset of: " + ", ".join(COMPONENTS))
    ap.add_argument("--device", default="cpu", help="cpu (default), cuda or auto")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-seconds", type=float, default=2.0, help="time budget of each throughput cell")
    ap.add_argument("--max-logits-gb", type=float, default=2.0,
                    help="skip the full-softmax SASRec step where its logits alone exceed this")
    ap.add_argument("--cell-timeout", type=float, default=1800.0, help="seconds before a cell is given up")
    ap.add_argument("--in-process", action="store_true",
                    help="run the cells here (fast, for tests; peak RSS is then not per cell)")
    ap.add_argument("--out", type=Path, default=None, help="results folder (default benchmarks/results)")
    ap.add_argument("--name", default="scale", help="results file stem")
    ap.add_argument("--no-merge", action="store_true", help="do not keep cells of an earlier run not rerun")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--worker", nargs=2, metavar=("COMPONENT", "SIZE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    for comp in args.components.split(","):
        if comp not in COMPONENTS:
            ap.error(f"--components: unknown component {comp!r}; choose from {', '.join(COMPONENTS)}")
    for size in args.sizes.split(","):
        parse_size(size)
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse(argv)
    args.device = pick_device(args.device)
    if args.worker:
        print(json.dumps(cell(args.worker[0], args.worker[1], args), default=float))
        return {}
    sizes, components = args.sizes.split(","), args.components.split(",")
    results = []
    for size in sizes:
        for comp in components:
            start = time.perf_counter()
            row = run_cell(comp, size, args)
            results.append(row)
            print(f"{comp:20s} {size:>12s}: {format_cell(row)}  ({time.perf_counter() - start:.0f} s wall)",
                  flush=True)
    meta = {"command": "python -m benchmarks.scale " + " ".join(argv if argv is not None else sys.argv[1:]),
            "device": args.device, "device_name": device_name(args.device), "threads": 1,
            "seed": args.seed, "min_seconds": args.min_seconds, "in_process": args.in_process}
    paths = []
    if not args.no_write:
        from benchmarks.common import RESULTS

        paths = write(results, sizes, meta, args.out or RESULTS, args.name, merge=not args.no_merge)
        print("wrote " + ", ".join(str(p) for p in paths))
    return {"cells": results, "meta": meta, "paths": paths}


if __name__ == "__main__":
    main()
