"""Calibration before / after temperature scaling / after CoCHI: SASRec on ML-100K and the MiniLM
multiple-choice task (and a generative model when a checkpoint is given).

Run (after ``recframe data prepare ml-100k`` and SASRec checkpoints from ``recframe fit --config
configs/sasrec_ml100k.yaml --seed_everything S``)::

    python -m benchmarks.calibration_cochi --sasrec CKPT_SEED0 CKPT_SEED1 CKPT_SEED2 --minilm
    python -m benchmarks.calibration_cochi --generative G0 G1 G2        # the generative rows, a seed each

Protocol. Recommenders: the prediction is the next item, the probability the softmax of ``model.score`` over
the catalogue with the padding column and the user's seen items masked (what full ranking ranks), the label
the leave-one-out held-out item; validation users calibrate (CoCHI's attribution, selection and scales, the
temperature), test users measure. MiniLM: 4-option genre questions from ML-100K metadata
(:mod:`calib_ext.cochi.multiple_choice`); a random ``--valid-fraction`` of the questions
(default 0.1: each CoCHI validation pass re-encodes them, the expensive part) calibrates, a seeded random
``--max-test`` of the rest measure; CoCHI attributes the encoder's 72 heads by first-order (gradient) ablation
effects and may scale up to ``--minilm-max-heads`` of them. Rows: ECE (15 equal-width bins), NLL, Brier and
accuracy on test for the model as trained, after temperature scaling, after CoCHI, and after CoCHI followed by
temperature scaling (fitted on the intervened validation logits). Gains in NLL and Brier come with a paired
bootstrap interval over test examples (:func:`benchmarks.per_user.bootstrap_difference`; for SASRec each
user's value averaged over seeds first).
Writes ``benchmarks/results/calibration_cochi.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.common import RESULTS, write_results
from benchmarks.per_user import bootstrap_difference
from calib_ext.cochi import CoCHI, LogitTask, RecTask, collect
from calib_ext.metrics import calibration_summary, masked_logits
from calib_ext.temperature import TemperatureScaler

NAME = "calibration_cochi"
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "sasrec_ml100k.yaml"
METHODS = ("before", "temperature", "cochi", "cochi+temperature")
COLUMNS = ("ece", "nll", "brier", "accuracy")
PARTS = ("SASRec", "generative", "MiniLM multiple choice")


def per_example(logits: torch.Tensor, labels: torch.Tensor) -> dict[str, np.ndarray]:
    """Per-example NLL and Brier terms (their means are :func:`calibration_summary`'s ``nll`` / ``brier``)."""
    z, finite = masked_logits(logits)
    log_p = torch.log_softmax(z.masked_fill(~finite, float("-inf")), dim=1)
    p = log_p.exp()
    picked = p.gather(1, labels[:, None]).squeeze(1)
    return {"nll": (-log_p.gather(1, labels[:, None]).squeeze(1)).numpy(),
            "brier": ((p * p).sum(1) - 2 * picked + 1).numpy()}


def evaluate(model: torch.nn.Module, valid: LogitTask, test: LogitTask, cochi: CoCHI) -> dict[str, Any]:
    """Fit temperature and CoCHI on ``valid``; every method's test metrics and per-example terms."""
    start = time.perf_counter()
    zv, yv = collect(model, valid)
    zt, yt = collect(model, test)
    temp = TemperatureScaler().fit(zv, yv)
    cochi.fit(model, valid)
    fit_s = time.perf_counter() - start
    zv_c, _ = cochi.collect(model, valid)
    zt_c, _ = cochi.collect(model, test)
    temp_c = TemperatureScaler().fit(zv_c, yv)
    logits = {"before": zt, "temperature": temp.transform(zt), "cochi": zt_c,
              "cochi+temperature": temp_c.transform(zt_c)}
    out: dict[str, Any] = {"test": {m: calibration_summary(z, yt) for m, z in logits.items()},
                           "per_example": {m: per_example(z, yt) for m, z in logits.items()},
                           "valid_nll": {"before": cochi.nll_before_, "cochi": cochi.nll_after_,
                                         "temperature": temp.nll_after_},
                           "temperature": temp.temperature_, "temperature_after_cochi": temp_c.temperature_,
                           "cochi": cochi.report(), "cochi_fit_seconds": round(fit_s, 1),
                           "n_valid": len(yv), "n_test": len(yt)}
    return out


def gains(per_ex: list[dict[str, dict[str, np.ndarray]]]) -> dict[str, Any]:
    """Paired bootstrap of CoCHI minus each other method, per-example terms averaged over runs first."""
    mean = {m: {k: np.mean([r[m][k] for r in per_ex], axis=0) for k in ("nll", "brier")} for m in METHODS}
    return {f"cochi - {other}": {k: bootstrap_difference(mean["cochi"][k] - mean[other][k])
                                 for k in ("nll", "brier")}
            for other in ("before", "temperature")}


# ----------------------------------------------------------------------------------- recommenders
def lists(run: dict[str, Any]) -> dict[str, Any]:
    """``run`` with its per-example arrays as lists (JSON-ready)."""
    run["per_example"] = {m: {k: np.asarray(v).tolist() for k, v in d.items()}
                          for m, d in run["per_example"].items()}
    return run


def stored_run(path: str, max_heads: int, folder: Path | None = None) -> Path:
    """Where one checkpoint's finished run is kept: named by the checkpoint's path and ``max_heads``."""
    import hashlib

    key = hashlib.sha1(f"{Path(path).resolve()}|{max_heads}".encode()).hexdigest()[:16]
    return (folder or RESULTS / NAME) / f"{Path(path).stem[:40]}_{key}.json"


def recommender_runs(ckpts: list[str], max_heads: int, label: str, fresh: bool = False,
                     folder: Path | None = None) -> list[dict[str, Any]]:
    """The protocol on each recframe checkpoint (one a seed): its own config's data section gives the
    datamodule, so SASRec and the generative backbones share this path.

    Each checkpoint's run is stored as it finishes (:func:`stored_run`) and read back on a later call
    unless ``fresh``: a generative checkpoint takes about half an hour here, so a stopped benchmark resumes
    at the next checkpoint."""
    import yaml

    from recframe.checkpoint_io import atomic_write
    from recframe.data.datamodule import RecDataModule
    from recframe.serving import Recommender

    keep = ("dataset", "split", "max_len", "batch_size")
    runs = []
    for path in ckpts:
        done = stored_run(path, max_heads, folder)
        if done.exists() and not fresh:
            runs.append(json.loads(done.read_text()))
            print(f"{label}: {Path(path).name} read back from {done.name}")
            continue
        meta = torch.load(path, map_location="cpu", weights_only=True).get("recframe", {})
        data = (yaml.safe_load(meta.get("config") or "") or {}).get("data") or \
            yaml.safe_load(CONFIG.read_text())["data"]
        dm = RecDataModule(**{k: v for k, v in data.items() if k in keep})
        dm.setup("test")
        model = Recommender.from_checkpoint(path, index=None).model.eval()
        run = evaluate(model, RecTask(dm.eval_view("valid")), RecTask(dm.eval_view("test")),
                       CoCHI(max_heads=max_heads))
        run.update(checkpoint=_shown(path), seed=meta.get("seed"), model=meta.get("model_class"),
                   data_fingerprint=dm.fingerprint)
        lists(run)
        done.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(done, lambda fh, r=run: fh.write(json.dumps(r).encode()))
        runs.append(run)
        print(f"{label} seed {run['seed']}: " + json.dumps({m: {k: round(v[k], 4) for k in COLUMNS}
                                                            for m, v in run["test"].items()}), flush=True)
    return runs


# -------------------------------------------------------------------------------------------- MiniLM
def minilm_run(valid_fraction: float, max_heads: int, max_test: int | None, seed: int = 0) -> dict[str, Any]:
    from calib_ext.cochi.multiple_choice import (
        MultipleChoiceTask,
        genre_questions,
        load_encoder,
        split_questions,
    )
    from recframe.data import catalog

    feats = catalog.load("ml-100k").item_features
    questions = genre_questions(list(feats.title), list(feats.categories), seed=seed)
    val_q, test_q = split_questions(questions, valid_fraction, seed=seed)
    if max_test is not None and len(test_q) > max_test:  # a random subset of the test questions, for time
        keep = np.sort(np.random.default_rng(seed + 1).choice(len(test_q), max_test, replace=False))
        test_q = [test_q[i] for i in keep]
    model = load_encoder()
    run = evaluate(model, MultipleChoiceTask(val_q), MultipleChoiceTask(test_q),
                   CoCHI(max_heads=max_heads, xatol=2e-2, attribution="gradient"))
    run.update(questions=len(questions), valid_fraction=valid_fraction, seed=seed, attribution="gradient")
    shown = {m: {k: round(v[k], 4) for k in COLUMNS} for m, v in run["test"].items()}
    print("MiniLM: " + json.dumps(shown), flush=True)
    return run


# ---------------------------------------------------------------------------------------------- table
def render(results: dict[str, list[dict[str, Any]]], command: str) -> str:
    lines = [f"## Calibration: before, temperature scaling, CoCHI (test)\n\nCommand: `{command}`\n",
             "ECE: top-label, 15 equal-width bins. Recommenders: next-item softmax over the unseen catalogue "
             "(ML-100K leave-one-out); MiniLM: 4-option genre questions. Mean over runs (seeds) "
             "+- standard deviation where there are several.\n",
             "| model | runs | method | ECE | NLL | Brier | accuracy |", "|---|---|---|---|---|---|---|"]
    notes = []
    for name, runs in results.items():
        if not runs:
            lines.append(f"| {name} | 0 | pending (no checkpoint given) | | | | |")
            continue
        for m in METHODS:
            cells = []
            for k in COLUMNS:
                vals = np.array([r["test"][m][k] for r in runs])
                cells.append(f"{vals.mean():.4f}" + (f" +- {vals.std(ddof=1):.4f}" if len(vals) > 1 else ""))
            lines.append(f"| {name} | {len(runs)} | {m} | " + " | ".join(cells) + " |")
        g = gains([_arrays(r["per_example"]) for r in runs])
        for cmp, by in g.items():
            for k, b in by.items():
                verdict = "significant" if b["significant"] else "no significant difference"
                notes.append(f"- {name}, {cmp}, {k.upper()}: {b['mean']:+.4f} "
                             f"[{b['ci95'][0]:+.4f}, {b['ci95'][1]:+.4f}] ({verdict}; {b['users']} examples)")
        for r in runs:
            c = r["cochi"]
            notes.append(f"- {name} (seed {r.get('seed')}): threshold {c['threshold']:.4g}, patterns "
                         f"{c['pattern_counts']}, candidates {len(c['ranking'])} of {len(c['heads'])} heads, "
                         f"selected {c['selected_heads'] or 'none'} at scale "
                         f"{', '.join(f'{v:.3f}' for v in c['scales'].values()) or '-'}; validation NLL "
                         f"{c['nll_before']:.4f} -> {c['nll_after']:.4f} (temperature "
                         f"{r['temperature']:.3f}: {r['valid_nll']['temperature']:.4f}); "
                         f"CoCHI fit {r['cochi_fit_seconds']:.0f} s")
    lines += ["", "Paired bootstrap (95 %) of CoCHI minus the other method over test examples "
              "(negative = CoCHI lower):", "", *notes, ""]
    return "\n".join(lines)


def _arrays(per_ex: dict[str, dict[str, Any]]) -> dict[str, dict[str, np.ndarray]]:
    return {m: {k: np.asarray(v) for k, v in d.items()} for m, d in per_ex.items()}


def _shown(path: str) -> str:
    p = Path(path).resolve()
    try:
        return str(p.relative_to(Path.cwd().resolve()))
    except ValueError:
        return Path(path).name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sasrec", nargs="*", default=[], metavar="CKPT",
                        help="SASRec checkpoints (one a seed)")
    parser.add_argument("--generative", "--ckpt", dest="generative", nargs="*", default=[], metavar="CKPT",
                        help="TIGER / SIDDecoder checkpoints, one a seed (row pending without them)")
    parser.add_argument("--minilm", action="store_true", help="run the MiniLM multiple-choice task")
    parser.add_argument("--minilm-seeds", nargs="*", type=int, default=[0, 1, 2],
                        help="MiniLM seeds (each draws the options, the split and the test subset)")
    parser.add_argument("--valid-fraction", type=float, default=0.1)
    parser.add_argument("--max-heads", type=int, default=8)
    parser.add_argument("--minilm-max-heads", type=int, default=4,
                        help="heads CoCHI may scale in the encoder (each size costs a scale search)")
    parser.add_argument("--max-test", type=int, default=600,
                        help="at most this many MiniLM test questions (a seeded random subset)")
    parser.add_argument("--fresh", action="store_true",
                        help="drop the recorded rows of parts not run now, and rerun checkpoints whose "
                        "finished run is stored (default: keep and read them back)")
    ns = parser.parse_args(argv)
    torch.set_num_threads(1)
    results: dict[str, list[dict[str, Any]]] = {}
    if ns.sasrec:
        results["SASRec"] = recommender_runs(ns.sasrec, ns.max_heads, "SASRec", ns.fresh)
    if ns.generative:
        results["generative"] = recommender_runs(ns.generative, ns.max_heads, "generative", ns.fresh)
    if ns.minilm:
        results["MiniLM multiple choice"] = [
            minilm_run(ns.valid_fraction, ns.minilm_max_heads, ns.max_test, seed) for seed in ns.minilm_seeds]
    for runs in results.values():
        for r in runs:
            lists(r)
    # parts not run now keep their recorded rows; read at write time, so parts may run concurrently
    previous = RESULTS / f"{NAME}.json"
    recorded = json.loads(previous.read_text())["results"] if previous.exists() and not ns.fresh else {}
    results = {**recorded, **results}
    results.setdefault("generative", [])
    results = {k: results[k] for k in PARTS if k in results}
    md = render(results, "python -m benchmarks.calibration_cochi --sasrec CKPT0 CKPT1 CKPT2 "
                 "--generative CKPT0 CKPT1 CKPT2 --minilm")
    js, out = write_results(NAME, {"results": results, "config": str(CONFIG.name)}, md)
    print(md)
    print(f"wrote {js} and {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
