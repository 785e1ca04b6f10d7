"""Calibration of next-item probabilities on ML-100K: before and after post-hoc calibration.

Run (after ``recframe data prepare ml-100k``)::

    python -m benchmarks.calibration_ml100k                   # SASRec, seeds 0 1 2: train, then evaluate
    python -m benchmarks.calibration_ml100k --ckpt A.ckpt B.ckpt --model SASRec   # evaluate checkpoints
    python -m benchmarks.calibration_ml100k --ckpt G.ckpt --model TIGER           # add another model's rows
    python -m benchmarks.calibration_ml100k --calibrator CoCHI=calib_ext.cochi.bench:calibrate ...
    python -m benchmarks.calibration_ml100k --render-only

Protocol. Each model's best-validation checkpoint (leave-one-out, seen items masked) gives next-item
probabilities ``softmax`` over the eligible items (:mod:`calib_ext.next_item`). A calibrator is fitted on the
validation users' examples only and applied to the test users' examples; ``before`` is the model as trained,
``TS`` is temperature scaling (:class:`calib_ext.temperature.TemperatureScaler`). The table reports test
ECE (15 equal-width bins), ECE (15 equal-mass bins), NLL, Brier and top-1 accuracy, mean ± sd over seeds,
and for each calibrator the change from ``before`` with a 95 % paired bootstrap interval over test users
(users resampled with replacement, the same users in every seed; each draw averages the seeds' changes).

Adding a calibrator (e.g. CoCHI): ``--calibrator NAME=module:function`` where
``function(model, datamodule, val, test) -> (test_logits [E, C], info: dict)`` and ``val``/``test`` are
``(logits, labels)`` of :func:`calib_ext.next_item.collect_next_item_logits`. Results accumulate in
``benchmarks/results/calibration_ml100k.json`` keyed by model and run, so rows from several invocations
share one table.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from benchmarks.common import RESULTS, fit_and_test, write_results
from calib_ext.metrics import calibration_summary, ece_from_confidence, reliability_diagram
from calib_ext.next_item import collect_next_item_logits
from calib_ext.temperature import TemperatureScaler
from recframe.checkpoint_io import load_checkpoint

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "sasrec_ml100k.yaml"
FIGURES = ROOT / "docs" / "figures"
NAME = "calibration_ml100k"
METRICS = ("ece", "ece_mass", "nll", "brier", "accuracy")
BOOTSTRAP = 2000
N_BINS = 15
BUILD_SECTIONS = ("seed_everything", "model", "data", "trainer", "optimizer", "lr_scheduler")

Calibrator = Callable[[Any, Any, tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
                      tuple[torch.Tensor, dict[str, Any]]]


# ------------------------------------------------------------------ calibrators
def temperature_scaling(model: Any, dm: Any, val: tuple[torch.Tensor, torch.Tensor],
                        test: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, dict[str, Any]]:
    """Temperature scaling fitted on the validation examples (L-BFGS on NLL)."""
    scaler = TemperatureScaler().fit(*val)
    return scaler.transform(test[0]), scaler.to_dict()


BUILTIN: dict[str, Calibrator] = {"TS": temperature_scaling}


def load_calibrator(spec: str) -> tuple[str, Calibrator]:
    """``NAME=module:function`` -> (NAME, function)."""
    name, sep, target = spec.partition("=")
    module, colon, func = target.partition(":")
    if not sep or not colon or not name or not module or not func:
        raise SystemExit(f"--calibrator {spec!r}: expected NAME=module:function (e.g. "
                         "CoCHI=calib_ext.cochi.bench:calibrate)")
    return name, getattr(importlib.import_module(module), func)


# ------------------------------------------------------------------ checkpoints
def model_and_data(ckpt_path: str | Path) -> tuple[Any, Any]:
    """Rebuild model and datamodule from a ``recframe fit`` checkpoint (its stored resolved config) and
    load the weights."""
    from recframe.cli import run_cli

    ckpt = load_checkpoint(ckpt_path)
    config = (ckpt.get("recframe") or {}).get("config")
    if not config:
        raise SystemExit(f"checkpoint {ckpt_path} carries no resolved config (recframe.config); pass a "
                         "checkpoint written by `recframe fit`")
    # a `recframe fit` config also records the subcommand's own options (ckpt_path, weights_only), which
    # building model and data without running does not take: keep the sections that define them
    sections = {k: v for k, v in yaml.safe_load(config).items() if k in BUILD_SECTIONS}
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "config.yaml"
        cfg.write_text(yaml.safe_dump(sections))
        cli = run_cli(["--config", str(cfg), "--trainer.logger", "false", "--trainer.enable_progress_bar",
                       "false"], run=False)
    model, dm = cli.model, cli.datamodule
    model.load_state_dict(ckpt["state_dict"])
    dm.setup("test")
    return model.eval(), dm


def per_example(logits: torch.Tensor, labels: torch.Tensor) -> dict[str, np.ndarray]:
    """Per-example top-label confidence, correctness, NLL and Brier (for the paired bootstrap)."""
    log_p = torch.log_softmax(logits.to(torch.float64), dim=1)
    p = log_p.exp()
    conf, pred = p.max(dim=1)
    picked = p.gather(1, labels[:, None]).squeeze(1)
    return {"conf": conf.numpy(), "correct": (pred == labels).numpy(),
            "nll": (-log_p.gather(1, labels[:, None]).squeeze(1)).numpy(),
            "brier": ((p * p).sum(dim=1) - 2 * picked + 1).numpy()}


def evaluate_checkpoint(ckpt_path: str | Path, calibrators: dict[str, Calibrator],
                        figure_prefix: str | None = None,
                        figures: Path = FIGURES) -> tuple[dict[str, Any], dict[str, Any]]:
    """Test metrics of every method on one checkpoint, plus per-example arrays for the bootstrap."""
    model, dm = model_and_data(ckpt_path)
    start = time.perf_counter()
    val = collect_next_item_logits(model, dm.eval_view("valid"))
    test = collect_next_item_logits(model, dm.eval_view("test"))
    out: dict[str, Any] = {"checkpoint": _shown(ckpt_path), "test_examples": int(test[1].numel()),
                           "valid_examples": int(val[1].numel()), "methods": {}}
    arrays: dict[str, Any] = {}
    methods: dict[str, tuple[torch.Tensor, dict[str, Any]]] = {"before": (test[0], {})}
    for name, fn in calibrators.items():
        t0 = time.perf_counter()
        logits, info = fn(model, dm, val, test)
        methods[name] = (logits, {**info, "seconds": round(time.perf_counter() - t0, 2)})
    for name, (logits, info) in methods.items():
        summary = calibration_summary(logits, test[1], n_bins=N_BINS)
        out["methods"][name] = {"test": {k: summary[k] for k in METRICS}, "info": info}
        arrays[name] = per_example(logits, test[1])
        if figure_prefix:
            probs = torch.softmax(logits, dim=1)
            for binning in ("width", "mass"):
                reliability_diagram(probs, test[1], figures / f"{figure_prefix}_{name.lower()}_{binning}.png",
                                    n_bins=N_BINS, binning=binning,
                                    title=f"{figure_prefix.replace('_', ' ')}: {name} (test)")
    out["users"] = dm.eval_view("test").raw_users.tolist()
    out["eval_seconds"] = round(time.perf_counter() - start, 1)
    return out, arrays


def _shown(path: str | Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return Path(path).name


# ------------------------------------------------------------------ bootstrap
def _metric(a: dict[str, np.ndarray], idx: np.ndarray, metric: str) -> float:
    if metric == "ece":  # the same (lo, hi] equal-width bins as calib_ext.metrics.top_label_ece
        return ece_from_confidence(a["conf"][idx], a["correct"][idx], N_BINS)
    if metric == "accuracy":
        return float(a["correct"][idx].mean())
    return float(a[metric][idx].mean())


def paired_bootstrap(runs: list[dict[str, Any]], method: str, metric: str, seed: int = 0) -> dict[str, Any]:
    """Mean over runs of ``metric(method) - metric(before)`` on test users, with a 95 % bootstrap interval
    resampling users (leave-one-out: one example per user, aligned across runs)."""
    n = len(runs[0]["before"]["conf"])
    if any(len(r["before"]["conf"]) != n for r in runs):
        raise ValueError("runs have different test example counts; the paired bootstrap needs the same users")
    everyone = np.arange(n)
    point = float(np.mean([_metric(r[method], everyone, metric) - _metric(r["before"], everyone, metric)
                           for r in runs]))
    rng = np.random.default_rng(seed)
    draws = np.empty(BOOTSTRAP)
    for b in range(BOOTSTRAP):
        idx = rng.integers(0, n, n)
        draws[b] = np.mean([_metric(r[method], idx, metric) - _metric(r["before"], idx, metric)
                            for r in runs])
    lo, hi = np.quantile(draws, [0.025, 0.975])
    return {"mean": point, "ci95": [float(lo), float(hi)], "significant": bool(lo > 0 or hi < 0)}


# ------------------------------------------------------------------ table
def render(results: dict[str, Any]) -> str:
    """Markdown table: one row per (model, method), mean ± sd over runs, then the paired changes."""
    lines = [f"## Calibration of next-item probabilities, ML-100K leave-one-out, test split ({N_BINS} bins)",
             "", "Command: `python -m benchmarks.calibration_ml100k` (calibrators fitted on validation users "
             "only). Probabilities: softmax of `score` over the eligible items (padding column excluded, "
             "seen items masked, held-out item kept), one example per test user.", "",
             "| model | method | runs | ECE | ECE (equal-mass) | NLL | Brier | accuracy | T |",
             "|---|---|---|---|---|---|---|---|---|"]
    for model, block in results["models"].items():
        runs = list(block["runs"].values())
        methods = list(dict.fromkeys(m for r in runs for m in r["methods"]))
        for method in methods:
            have = [r for r in runs if method in r["methods"]]
            cells = []
            for metric in METRICS:
                vals = np.array([r["methods"][method]["test"][metric] for r in have])
                cells.append(f"{vals.mean():.4f} ± {vals.std(ddof=1) if len(vals) > 1 else 0.0:.4f}")
            temps = [r["methods"][method]["info"].get("temperature") for r in have]
            t = "" if None in temps else f"{np.mean(temps):.3f}"
            lines.append(f"| {model} | {method} | {len(have)} | " + " | ".join(cells) + f" | {t} |")
    for model, block in results["models"].items():
        ckpts = ", ".join(f"`{r['checkpoint']}`" for r in block["runs"].values())
        lines.append(f"\n{model} runs: {ckpts}.")
    lines += ["", "Change from `before` (mean over runs, 95 % paired bootstrap over test users; "
              "\"n.s.\" = no significant difference):", "",
              "| model | method | ΔECE | ΔNLL | ΔBrier | Δaccuracy |", "|---|---|---|---|---|---|"]
    for model, block in results["models"].items():
        for method, deltas in block.get("deltas", {}).items():
            cells = []
            for metric in ("ece", "nll", "brier", "accuracy"):
                d = deltas[metric]
                mark = "" if d["significant"] else " n.s."
                cells.append(f"{d['mean']:+.4f} [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}]{mark}")
            lines.append(f"| {model} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def slug(label: str) -> str:
    """A row label as a file-name part: lower case, runs of other characters as one underscore."""
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="SASRec", help="row label of these runs")
    parser.add_argument("--config", default=str(CONFIG), help="config to train (without --ckpt)")
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--ckpt", nargs="*", default=None,
                        help="evaluate these checkpoints instead of training")
    parser.add_argument("--name", default=NAME, help="results file name under benchmarks/results/")
    parser.add_argument("--figures", default=str(FIGURES), help="folder of the reliability diagrams")
    parser.add_argument("--calibrator", action="append", default=[], metavar="NAME=module:function")
    parser.add_argument("--max-time", metavar="DD:HH:MM:SS", help="override trainer.max_time")
    parser.add_argument("--render-only", action="store_true")
    ns = parser.parse_args(argv)
    previous = RESULTS / f"{ns.name}.json"
    results = json.loads(previous.read_text()) if previous.exists() else {"models": {}}
    if ns.render_only:
        md = render(results)
        write_results(ns.name, results, md)
        print(md)
        return 0
    calibrators = dict(BUILTIN)
    calibrators.update(load_calibrator(s) for s in ns.calibrator)
    ckpts: dict[str, str] = {}
    trained: dict[str, Any] = {}
    if ns.ckpt:
        ckpts = {f"ckpt{i}:{Path(c).name}": c for i, c in enumerate(ns.ckpt)}
    else:
        for seed in ns.seeds:
            extra = ["--seed_everything", str(seed),
                     "--trainer.logger.init_args.name", f"calib_{slug(ns.model)}_ml100k_seed{seed}"]
            if ns.max_time:
                extra += ["--trainer.max_time", ns.max_time]
            run = fit_and_test(ns.config, extra)
            if not run["best_checkpoint"]:
                raise SystemExit(f"seed {seed}: no validation epoch finished within max_time, so there is no "
                                 "best-validation checkpoint; raise --max-time (loaded machine) and rerun")
            ckpts[f"seed{seed}"] = run["best_checkpoint"]
            trained[f"seed{seed}"] = {k: run[k] for k in ("train_seconds", "epochs", "best_checkpoint_epoch",
                                                          "data_fingerprint", "seed", "config")}
            trained[f"seed{seed}"]["ranking_test"] = {k: run["test"][k] for k in ("ndcg@10", "recall@10")}
    block = results["models"].setdefault(ns.model, {"runs": {}})
    arrays = []
    for i, (key, path) in enumerate(ckpts.items()):
        fig = f"calibration_ml100k_{slug(ns.model)}" if i == 0 else None
        out, arr = evaluate_checkpoint(path, calibrators, figure_prefix=fig, figures=Path(ns.figures))
        out.update(trained.get(key, {}))
        block["runs"][key] = out
        arrays.append(arr)
        print(key, {m: v["test"] for m, v in out["methods"].items()})
    if len({tuple(block["runs"][k]["users"]) for k in ckpts}) > 1:
        raise SystemExit("the checkpoints were evaluated on different test users; evaluate one model's runs "
                         "on the same split")
    block["deltas_runs"] = list(ckpts)
    block["deltas"] = {method: {metric: paired_bootstrap(arrays, method, metric)
                                for metric in ("ece", "nll", "brier", "accuracy")}
                       for method in arrays[0] if method != "before"}
    for run in block["runs"].values():
        run.pop("users", None)
    md = render(results)
    js, out_md = write_results(ns.name, results, md)
    print(md)
    print(f"wrote {js} and {out_md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
