"""SASRec on ML-100K: recframe against RecBole 1.2.1 with the same hyperparameters, epoch by epoch.

Run (after ``recframe data prepare ml-100k``)::

    python -m benchmarks.train_vs_recbole                      # 30-minute training budget per side
    python -m benchmarks.train_vs_recbole --budget-minutes 6   # smoke run
    python -m benchmarks.train_vs_recbole --render-only        # re-render md + plot from the JSON

Both sides train ``configs/sasrec_ml100k.yaml``'s SASRec (RecBole's keys are translated from
that YAML by :func:`recbole_config`) on the same atomic files, with ``torch.set_num_threads``
equal on both sides (``--threads``, default 2) and on the CPU. After every epoch each side
records its cumulative *training* time (evaluation excluded) and its validation and test
metrics, each with its own evaluator, both with seen items masked (recframe's protocol) and
without (RecBole's protocol for sequential models; RecBole's evaluator gets the mask through a
wrapper in the peer script). From the two curves the report derives seconds per epoch, metrics
after equal epochs, at equal training time, and at the end of the budget.

Definitions used throughout:

* **Epoch** — one pass over every training target, the same 97,171 (user, next item) targets on
  both sides. recframe cuts each user's training sequence into windows of at most
  ``max_len + 1`` items, ``data.window_stride`` apart, and predicts every target once (one forward
  per window; overlapping windows count only the targets the next window does not);
  RecBole's data augmentation makes one sample per prefix (one forward per target).
* **Budget** — RecBole runs first and trains until its cumulative training time would pass
  ``--budget-minutes`` (an epoch starts only if the previous epoch's duration still fits; its
  first epoch always runs). recframe then gets the larger of the budget and RecBole's training
  time, so that "recframe at RecBole's training time" is always defined; end-of-budget numbers
  count only the epochs finished within the budget. Both sides also stop at the config's
  ``max_epochs`` or when validation NDCG@10 (masked) has not improved for ``patience_epochs``
  epochs, from the config's ``EarlyStopping`` (patience 4 validations every 5 epochs = 20).
* **Selected model** — the epoch with the best validation NDCG@10 among the epochs counted (the
  model a user would keep); "last" is the latest such epoch.

Writes ``benchmarks/results/train_vs_recbole.{json,md}`` and ``docs/img/train_vs_recbole.png``.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import math
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.common import RESULTS, save_figure, write_results
from benchmarks.peer_env import peer_python, run_peer
from benchmarks.per_user import BOOTSTRAP_SAMPLES, pack_ranks, paired_difference, per_user_ndcg, test_ranks

NAME = "train_vs_recbole"
ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "sasrec_ml100k.yaml"
PEER_SCRIPT = Path(__file__).resolve().parent / "peers" / "recbole_sasrec.py"
PLOT = ROOT / "docs" / "img" / f"{NAME}.png"
# torch 2.13's wheel requires setuptools>=77, so the "setuptools<70" often quoted for RecBole cannot
# hold; it is only needed by ray (recbole.quick_start), which the peer script does not import.
# pandas<3: RecBole 1.2.1's in-place fillna on column views is a silent no-op under pandas 3.
PEER_REQUIREMENTS = ["recbole==1.2.1", "numpy<2", "pandas<3", "torch==2.13.0"]
PEER_PRE = ["torch==2.13.0"]
KEY = "ndcg@10"

# What differs between the two SASRec implementations once every shared hyperparameter is equal.
DIFFERENCES = [
    "Block layout: recframe is pre-norm (x + Attn(LN(x)), x + FFN(LN(x)), final LayerNorm); RecBole is "
    "post-norm (BERT style, LN(x + Attn(x)), LN(x + FFN(x))) with a LayerNorm on the input embeddings.",
    "LayerNorm eps: recframe 1e-5 (torch default, not configurable); RecBole 1e-12.",
    "Context per target: RecBole gives every target its last <= 50 items (one sample per prefix); "
    "recframe's windows of <= 51 items overlap by max_len - window_stride items, so a target sees at least "
    "max_len - window_stride + 1 items (or all it has); with window_stride = max_len (no overlap) a target "
    "at offset j of a window sees only the j items before it.",
    "Optimiser steps per epoch: recframe batches 128 windows (about 5,000 targets) per step; RecBole "
    "batches 128 targets per step. Both use Adam, lr 1e-3, no weight decay.",
    "Positions: recframe aligns learned positions to the end of the sequence (left padding, the latest "
    "item always has the last position); RecBole aligns them to the start (right padding).",
    "Cross-entropy classes: recframe excludes the padding item (logit -inf); RecBole keeps the padding "
    "row of the item table as a class, and its init overwrites that row with N(0, 0.02) noise.",
    "Feed-forward dropout: recframe has a dropout after the GELU as well as on the branch output; "
    "RecBole only on the branch output. Q/K/V: one fused linear (recframe) vs three (RecBole), the "
    "same parametrisation.",
    "Attention mask: recframe masks padding keys with -inf (boolean mask, the diagonal kept); RecBole "
    "adds -10000 to padding keys and future positions.",
    "Determinism: recframe runs Lightning's deterministic='warn' (as `recframe fit`); RecBole "
    "reproducibility=True (cuDNN flags only, no effect on CPU).",
    "Ranking ties: recframe counts ties pessimistically; RecBole uses torch.topk's order (float scores "
    "make ties rare).",
]


# ------------------------------------------------------------------ configs
def load_config(path: Path = CONFIG) -> dict[str, Any]:
    """The experiment YAML with the model's and the datamodule's defaults filled in."""
    from recframe.data.datamodule import RecDataModule
    from recframe.models import SASRec

    cfg = yaml.safe_load(path.read_text())
    model_cls = cfg["model"]["class_path"].rsplit(".", 1)[-1]
    if model_cls != "SASRec":
        raise ValueError(f"{path}: model.class_path is {cfg['model']['class_path']}; this benchmark "
                         "compares SASRec only.")
    model = {**_defaults(SASRec), **cfg["model"].get("init_args", {})}
    data = {**_defaults(RecDataModule), **cfg.get("data", {})}
    trainer = cfg.get("trainer", {})
    model["max_len"] = data["max_len"]  # linked from data.max_len, as `recframe fit` links it
    return {"model": model, "data": data, "trainer": trainer, "seed": cfg.get("seed_everything", 0)}


def _defaults(cls: type) -> dict[str, Any]:
    sig = inspect.signature(cls.__init__)
    return {k: p.default for k, p in sig.parameters.items() if p.default is not inspect.Parameter.empty}


def patience_epochs(trainer: dict[str, Any], max_epochs: int) -> int:
    """Epochs without a better validation score before stopping: EarlyStopping patience x val interval."""
    every = int(trainer.get("check_val_every_n_epoch", 1))
    for cb in trainer.get("callbacks") or []:
        if str(cb.get("class_path", "")).endswith("EarlyStopping"):
            return int(cb.get("init_args", {}).get("patience", 3)) * every
    return max_epochs


def recbole_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """RecBole config keys equal to recframe's SASRec settings (model, data, split, metrics)."""
    model, data = cfg["model"], cfg["data"]
    if model["loss_type"] != "ce":
        raise ValueError(f"model.init_args.loss_type={model['loss_type']!r}: the RecBole comparison "
                         "needs 'ce' (full-catalogue cross-entropy, RecBole's CE).")
    if data["split"] != "loo":
        raise ValueError(f"data.split={data['split']!r}: the RecBole comparison needs 'loo' "
                         "(RecBole's LS valid_and_test).")
    if model["optimizer"] != "adam":
        raise ValueError(f"model.init_args.optimizer={model['optimizer']!r}: use 'adam' (RecBole's "
                         "learner 'adam' adds weight_decay as L2, as torch.optim.Adam does).")
    ks = sorted(set(data.get("eval_ks") or [10, 20]))
    if 10 not in ks:
        raise ValueError(f"data.eval_ks={ks}: the report needs K=10; add 10 to data.eval_ks.")
    return {
        "load_col": {"inter": ["user_id", "item_id", "rating", "timestamp"]},
        "user_inter_num_interval": f"[{data['user_k']},inf)",
        "item_inter_num_interval": f"[{data['item_k']},inf)",
        "eval_args": {"split": {"LS": "valid_and_test"}, "order": "TO", "mode": "full", "group_by": "user"},
        "MAX_ITEM_LIST_LENGTH": model["max_len"],
        "hidden_size": model["hidden"],
        "inner_size": model["inner"],
        "n_layers": model["n_layers"],
        "n_heads": model["n_heads"],
        "hidden_dropout_prob": model["dropout"],
        "attn_dropout_prob": model["attn_dropout"],
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-12,
        "initializer_range": 0.02,
        "loss_type": "CE",
        "train_neg_sample_args": None,
        "learner": "adam",
        "learning_rate": model["lr"],
        "weight_decay": model["weight_decay"],
        "train_batch_size": data["batch_size"],
        "eval_batch_size": 4096,
        "metrics": ["Recall", "NDCG", "Hit"],
        "topk": ks,
        "valid_metric": "NDCG@10",
    }


# ------------------------------------------------------------------ recframe side
def _eval_recframe(model: Any, dm: Any, stage: str, masked: bool) -> dict[str, float]:
    from recframe.metrics import FullRankingEvaluator

    ev = FullRankingEvaluator(n_items=dm.n_items, ks=dm.eval_ks, metrics=("recall", "hr", "ndcg"),
                              relevance=dm.protocol["relevance"])
    loader = dm.val_dataloader() if stage == "valid" else dm.test_dataloader()
    for batch in loader:
        ev.update(model.score(batch), batch["targets"], batch["labels"], batch["seen"] if masked else None,
                  model_name="SASRec")
    return ev.compute()


def _epoch_probe(dm: Any, limit_s: float, patience: int) -> Any:
    """A Lightning callback timing each training epoch and evaluating after it (outside the clock)."""
    import lightning as L
    import torch

    class EpochProbe(L.Callback):
        def __init__(self) -> None:
            self.epochs: list[dict[str, Any]] = []
            self.cum = 0.0
            self.best, self.since_best = -math.inf, 0
            self.stopped = "max_epochs"
            self._t0 = 0.0

        def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
            self._t0 = time.perf_counter()

        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            seconds = time.perf_counter() - self._t0
            self.cum += seconds
            ev_start = time.perf_counter()
            row: dict[str, Any] = {"epoch": trainer.current_epoch + 1, "train_seconds": seconds,
                                   "cum_train_seconds": self.cum}
            loss = trainer.callback_metrics.get("train/loss_epoch")
            row["loss"] = float(loss) if loss is not None else None
            was_training = pl_module.training
            pl_module.eval()
            with torch.no_grad():
                for stage in ("valid", "test"):
                    row[stage] = {"masked": _eval_recframe(pl_module, dm, stage, True),
                                  "unmasked": _eval_recframe(pl_module, dm, stage, False)}
                row["test_rank_per_user"] = test_ranks(pl_module, dm)
            pl_module.train(was_training)
            row["eval_seconds"] = time.perf_counter() - ev_start
            self.epochs.append(row)
            score = row["valid"]["masked"][KEY]
            print(f"[recframe] epoch {row['epoch']}: train {seconds:.2f}s (total {self.cum:.1f}s), "
                  f"valid {KEY} {score:.4f}, test {KEY} {row['test']['masked'][KEY]:.4f}",
                  file=sys.stderr, flush=True)
            if score > self.best:
                self.best, self.since_best = score, 0
            else:
                self.since_best += 1
            if self.since_best >= patience:
                self.stopped = f"early stopping ({patience} epochs without a better validation NDCG@10)"
                trainer.should_stop = True
            elif self.cum + seconds > limit_s:
                self.stopped = f"time limit of {limit_s:.0f} s (the next epoch would overrun it)"
                trainer.should_stop = True

    return EpochProbe()


def run_recframe(config: Path, limit_s: float, max_epochs: int, patience: int, threads: int
                 ) -> dict[str, Any]:
    """Train recframe's SASRec from ``config`` for up to ``limit_s`` seconds of training, evaluating
    after every epoch."""
    import lightning as L
    import torch

    from recframe.cli import run_cli

    torch.set_num_threads(threads)
    start = time.perf_counter()
    cli = run_cli(["--config", str(config)], run=False)  # model + data exactly as `recframe fit` builds them
    model, dm = cli.model, cli.datamodule
    dm.setup("fit")
    setup_s = time.perf_counter() - start
    probe = _epoch_probe(dm, limit_s, patience)
    # the CLI's own trainer would also write checkpoints and logs every epoch; this one only trains
    trainer = L.Trainer(max_epochs=max_epochs, callbacks=[probe], logger=False, enable_checkpointing=False,
                        limit_val_batches=0, num_sanity_val_steps=0, enable_progress_bar=False,
                        enable_model_summary=False, accelerator="cpu", devices=1, deterministic="warn")
    trainer.fit(model, dm)
    return {"library": "recframe", "threads": torch.get_num_threads(), "setup_seconds": setup_s,
            "data": recframe_data_summary(dm), "epochs": probe.epochs, "stopped": probe.stopped,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "data_fingerprint": dm.fingerprint}


def _digest(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:16]


def recframe_data_summary(dm: Any) -> dict[str, Any]:
    """The same counts and raw-id digests the peer script reports for RecBole's split."""
    import numpy as np

    from recframe.data.batches import SequenceWindows

    sp = dm.split
    train = sp.train
    hist = train.histories
    windows = SequenceWindows.build(hist, dm.max_len, dm.window_stride)
    users, items = train.user_ids, train.item_ids
    pos = np.arange(len(train)) - hist.indptr[train.user]
    tgt = pos > 0  # every training item but a user's first is a target
    out: dict[str, Any] = {
        "n_users": dm.n_users, "n_items": dm.n_items,
        "n_train_targets": windows.n_targets(), "window_stride": dm.window_stride or dm.max_len,
        "n_train_targets_from_histories": int(tgt.sum()),
        "n_windows": len(windows), "train_batches_per_epoch": math.ceil(len(windows) / dm.batch_size),
        "train_targets_digest": _digest([f"{users[u]}\t{items[i]}"
                                         for u, i in zip(train.user[tgt], train.item[tgt])]),
    }
    for stage, part, known in (("valid", sp.valid, train), ("test", sp.test, train.concat(sp.valid))):
        pairs = sorted([str(users[u]), str(items[i])] for u, i in zip(part.user, part.item))
        out[f"{stage}_targets"] = pairs
        out[f"{stage}_targets_digest"] = _digest(["\t".join(p) for p in pairs])
        kh = known.histories
        inputs = {}
        for u in np.unique(part.user):
            seq = kh.items[max(kh.indptr[u], kh.indptr[u + 1] - dm.max_len):kh.indptr[u + 1]]
            text = " ".join(str(items[i]) for i in seq)
            inputs[str(users[u])] = hashlib.sha256(text.encode()).hexdigest()[:12]
        out[f"{stage}_input_digests"] = inputs
    return out


# ------------------------------------------------------------------ RecBole side
def run_recbole(cfg: dict[str, Any], data_root: Path, budget_s: float, max_epochs: int, patience: int,
                threads: int, seed: int) -> dict[str, Any]:
    """Build the peer venv (once) and run the RecBole side in it."""
    python = peer_python("recbole", PEER_REQUIREMENTS, pre=PEER_PRE)
    with tempfile.TemporaryDirectory(prefix="recbole_") as tmp:
        spec = {"data_root": str(data_root), "dataset": cfg["data"]["dataset"],
                "recbole_config": recbole_config(cfg), "budget_seconds": budget_s,
                "max_epochs": max_epochs, "patience_epochs": patience, "threads": threads, "seed": seed,
                "workdir": str(Path(tmp) / "work")}
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(spec))
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        # a guard against a hung peer only: the budget itself is enforced inside the peer script, whose
        # first epoch always runs (about 3 min on a quiet 2-core machine, 45 min on a loaded one)
        return run_peer(python, PEER_SCRIPT, [str(spec_path)], timeout=4 * budget_s + 7200, env=env)


# ------------------------------------------------------------------ checks and summary
def compare_data(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """Same users, items, training targets, held-out targets and model inputs on both sides?"""
    check: dict[str, Any] = {}
    for key in ("n_users", "n_items", "n_train_targets"):
        check[key] = {"recframe": ours[key], "recbole": theirs[key], "equal": ours[key] == theirs[key]}
    for stage in ("train", "valid", "test"):
        check[f"{stage}_targets_equal"] = ours[f"{stage}_targets_digest"] == theirs[f"{stage}_targets_digest"]
    for stage in ("valid", "test"):
        a, b = ours[f"{stage}_input_digests"], theirs[f"{stage}_input_digests"]
        differ = sorted(u for u in set(a) | set(b) if a.get(u) != b.get(u))
        check[f"{stage}_inputs_differ"] = {"users": len(differ), "examples": differ[:10]}
    check["all_equal"] = (all(v["equal"] for k, v in check.items() if k.startswith("n_"))
                          and all(check[f"{s}_targets_equal"] for s in ("train", "valid", "test"))
                          and all(check[f"{s}_inputs_differ"]["users"] == 0 for s in ("valid", "test")))
    return check


def _public(data: dict[str, Any]) -> dict[str, Any]:
    """A data summary without the per-user lists (kept out of the results JSON)."""
    drop = {f"{stage}_{what}" for stage in ("valid", "test") for what in ("targets", "input_digests")}
    return {k: v for k, v in data.items() if k not in drop}


def select(curve: list[dict[str, Any]], seconds: float | None = None, epoch: int | None = None
           ) -> dict[str, Any] | None:
    """Among the epochs done by ``seconds`` of training and/or by ``epoch``: the last one and the one
    with the best validation NDCG@10 (masked; the earliest on ties). ``None`` if there is none."""
    rows = [r for r in curve
            if (seconds is None or r["cum_train_seconds"] <= seconds * (1 + 1e-9))
            and (epoch is None or r["epoch"] <= epoch)]
    if not rows:
        return None
    best = max(rows, key=lambda r: (r["valid"]["masked"][KEY], -r["epoch"]))
    return {"last": rows[-1], "best": best}


def _point(row: dict[str, Any]) -> dict[str, Any]:
    """The numbers of one epoch that the summary reports."""
    return {"epoch": row["epoch"], "cum_train_seconds": row["cum_train_seconds"],
            "valid_ndcg@10": row["valid"]["masked"][KEY],
            "test": {p: {m: row["test"][p][m] for m in ("ndcg@10", "recall@10")}
                     for p in ("masked", "unmasked")}}


def summarize(payload: dict[str, Any]) -> dict[str, Any]:
    """Seconds per epoch, equal-epoch, equal-time and end-of-budget comparisons, and the targets."""
    ours, theirs = payload["recframe"]["epochs"], payload["recbole"]["epochs"]
    if not ours or not theirs:
        raise ValueError("both sides need at least one epoch; raise --budget-minutes or --epochs.")
    speed = {}
    for side, curve in (("recframe", ours), ("recbole", theirs)):
        secs = [r["train_seconds"] for r in curve]
        speed[side] = {"median": statistics.median(secs), "mean": statistics.fmean(secs),
                       "min": min(secs), "max": max(secs), "epochs": len(secs),
                       "train_seconds": curve[-1]["cum_train_seconds"]}
    speedup = speed["recbole"]["median"] / speed["recframe"]["median"]
    equal_epochs = []
    for row in theirs:
        mine = select(ours, epoch=row["epoch"])
        same = mine is not None and mine["last"]["epoch"] == row["epoch"]
        equal_epochs.append({"epoch": row["epoch"], "recbole": _point(row),
                             "recframe": _point(mine["last"]) if same else None})
    equal_time = []
    for row in theirs:
        t = row["cum_train_seconds"]
        mine, rb = select(ours, seconds=t), select(theirs, seconds=t)
        equal_time.append({"seconds": t, "recbole_epoch": row["epoch"],
                           "recbole": {"last": _point(rb["last"]), "best": _point(rb["best"])},
                           "recframe": None if mine is None else
                           {"last": _point(mine["last"]), "best": _point(mine["best"])},
                           "difference": None if mine is None else
                           paired_difference(mine["best"], rb["best"])})
    budget = payload["budget_seconds"]
    end = {}
    for side, curve in (("recframe", ours), ("recbole", theirs)):
        sel = select(curve, seconds=budget)
        end[side] = None if sel is None else {"last": _point(sel["last"]), "best": _point(sel["best"])}
    at_t = equal_time[-1]
    mine_t = at_t["recframe"]
    ours_ndcg = mine_t["best"]["test"]["masked"][KEY] if mine_t else float("nan")
    theirs_ndcg = at_t["recbole"]["best"]["test"]["masked"][KEY]
    rows = [r for r in equal_time if r["recframe"] is not None]
    behind = [r["seconds"] for r in rows
              if r["recframe"]["best"]["test"]["masked"][KEY] < r["recbole"]["best"]["test"]["masked"][KEY]]
    diffs = [r["difference"] for r in rows if r["difference"] is not None]
    significantly_behind = [r["seconds"] for r in rows
                            if r["difference"] is not None and r["difference"]["ci95"][1] < 0]
    targets = {
        "speedup": {"value": speedup, "target": 10.0, "met": speedup >= 10.0},
        "ndcg_at_equal_time": {"seconds": at_t["seconds"], "recframe": ours_ndcg, "recbole": theirs_ndcg,
                               "met": ours_ndcg >= theirs_ndcg},
        "ndcg_at_every_equal_time": {"points": len(rows), "behind_at_seconds": behind, "met": not behind},
        "not_significantly_worse_at_every_equal_time": {
            "points_with_per_user_ranks": len(diffs), "significantly_behind_at_seconds": significantly_behind,
            "met": bool(diffs) and len(diffs) == len(rows) and not significantly_behind},
    }
    consistency = {}
    for side, curve in (("recframe", ours), ("recbole", theirs)):
        gaps = [abs(float(v.mean()) - r["test"]["masked"][KEY]) for r in curve
                if (v := per_user_ndcg(r)) is not None]
        consistency[side] = max(gaps) if gaps else None
    return {"seconds_per_epoch": speed, "speedup": speedup, "equal_epochs": equal_epochs,
            "equal_time": equal_time, "end_of_budget": end, "targets": targets,
            "per_user_vs_reported_max_gap": consistency}


# ------------------------------------------------------------------ report
def _f(value: float | None, spec: str = ".4f") -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def _test(point: dict[str, Any] | None, metric: str, protocol: str = "masked") -> str:
    return "-" if point is None else _f(point["test"][protocol][metric])


def _stride_text(stride: int, max_len: int) -> str:
    if stride >= max_len:
        return "consecutive and not overlapping (every position of a window is a target)"
    return (f"{stride} items apart, so consecutive windows overlap and a window's loss counts only its last "
            f"{stride} targets (each sees at least {max_len - stride + 1} items of context, or all it has)")


def _every_time_targets(tg: dict[str, Any]) -> list[str]:
    """Target-table rows for the comparisons at every equal training time (absent in older results)."""
    yes = {True: "yes", False: "**no**"}
    rows = []
    every = tg.get("ndcg_at_every_equal_time")
    if every:
        behind = ", ".join(f"{t:.0f}" for t in every["behind_at_seconds"]) or "none"
        rows.append(f"| test NDCG@10 >= RecBole's at every equal training time ({every['points']} points) | "
                    f"behind at: {behind} s | {yes[every['met']]} |")
    noise = tg.get("not_significantly_worse_at_every_equal_time")
    if noise and noise["points_with_per_user_ranks"]:
        behind = ", ".join(f"{t:.0f}" for t in noise["significantly_behind_at_seconds"]) or "none"
        rows.append("| not significantly worse at any equal training time (paired bootstrap, 95 %) | "
                    f"significantly behind at: {behind} s | {yes[noise['met']]} |")
    return rows


def render(payload: dict[str, Any]) -> str:
    """The markdown report of one benchmark payload."""
    s = payload["summary"]
    sp, tg = s["seconds_per_epoch"], s["targets"]
    rf, rb = payload["recframe"], payload["recbole"]
    dr, db = rf["data"], rb["data"]
    limit = payload.get("recframe_limit_seconds", payload["budget_seconds"])
    yes = {True: "yes", False: "**no**"}
    lines = [
        "## SASRec on ML-100K: recframe vs RecBole 1.2.1, same hyperparameters",
        "",
        f"Command: `{payload['command']}` ({payload['date_run']}, "
        f"wall time {payload['wall_seconds'] / 60:.1f} min). "
        f"CPU only, torch threads: recframe {rf['threads']}, RecBole {rb['threads']}; machine: "
        f"{payload['cpus']} cores, shared (load average {payload['load_average']['start'][0]:.1f} at the "
        f"start, {payload['load_average']['end'][0]:.1f} at the end), so times are indicative. "
        f"Training budget per side: {payload['budget_seconds'] / 60:g} min of pure training time "
        f"(evaluation excluded), max {payload['max_epochs']} epochs, early stopping after "
        f"{payload['patience_epochs']} epochs without a better validation NDCG@10. RecBole ran first; "
        f"recframe was then allowed {limit:.0f} s, the larger of the budget and RecBole's training time, "
        "so that it can be compared at RecBole's training time.",
        "",
        "### Targets",
        "",
        "| target | measured | met |",
        "|---|---|---|",
        f"| one pass over all training targets >= 10x faster than RecBole | {tg['speedup']['value']:.1f}x "
        f"({_f(sp['recframe']['median'], '.2f')} s vs {_f(sp['recbole']['median'], '.1f')} s per epoch, "
        "medians) "
        f"| {yes[tg['speedup']['met']]} |",
        f"| test NDCG@10 >= RecBole's at equal training time ({tg['ndcg_at_equal_time']['seconds']:.0f} s, "
        f"RecBole's whole run; selected epochs) | {_f(tg['ndcg_at_equal_time']['recframe'], '.5f')} vs "
        f"{_f(tg['ndcg_at_equal_time']['recbole'], '.5f')} | {yes[tg['ndcg_at_equal_time']['met']]} |",
        *_every_time_targets(tg),
        "",
        "### Speed and memory",
        "",
        "| | recframe | RecBole |",
        "|---|---:|---:|",
        f"| seconds per epoch, median (min-max) | {sp['recframe']['median']:.2f} "
        f"({sp['recframe']['min']:.2f}-"
        f"{sp['recframe']['max']:.2f}) | {sp['recbole']['median']:.1f} ({sp['recbole']['min']:.1f}-"
        f"{sp['recbole']['max']:.1f}) |",
        f"| training targets per epoch | {dr['n_train_targets']:,} | {db['n_train_targets']:,} |",
        f"| forward sequences per epoch | {dr['n_windows']:,} windows | {db['n_train_targets']:,} prefixes |",
        f"| optimiser steps per epoch | {dr['train_batches_per_epoch']} | {db['train_batches_per_epoch']} |",
        f"| epochs run | {sp['recframe']['epochs']} | {sp['recbole']['epochs']} |",
        f"| training seconds used | {sp['recframe']['train_seconds']:.0f} | "
        f"{sp['recbole']['train_seconds']:.0f} |",
        f"| stopped by | {rf['stopped']} | {rb['stopped']} |",
        f"| setup seconds (data + model) | {rf['setup_seconds']:.1f} | {rb['setup_seconds']:.1f} |",
        f"| peak RSS of the process, MB | {rf['peak_rss_mb']:.0f} | {rb['peak_rss_mb']:.0f} |",
        "",
        "### Test metrics after equal epochs",
        "",
        "Seen items masked (recframe's protocol; RecBole's evaluator with the mask added). "
        "The last two columns are RecBole's own protocol for sequential models (nothing masked).",
        "",
        "| epoch | recframe NDCG@10 | RecBole NDCG@10 | recframe Recall@10 | RecBole Recall@10 "
        "| recframe NDCG@10, unmasked | RecBole NDCG@10, unmasked |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in s["equal_epochs"]:
        a, b = row["recframe"], row["recbole"]
        lines.append(f"| {row['epoch']} | {_test(a, KEY)} | {_test(b, KEY)} | {_test(a, 'recall@10')} | "
                     f"{_test(b, 'recall@10')} | {_test(a, KEY, 'unmasked')} | {_test(b, KEY, 'unmasked')} |")
    lines += [
        "",
        "### Test metrics at equal training time",
        "",
        "At the training time RecBole had used after each of its epochs: recframe's latest epoch by then "
        "and its epoch with the best validation NDCG@10 by then; RecBole's best-validation epoch by then. "
        "Seen items masked.",
        "",
        "| training s | RecBole epochs | RecBole NDCG@10 (best val.) | RecBole Recall@10 | recframe epochs "
        "| recframe NDCG@10 (latest) | recframe NDCG@10 (best val.) | recframe Recall@10 (best val.) "
        "| recframe - RecBole NDCG@10 [95 % CI] |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in s["equal_time"]:
        m, d = row["recframe"], row.get("difference")
        gap = "-" if d is None else f"{d['mean']:+.4f} [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}]"
        lines.append(
            f"| {row['seconds']:.0f} | {row['recbole_epoch']} | {_test(row['recbole']['best'], KEY)} | "
            f"{_test(row['recbole']['best'], 'recall@10')} | {'-' if m is None else m['last']['epoch']} | "
            f"{_test(m and m['last'], KEY)} | {_test(m and m['best'], KEY)} | "
            f"{_test(m and m['best'], 'recall@10')} | {gap} |")
    gaps = s.get("per_user_vs_reported_max_gap", {})
    if any(v is not None for v in gaps.values()):
        lines += [
            "",
            "The interval is a paired bootstrap over the test users (the same users on both sides; "
            f"{BOOTSTRAP_SAMPLES} resamples) of the per-user NDCG@10 difference, from each side's per-user "
            "test ranks (pessimistic ties on both sides). Per-user means reproduce each side's reported "
            f"NDCG@10 to {_f(gaps.get('recframe'), '.1e')} (recframe) and {_f(gaps.get('recbole'), '.1e')} "
            "(RecBole, whose own evaluator breaks float ties by topk order).",
        ]
    lines += [
        "",
        f"### End of the budget ({payload['budget_seconds'] / 60:g} min of training per side)",
        "",
        "| | epochs | training s | selected epoch | test NDCG@10 | test Recall@10 | NDCG@10, unmasked "
        "| Recall@10, unmasked | test NDCG@10, last epoch |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for side, label in (("recframe", "recframe"), ("recbole", "RecBole")):
        e = s["end_of_budget"][side]
        if e is None:
            lines.append(f"| {label} | 0 (its first epoch took longer than the budget) | - | - | - | - | - "
                         "| - | - |")
            continue
        best, last = e["best"], e["last"]
        lines.append(f"| {label} | {last['epoch']} | {last['cum_train_seconds']:.0f} | {best['epoch']} | "
                     f"{_test(best, KEY)} | {_test(best, 'recall@10')} | {_test(best, KEY, 'unmasked')} | "
                     f"{_test(best, 'recall@10', 'unmasked')} | {_test(last, KEY)} |")
    dc = payload["data_check"]
    max_len = payload["recframe_config"]["model"]["max_len"]
    lines += [
        "",
        "### Same data on both sides",
        "",
        f"Both read the same atomic files (`{payload['dataset']}`). Users {dc['n_users']['recframe']} / "
        f"{dc['n_users']['recbole']}, items {dc['n_items']['recframe']} / {dc['n_items']['recbole']}, "
        f"training targets {dc['n_train_targets']['recframe']:,} / {dc['n_train_targets']['recbole']:,} "
        "(recframe / RecBole). Identical multisets of (user, item) training targets: "
        f"{yes[dc['train_targets_equal']]}; validation targets: {yes[dc['valid_targets_equal']]}; test "
        f"targets: {yes[dc['test_targets_equal']]}. Users whose model input (last "
        f"{max_len} items, in order) differs: validation "
        f"{dc['valid_inputs_differ']['users']}, test {dc['test_inputs_differ']['users']}.",
        "",
        "### Definitions",
        "",
        f"* **Epoch.** One pass over the {dr['n_train_targets']:,} training targets (every training item "
        "of a user except the first). recframe: the training sequences are cut into "
        f"{dr['n_windows']:,} windows of at most {max_len + 1} items, "
        f"{_stride_text(dr.get('window_stride', max_len), max_len)}; each target is counted once per epoch "
        "(one forward pass per window, causal attention). RecBole: its sequential data augmentation "
        f"makes one sample per prefix (the last <= {max_len} items before the target; one forward pass per "
        "target).",
        "* **Training time.** Wall time of the training epochs only (data loading and optimiser steps "
        "included), summed; evaluation after each epoch is outside the clock.",
        "* **Metrics.** Full ranking over all items. recframe's numbers come from recframe's evaluator "
        "(pessimistic ties), RecBole's from RecBole's Collector/Evaluator. With one held-out item per user, "
        "RecBole's Recall@10 equals HR@10. *Masked*: the user's training items (and, at test, the "
        "validation item) are excluded from the ranking, recframe's protocol; RecBole's sequential loader "
        "does not mask them, so the peer script adds the mask through a `collate_fn` wrapper. *Unmasked*: "
        "RecBole's own protocol.",
        "* **Selected epoch.** The epoch with the best validation NDCG@10 (masked) among those counted.",
        "",
        "### Remaining differences between the two SASRec implementations",
        "",
        "Equal: max length, hidden size, layers, heads, inner size, dropout and attention dropout, GELU, "
        "N(0, 0.02) init with zero biases, tied input/output item embeddings, full-catalogue cross-entropy, "
        "Adam with the same learning rate, batch size 128, leave-one-out split, seed 0. Different:",
        "",
        *[f"* {d}" for d in payload["differences"]],
        "",
    ]
    return "\n".join(lines)


def plot(payload: dict[str, Any], path: Path = PLOT) -> Path:
    """Test NDCG@10 (masked) against training time and against epochs, both sides."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    for side, label, color in (("recframe", "recframe", "#4c72b0"), ("recbole", "RecBole 1.2.1", "#dd8452")):
        curve = payload[side]["epochs"]
        secs = [r["cum_train_seconds"] for r in curve]
        ndcg = [r["test"]["masked"][KEY] for r in curve]
        left.plot(secs, ndcg, marker="o", markersize=3, label=label, color=color)
        right.plot([r["epoch"] for r in curve], ndcg, marker="o", markersize=3, label=label, color=color)
    left.set_xscale("log")
    left.axvline(payload["budget_seconds"], color="grey", linestyle="--", linewidth=1)
    left.set_xlabel("cumulative training seconds (log scale; dashed: budget)")
    right.set_xlabel("epoch (one pass over all training targets)")
    for ax in (left, right):
        ax.set_ylabel("test NDCG@10 (seen items masked)")
        ax.spines[["top", "right"]].set_visible(False)
        ax.legend(fontsize=8)
    fig.suptitle(f"SASRec on ML-100K, same hyperparameters, {payload['recframe']['threads']} torch threads "
                 "(benchmarks/results/train_vs_recbole.md)", fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    return path


# ------------------------------------------------------------------ main
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-minutes", type=float, default=30.0,
                        help="training-time budget per side in minutes (default 30; RecBole needs about "
                             "3 min per epoch)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="cap on epochs for both sides (smoke tests); default: the config's max_epochs")
    parser.add_argument("--threads", type=int, default=2, help="torch threads on both sides (default 2)")
    parser.add_argument("--config", type=Path, default=CONFIG,
                        help="recframe SASRec config (default: configs/sasrec_ml100k.yaml)")
    parser.add_argument("--render-only", action="store_true",
                        help="re-render the markdown and the plot from the existing JSON without training")
    ns = parser.parse_args(argv)
    if ns.render_only:
        payload = json.loads((RESULTS / f"{NAME}.json").read_text())
        payload["summary"] = summarize(payload)
    else:
        if ns.budget_minutes <= 0:
            raise SystemExit("--budget-minutes must be positive")
        if ns.epochs is not None and ns.epochs < 1:
            raise SystemExit("--epochs must be >= 1")
        if ns.threads < 1:
            raise SystemExit("--threads must be >= 1")
        payload = run(ns, argv if argv is not None else sys.argv[1:])
    try:
        md = render(payload)
    except Exception:
        write_results(NAME, payload, "rendering failed; fix it and run with --render-only\n")
        raise
    js, out = write_results(NAME, payload, md)
    png = plot(payload)
    print(md)
    print(f"wrote {js}, {out} and {png}")
    return 0


def run(ns: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    """Train both sides and assemble the results payload."""
    from recframe.data import catalog

    wall = time.perf_counter()
    cfg = load_config(ns.config)
    dataset = cfg["data"]["dataset"]
    data_root = Path(os.environ.get(catalog.ENV_ROOT) or cfg["data"]["root"]).resolve()
    if not catalog.is_prepared(dataset, data_root):
        raise SystemExit(f"{dataset} is not prepared under {data_root}: run "
                         f"`recframe data prepare {dataset}` first.")
    budget_s = ns.budget_minutes * 60
    max_epochs = int(cfg["trainer"].get("max_epochs", 200))
    if ns.epochs is not None:
        max_epochs = min(max_epochs, ns.epochs)
    patience = patience_epochs(cfg["trainer"], max_epochs)
    load_start = os.getloadavg()
    print(f"[train_vs_recbole] RecBole side (own venv; its log shows when it ends): budget {budget_s:.0f} s, "
          f"max {max_epochs} epochs", file=sys.stderr)
    theirs = run_recbole(cfg, data_root, budget_s, max_epochs, patience, ns.threads, int(cfg["seed"]))
    limit_s = max(budget_s, theirs["epochs"][-1]["cum_train_seconds"] if theirs["epochs"] else 0.0)
    print(f"[train_vs_recbole] recframe side: time limit {limit_s:.0f} s, max {max_epochs} epochs",
          file=sys.stderr)
    ours = run_recframe(ns.config, limit_s, max_epochs, patience, ns.threads)
    check = compare_data(ours["data"], theirs["data"])
    test_users = sorted({u for u, _ in ours["data"]["test_targets"]})
    pack_ranks(ours["epochs"], test_users)
    pack_ranks(theirs["epochs"], test_users)
    ours["data"], theirs["data"] = _public(ours["data"]), _public(theirs["data"])
    try:
        config_name = str(ns.config.resolve().relative_to(ROOT))
    except ValueError:
        config_name = str(ns.config)
    payload = {
        "command": " ".join(["python -m benchmarks.train_vs_recbole", *argv]),
        "config": config_name, "dataset": f"{dataset} (RecBole atomic files)",
        "budget_seconds": budget_s, "recframe_limit_seconds": limit_s, "max_epochs": max_epochs,
        "patience_epochs": patience,
        "threads": ns.threads, "seed": cfg["seed"], "cpus": os.cpu_count(),
        "recframe_config": {"model": cfg["model"], "data": cfg["data"]},
        "recbole_config": theirs.pop("resolved_config"), "peer_requirements": [*PEER_PRE, *PEER_REQUIREMENTS],
        "differences": DIFFERENCES, "data_check": check, "test_users": test_users,
        "recframe": ours, "recbole": theirs,
        "load_average": {"start": load_start, "end": os.getloadavg()},
        "wall_seconds": time.perf_counter() - wall, "date_run": time.strftime("%Y-%m-%d %H:%M"),
    }
    payload["summary"] = summarize(payload)
    return payload


if __name__ == "__main__":
    raise SystemExit(main())
