"""Throughput and agreement of :class:`~recframe.metrics.FullRankingEvaluator` against ranx.

Run::

    python -m benchmarks.eval_vs_ranx                                # 20k users x 20k items
    python -m benchmarks.eval_vs_ranx --users 2000 --items 2000      # smoke size

Data: a random low-rank model with planted preferences. Item factors ``V ~ N(0, I/d)`` (``d = --dim``);
every user gets ``--seen`` seen items and ``T`` held-out items, all distinct and uniform over the catalogue;
the user factor is ``sum of the held-out items' factors + --seen-weight * sum of the seen items' factors +
N(0, I/d)``, so the held-out items rank high but not always first, and seen items would crowd the top-K if
they were not masked. Scores are ``U V^T`` in float32, computed chunk by chunk (``--chunk`` users), so the
``users x items`` matrix never exists at once. Each ``T`` in ``--targets`` is one scenario
(1 = leave-one-out).

Our side: :meth:`FullRankingEvaluator.update` on every score chunk (seen items masked through ``seen``),
then ``compute()``; the headline "eval" time is that, given the scores. The scoring matmul is timed apart.

ranx side: ranx needs a per-user ranked list (a run) and qrels. The run is the top-``depth`` list
(``depth = --run-depth``, default the largest cut-off) of the same masked scores, from
:func:`recframe.metrics.ranking.masked_topk`. Rows where a listed held-out item ties with another eligible
item (a neighbour in the top ``depth + 1``) are redone with the held-out items nudged just below their tied
neighbours, so that the run follows the evaluator's pessimistic tie rule; the count of such rows is reported.
Timed separately: the top-``depth`` extraction; the conversion of those arrays into ``Qrels``/``Run`` through
``from_dict`` and through ``from_df`` (the faster one is used); ``ranx.evaluate`` on the prebuilt objects
(after one untimed warm-up call, so numba's JIT compilation is excluded; ``save_results_in_run=False``);
and ``ranx.evaluate`` on plain ``[users, n, 2]`` numpy arrays of (item id, score), the lowest-overhead input
that ``evaluate`` documents. Every time is the best of ``--repeats``.

Threads: for each value of ``--threads`` (default 2) both sides run with that many threads: torch through
``torch.set_num_threads``, numba through ``NUMBA_NUM_THREADS`` (the largest value, set before ranx is
imported), ``numba.set_num_threads`` and ``evaluate(threads=...)``. Both use OpenMP; on a CPU shared with
other jobs, OpenMP's default busy-waiting at barriers stalls every parallel region (torch issues thousands per
run), so run there with ``OMP_WAIT_POLICY=PASSIVE`` (recorded in the results). Agreement:
``max |ours - ranx|`` per metric must be ``<= 1e-6``. Writes ``benchmarks/results/eval_vs_ranx.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import torch
from torch import Tensor

from benchmarks.common import write_results
from recframe.metrics import FullRankingEvaluator
from recframe.metrics.ranking import masked_topk

OURS_TO_RANX = {"ndcg": "ndcg", "recall": "recall", "hr": "hit_rate", "mrr": "mrr", "map": "map",
                "precision": "precision"}
TOLERANCE = 1e-6
TIMES = {
    "matmul_s": "scores = U[chunk] @ V^T for all chunks (float32)",
    "ours_eval_s": "FullRankingEvaluator.update on every score chunk (seen masked) + compute(), given scores",
    "ours_scores_plus_eval_s": "matmul_s + ours_eval_s",
    "ours_warmup_s": "first evaluator call on 64 users (compiles or loads the CPU kernel; not compared)",
    "topk_s": "masked top-depth extraction from the same scores (pessimistic tie repair included)",
    "ranx_convert_from_dict_s": "arrays -> Python dicts -> Qrels.from_dict + Run.from_dict",
    "ranx_convert_from_df_s": "arrays -> long DataFrames -> Qrels.from_df + Run.from_df",
    "ranx_convert_s": "the faster of the two conversions",
    "ranx_first_evaluate_s": "first ranx.evaluate on the objects (JIT compile or cache load; not compared)",
    "ranx_evaluate_objects_s": "ranx.evaluate on prebuilt Qrels/Run, after the warm-up call",
    "ranx_convert_plus_evaluate_s": "ranx_convert_s + ranx_evaluate_objects_s",
    "ranx_convert_arrays_s": "arrays -> [users, n, 2] float64 numpy arrays",
    "ranx_evaluate_arrays_s": "ranx.evaluate on those numpy arrays, after a warm-up call",
    "ranx_pipeline_s": "topk_s + ranx_convert_plus_evaluate_s",
    "ranx_arrays_pipeline_s": "topk_s + ranx_convert_arrays_s + ranx_evaluate_arrays_s",
}


# ------------------------------------------------------------------------------------------------- data
def planted_low_rank(n_users: int, n_items: int, dim: int, n_targets: int, n_seen: int,
                     seen_weight: float, seed: int) -> dict[str, Tensor]:
    """Factors, held-out and seen items of the planted low-rank model described in the module docstring.

    Returns ``users [n_users, dim]``, ``items [n_items + 1, dim]`` (row 0 = padding, zero), ``targets
    [n_users, n_targets]`` and ``seen [n_users, n_seen]`` (dense ids ``1..n_items``, distinct per user).
    """
    if n_targets + n_seen > n_items:
        raise ValueError(f"--items ({n_items}) must be >= targets + seen ({n_targets} + {n_seen})")
    g = torch.Generator().manual_seed(seed)
    items = torch.randn(n_items + 1, dim, generator=g) / dim**0.5
    items[0] = 0.0
    history = torch.empty(n_users, n_targets + n_seen, dtype=torch.long)
    for start in range(0, n_users, 1024):  # a uniform random subset per user, 1024 users at a time
        keys = torch.rand(min(1024, n_users - start), n_items, generator=g)
        history[start : start + 1024] = keys.topk(n_targets + n_seen, dim=1).indices + 1
    targets, seen = history[:, :n_targets], history[:, n_targets:]
    users = items[targets].sum(1) + seen_weight * items[seen].sum(1)
    users += torch.randn(n_users, dim, generator=g) / dim**0.5
    return {"users": users, "items": items, "targets": targets.contiguous(), "seen": seen.contiguous()}


def pessimistic_topk(scores: Tensor, targets: Tensor, seen: Tensor, depth: int) -> tuple[Tensor, Tensor, int]:
    """Top-``depth`` eligible items per row ordered as the evaluator ranks them, with float64 sort keys.

    :func:`masked_topk` orders ties arbitrarily. A row needs care only if a listed held-out item ties with
    a neighbour in the top-``(depth + 1)`` list (tied scores sit next to each other there, and an unlisted
    tied item would be the extra one). Those rows are redone in float64 with every held-out item's score
    moved halfway to the next smaller float32, which puts it after its tied non-held-out items and before
    every smaller score. Returns ``(items, keys, n_redone)``; ranx sorts the run by ``keys``.
    """
    items, ok = masked_topk(scores, targets, seen, depth + 1)
    if not bool(ok[:, :depth].all()):
        raise ValueError(f"--run-depth {depth} exceeds the eligible items of some user")
    values = scores.gather(1, items).masked_fill(~ok, float("-inf"))
    held_out = (items[:, :depth, None] == targets[:, None, :]).any(dim=2)
    tied = (values[:, :depth] == values[:, 1:]).clone()
    tied[:, 1:] |= values[:, 1:depth] == values[:, : depth - 1]
    redo = (held_out & tied).any(dim=1).nonzero().flatten()
    items, keys = items[:, :depth].contiguous(), values[:, :depth].to(torch.float64)
    if redo.numel():
        rows = scores[redo].to(torch.float64)
        row_targets = targets[redo]
        below = torch.nextafter(scores[redo].gather(1, row_targets), torch.tensor(float("-inf")))
        rows.scatter_(1, row_targets, (rows.gather(1, row_targets) + below.to(torch.float64)) / 2)
        rows_items, _ = masked_topk(rows, row_targets, seen[redo], depth)
        items[redo], keys[redo] = rows_items, rows.gather(1, rows_items)
    return items, keys, int(redo.numel())


# ------------------------------------------------------------------------------------------------ timing
def best_of(repeats: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """Best wall time of ``repeats`` calls of ``fn`` and the last result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def stream_scores(data: dict[str, Tensor], evaluator: FullRankingEvaluator, chunk: int, depth: int,
                  repeats: int) -> dict[str, Any]:
    """Score all users chunk by chunk; time matmul, evaluator update+compute, and top-``depth`` extraction.

    Each repetition replays the whole stream; per step the best total over repetitions is kept. Returns the
    times, our metrics and the run arrays (items, float64 keys) that ranx evaluates.
    """
    users, items, targets, seen = data["users"], data["items"], data["targets"], data["seen"]
    labels = torch.ones_like(targets, dtype=torch.int8)
    best = {"matmul_s": float("inf"), "ours_eval_s": float("inf"), "topk_s": float("inf"),
            "ours_scores_plus_eval_s": float("inf")}
    for _ in range(repeats):
        spent = dict.fromkeys(best, 0.0)
        evaluator.reset()
        run_items, run_keys, redone = [], [], 0
        for start in range(0, users.shape[0], chunk):
            stop = start + chunk
            t0 = time.perf_counter()
            scores = users[start:stop] @ items.T
            t1 = time.perf_counter()
            evaluator.update(scores, targets[start:stop], labels[start:stop], seen[start:stop])
            t2 = time.perf_counter()
            top_items, top_keys, n_redo = pessimistic_topk(scores, targets[start:stop], seen[start:stop],
                                                           depth)
            t3 = time.perf_counter()
            spent["matmul_s"] += t1 - t0
            spent["ours_eval_s"] += t2 - t1
            spent["topk_s"] += t3 - t2
            run_items.append(top_items)
            run_keys.append(top_keys)
            redone += n_redo
            del scores
        t0 = time.perf_counter()
        ours = evaluator.compute()
        spent["ours_eval_s"] += time.perf_counter() - t0
        spent["ours_scores_plus_eval_s"] = spent["matmul_s"] + spent["ours_eval_s"]
        best = {key: min(best[key], spent[key]) for key in best}
    return {"times": best, "ours": ours, "run_items": torch.cat(run_items), "run_keys": torch.cat(run_keys),
            "tie_rows_redone": redone}


# -------------------------------------------------------------------------------------------------- ranx
def ranx_dicts(targets: np.ndarray, run_items: np.ndarray, run_keys: np.ndarray) -> tuple[dict, dict]:
    """``{user: {item: 1}}`` qrels and ``{user: {item: score}}`` run with string ids, as ranx wants them."""
    qrels = {f"u{u}": dict.fromkeys((f"i{t}" for t in row), 1) for u, row in enumerate(targets.tolist())}
    run = {f"u{u}": {f"i{i}": s for i, s in zip(row, keys)}
           for u, (row, keys) in enumerate(zip(run_items.tolist(), run_keys.tolist()))}
    return qrels, run


def ranx_frames(targets: np.ndarray, run_items: np.ndarray, run_keys: np.ndarray) -> tuple[Any, Any]:
    """Long qrels and run DataFrames (object string ids, int64 / float64 scores) for ``from_df``."""
    import pandas as pd

    def long_frame(ids: np.ndarray, scores: np.ndarray) -> Any:
        q_ids = np.char.add("u", np.repeat(np.arange(ids.shape[0]), ids.shape[1]).astype(str))
        doc_ids = np.char.add("i", ids.reshape(-1).astype(str))
        # ranx asserts object dtype; pandas >= 3 would infer its own string dtype without the explicit Series.
        return pd.DataFrame({"q_id": pd.Series(q_ids, dtype=object),
                             "doc_id": pd.Series(doc_ids, dtype=object), "score": scores.reshape(-1)})

    return long_frame(targets, np.ones(targets.shape, dtype=np.int64)), long_frame(run_items, run_keys)


def ranx_arrays(targets: np.ndarray, run_items: np.ndarray, run_keys: np.ndarray) -> tuple[Any, Any]:
    """``[users, n, 2]`` float64 arrays of (item id, relevance / score); the run is already sorted."""
    qrels = np.stack([targets.astype(np.float64), np.ones(targets.shape)], axis=2)
    run = np.stack([run_items.astype(np.float64), run_keys], axis=2)
    return qrels, run


def time_ranx(ranx: Any, targets: Tensor, run_items: Tensor, run_keys: Tensor, names: list[str],
              threads: int, repeats: int) -> dict[str, Any]:
    """Time ranx's conversions and ``evaluate`` routes (each after an untimed warm-up call)."""
    tgt, items, keys = targets.numpy(), run_items.numpy(), run_keys.numpy()
    evaluate = ranx.evaluate

    def from_dict(t: np.ndarray, i: np.ndarray, k: np.ndarray) -> tuple[Any, Any]:
        qrels, run = ranx_dicts(t, i, k)
        return ranx.Qrels.from_dict(qrels), ranx.Run.from_dict(run)

    def from_df(t: np.ndarray, i: np.ndarray, k: np.ndarray) -> tuple[Any, Any]:
        qrels, run = ranx_frames(t, i, k)
        return ranx.Qrels.from_df(qrels), ranx.Run.from_df(run)

    out: dict[str, Any] = {}
    objects: dict[str, tuple[Any, Any]] = {}
    for route, build in (("from_dict", from_dict), ("from_df", from_df)):
        build(tgt[:20], items[:20], keys[:20])  # warm-up: JIT-compile the conversion on 20 users
        out[f"ranx_convert_{route}_s"], objects[route] = best_of(repeats, partial(build, tgt, items, keys))
    route = min(objects, key=lambda r: out[f"ranx_convert_{r}_s"])
    out["ranx_convert_route"] = route
    out["ranx_convert_s"] = out[f"ranx_convert_{route}_s"]
    qrels, run = objects[route]

    def run_objects() -> dict[str, float]:
        return evaluate(qrels, run, names, threads=threads, save_results_in_run=False)

    t0 = time.perf_counter()
    run_objects()
    out["ranx_first_evaluate_s"] = time.perf_counter() - t0  # includes JIT compile / cache load
    out["ranx_evaluate_objects_s"], theirs = best_of(repeats, run_objects)
    out["ranx_convert_plus_evaluate_s"] = out["ranx_convert_s"] + out["ranx_evaluate_objects_s"]

    arrays = ranx_arrays(tgt, items, keys)
    evaluate(*arrays, names, threads=threads)  # warm-up for the ndarray specialisation
    out["ranx_convert_arrays_s"], arrays = best_of(repeats, lambda: ranx_arrays(tgt, items, keys))
    out["ranx_evaluate_arrays_s"], theirs_arrays = best_of(
        repeats, lambda: evaluate(*arrays, names, threads=threads))
    out["values_objects"] = {k: float(v) for k, v in theirs.items()}
    other = evaluate(*objects["from_df" if route == "from_dict" else "from_dict"], names, threads=threads,
                     save_results_in_run=False)
    out["values_objects_other_route"] = {k: float(v) for k, v in other.items()}
    out["values_arrays"] = {k: float(v) for k, v in theirs_arrays.items()}
    return out


def agreement(ours: dict[str, float], theirs: dict[str, float], ks: Sequence[int]) -> dict[str, float]:
    """``max |ours - ranx|`` per metric over the cut-offs."""
    return {m: max(abs(ours[f"{m}@{k}"] - theirs[f"{r}@{k}"]) for k in ks) for m, r in OURS_TO_RANX.items()}


# -------------------------------------------------------------------------------------------------- main
def warm_up(data: dict[str, Tensor], evaluator: FullRankingEvaluator) -> float:
    """Seconds of one untimed-in-the-results evaluator call on 64 users: the first call in a process
    compiles (or loads from numba's disk cache) the CPU counting kernel, as ranx's first call compiles its
    own; both are excluded from the throughput times and reported."""
    users, items, targets, seen = data["users"][:64], data["items"], data["targets"][:64], data["seen"][:64]
    t0 = time.perf_counter()
    evaluator.update(users @ items.T, targets, torch.ones_like(targets, dtype=torch.int8), seen)
    seconds = time.perf_counter() - t0
    evaluator.reset()
    return seconds


def run_scenario(ranx: Any, ns: argparse.Namespace, data: dict[str, Tensor], threads: int) -> dict[str, Any]:
    """One scenario (one data set, one thread count): both sides, times, ratios, agreement."""
    import numba

    torch.set_num_threads(threads)
    numba.set_num_threads(threads)
    evaluator = FullRankingEvaluator(ns.items, ks=ns.ks, metrics=list(OURS_TO_RANX))
    depth = ns.run_depth or max(ns.ks)
    warmup_s = warm_up(data, evaluator)
    stream = stream_scores(data, evaluator, ns.chunk, depth, ns.repeats)
    names = [f"{r}@{k}" for r in OURS_TO_RANX.values() for k in ns.ks]
    ranx_out = time_ranx(ranx, data["targets"], stream["run_items"], stream["run_keys"], names, threads,
                         ns.repeats)
    times = {**stream["times"], "ours_warmup_s": warmup_s,
             **{k: v for k, v in ranx_out.items() if k.endswith("_s")},
             "ranx_convert_route": ranx_out["ranx_convert_route"]}
    ours_eval = times["ours_eval_s"]
    times["ranx_pipeline_s"] = times["topk_s"] + times["ranx_convert_plus_evaluate_s"]
    times["ranx_arrays_pipeline_s"] = (times["topk_s"] + times["ranx_convert_arrays_s"]
                                       + times["ranx_evaluate_arrays_s"])
    ratios = {
        "ranx_evaluate_objects / ours_eval": times["ranx_evaluate_objects_s"] / ours_eval,
        "ranx_convert_plus_evaluate / ours_eval": times["ranx_convert_plus_evaluate_s"] / ours_eval,
        "ranx_evaluate_arrays / ours_eval": times["ranx_evaluate_arrays_s"] / ours_eval,
        "(topk + ranx_convert_plus_evaluate) / ours_eval": times["ranx_pipeline_s"] / ours_eval,
        "(topk + ranx arrays) / ours_eval": times["ranx_arrays_pipeline_s"] / ours_eval,
    }
    diff_objects = agreement(stream["ours"], ranx_out["values_objects"], ns.ks)
    diff_arrays = agreement(stream["ours"], ranx_out["values_arrays"], ns.ks)
    diff_other = agreement(stream["ours"], ranx_out["values_objects_other_route"], ns.ks)
    worst = max([*diff_objects.values(), *diff_arrays.values(), *diff_other.values()])
    return {"targets_per_user": data["targets"].shape[1], "threads": threads,
            "torch_threads": torch.get_num_threads(), "numba_threads": numba.get_num_threads(),
            "run_depth": depth, "times_s": times, "ratios": ratios,
            "ours": stream["ours"], "ranx": ranx_out["values_objects"],
            "max_abs_diff_objects": diff_objects, "max_abs_diff_arrays": diff_arrays,
            "max_abs_diff_objects_other_route": diff_other,
            "max_abs_diff": worst, "agree_within_1e-6": worst <= TOLERANCE,
            "tie_rows_redone": stream["tie_rows_redone"]}


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---:|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def render(results: list[dict[str, Any]], config: dict[str, Any], command: str) -> str:
    """Markdown: one table of times and ratios, one of metric values and agreement."""
    head = (f"## Evaluator vs ranx: {config['users']} users x {config['items']} items, "
            f"best of {config['repeats']}\n\nCommand: `{command}`\n\n"
            "Times in seconds for all users. *ours eval* = `FullRankingEvaluator.update` over score chunks "
            "+ `compute` (given scores; seen items masked). *ranx eval (objects)* = `ranx.evaluate` on "
            "prebuilt `Qrels`/`Run` after a warm-up call (JIT excluded). *convert* = arrays -> `Qrels`/`Run` "
            "via the faster of `from_dict`/`from_df`. *top-k* = masked top-depth extraction that builds "
            "ranx's run. *ranx eval (arrays)* = `ranx.evaluate` on `[users, n, 2]` numpy arrays. First "
            "calls are excluded on both sides: ranx's JIT compilation, and ours, which compiles the CPU "
            "counting kernel or loads it from numba's disk cache (*ours first call*, 64 users).\n\n")
    time_cols = ["T", "threads", "ours first call", "matmul", "ours eval", "ours scores+eval", "top-k",
                 "convert", "ranx eval (objects)", "ranx eval (arrays)", "objects / ours",
                 "(convert+eval) / ours", "(top-k+convert+eval) / ours", "arrays / ours"]
    time_rows = []
    for r in results:
        t, q = r["times_s"], r["ratios"]
        time_rows.append([
            str(r["targets_per_user"]), str(r["threads"]), f"{t.get('ours_warmup_s', float('nan')):.3f}",
            *(f"{t[key]:.3f}" for key in ("matmul_s", "ours_eval_s", "ours_scores_plus_eval_s", "topk_s")),
            f"{t['ranx_convert_s']:.3f} ({t['ranx_convert_route']})",
            f"{t['ranx_evaluate_objects_s']:.3f}", f"{t['ranx_evaluate_arrays_s']:.3f}",
            *(f"{q[key]:.2f}x" for key in ("ranx_evaluate_objects / ours_eval",
                                          "ranx_convert_plus_evaluate / ours_eval",
                                          "(topk + ranx_convert_plus_evaluate) / ours_eval",
                                          "ranx_evaluate_arrays / ours_eval")),
        ])
    metric_keys = [f"{m}@{k}" for m in OURS_TO_RANX for k in config["ks"]]
    agree_cols = ["T", "threads", *metric_keys, "max abs diff", "<= 1e-6", "tie rows redone"]
    agree_rows = [[str(r["targets_per_user"]), str(r["threads"]),
                   *(f"{r['ours'][key]:.4f}" for key in metric_keys), f"{r['max_abs_diff']:.1e}",
                   "yes" if r["agree_within_1e-6"] else "NO", str(r["tie_rows_redone"])] for r in results]
    note = ("\n\nMetric values are ours; *max abs diff* is the largest `|ours - ranx|` over all metrics, "
            "cut-offs and the three ranx inputs (from_dict and from_df objects, arrays). ranx's run holds "
            f"the top {results[0]['run_depth']} items per user. Load average (1/5/15 min) before/after: "
            f"{config['load_before']} / {config['load_after']} on {os.cpu_count()} CPUs; "
            f"OMP_WAIT_POLICY={config['omp_wait_policy']}; "
            f"wall time {config['wall_s']} s.\n")
    return head + _table(time_cols, time_rows) + "\n\n" + _table(agree_cols, agree_rows) + note


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line flags (sizes, threads, repeats)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=20_000)
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=32, help="rank of the random low-rank model")
    parser.add_argument("--targets", type=int, nargs="+", default=[1, 5], help="held-out items per user")
    parser.add_argument("--seen", type=int, default=20, help="seen (masked) items per user")
    parser.add_argument("--seen-weight", type=float, default=0.3)
    parser.add_argument("--ks", type=int, nargs="+", default=[10, 20])
    parser.add_argument("--run-depth", type=int, default=0, help="length of ranx's run; 0 = max(ks)")
    parser.add_argument("--chunk", type=int, default=1024, help="users per score chunk")
    parser.add_argument("--threads", type=int, nargs="+", default=[2], help="thread counts to run (each)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print the table without writing results")
    ns = parser.parse_args(argv)
    for flag in ("users", "items", "dim", "chunk", "repeats"):
        if getattr(ns, flag) < 1:
            raise SystemExit(f"--{flag} must be >= 1, got {getattr(ns, flag)}")
    if min(ns.targets) < 1 or min(ns.threads) < 1 or ns.seen < 0 or min(ns.ks) < 1:
        raise SystemExit("--targets, --threads and --ks must be >= 1 and --seen >= 0")
    if ns.run_depth and ns.run_depth < max(ns.ks):
        raise SystemExit(f"--run-depth must be >= max(--ks) = {max(ns.ks)} (or 0)")
    return ns


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    os.environ["NUMBA_NUM_THREADS"] = str(max(ns.threads))  # read once, when numba is first imported
    import numba
    import ranx

    warnings.filterwarnings("ignore", module="ranx")
    wall = time.perf_counter()
    load_before = [round(x, 2) for x in os.getloadavg()]
    results = []
    for n_targets in ns.targets:
        data = planted_low_rank(ns.users, ns.items, ns.dim, n_targets, ns.seen, ns.seen_weight, ns.seed)
        results += [run_scenario(ranx, ns, data, threads) for threads in ns.threads]
    config = {**{k: v for k, v in vars(ns).items() if k != "no_write"},
              "numba_num_threads_env": os.environ["NUMBA_NUM_THREADS"],
              "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(unset)"),
              "numba_threading_layer": _threading_layer(numba),
              "ranx_version": getattr(ranx, "__version__", None) or _version("ranx"),
              "numba_version": numba.__version__, "wall_s": round(time.perf_counter() - wall, 1),
              "load_before": load_before, "load_after": [round(x, 2) for x in os.getloadavg()]}
    command = "python -m benchmarks.eval_vs_ranx " + " ".join(sys.argv[1:] if argv is None else argv)
    md = render(results, config, command.strip())
    print(md)
    print(f"wall time {config['wall_s']} s")
    if not ns.no_write:
        js, out = write_results("eval_vs_ranx", {"config": config, "command": command.strip(),
                                                 "time_definitions": TIMES, "scenarios": results}, md)
        print(f"wrote {js} and {out}")
    return 0 if all(r["agree_within_1e-6"] for r in results) else 1


def _threading_layer(numba: Any) -> str | None:
    try:
        return numba.threading_layer()
    except ValueError:  # no parallel numba function has run yet
        return None


def _version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    raise SystemExit(main())
