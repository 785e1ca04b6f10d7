"""Semantic-ID generative models on ML-100K, 3 seeds, with SASRec beside (issue 4's results table).

Run (after ``recframe data prepare ml-100k``)::

    python -m benchmarks.ml100k_generative                       # every model, seeds 0 1 2
    python -m benchmarks.ml100k_generative --models SASRec --seeds 0 --threads 1   # one of two shells
    python -m benchmarks.ml100k_generative --render-only          # table from the finished runs

Protocol: leave-one-out, full ranking over all 1,682 items (a generative model ranks by the exact
log-probability of every item's code path, :meth:`GenerativeRecModel.score`), seen items masked, the
best-validation-NDCG@10 checkpoint tested. Each run is ``recframe fit`` on the model's config with
``seed_everything`` **and** the tokenizer's seed set to the run's seed, so the spread over seeds includes the
semantic-ID assignment, not only the network's initialisation.

Every finished run is written at once to ``benchmarks/results/ml100k_generative/MODEL__seedS.json``; a
restarted command skips the runs already there, so the table can be filled by several shells (two on two
cores) and survives interruptions. ``--max-epochs`` caps each run (validation every 5 epochs, early stopping
after 3 checks without improvement, as in the configs); the cap is in epochs rather than minutes so a run's
numbers do not depend on how busy the machine was.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS, fit_and_test, write_results
from recframe.checkpoint_io import atomic_write, load_checkpoint

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
RUNS = RESULTS / "ml100k_generative"
RUN_LOGS = Path("runs")  # the configs' logger save_dir, relative to the working directory
MODELS: dict[str, tuple[str, bool]] = {  # name -> (config, whether a tokenizer seed exists)
    "SASRec": ("sasrec_ml100k.yaml", False),
    "TIGER (RQ-KMeans)": ("tiger_ml100k.yaml", True),
    "TIGER (RQ-KMeans) + TrieRec": ("tiger_trierec_ml100k.yaml", True),
    "TIGER (RQ-VAE)": ("tiger_rqvae_ml100k.yaml", True),
    "TIGER (RQ-VAE) + TrieRec": ("tiger_rqvae_trierec_ml100k.yaml", True),
    "Decoder-only (RQ-KMeans)": ("decoder_ml100k.yaml", True),
    "Decoder-only (RQ-KMeans) + TrieRec": ("decoder_trierec_ml100k.yaml", True),
}
TRIEREC_PAIRS = [("TIGER (RQ-KMeans)", "TIGER (RQ-KMeans) + TrieRec"),
                 ("TIGER (RQ-VAE)", "TIGER (RQ-VAE) + TrieRec"),
                 ("Decoder-only (RQ-KMeans)", "Decoder-only (RQ-KMeans) + TrieRec")]
METRICS = ["recall@5", "ndcg@5", "recall@10", "ndcg@10"]


def run_file(model: str, seed: int) -> Path:
    """Where the finished run of ``model`` with ``seed`` is stored."""
    slug = "".join(c if c.isalnum() else "_" for c in model).strip("_")
    return RUNS / f"{slug}__seed{seed}.json"


def overrides(model: str, seed: int, max_epochs: int | None) -> list[str]:
    """CLI overrides of one run: the seed (network and, where there is one, tokenizer) and the epoch cap."""
    name = f"gen_{run_file(model, seed).stem}"
    extra = ["--seed_everything", str(seed), "--trainer.logger.init_args.name", name]
    if MODELS[model][1]:
        extra += ["--model.init_args.tokenizer.init_args.seed", str(seed), "--trainer.max_time", "null"]
        if max_epochs is not None:
            extra += ["--trainer.max_epochs", str(max_epochs)]
    else:  # SASRec: its own config, early stopping instead of a time cap, and the table's cut-offs
        extra += ["--trainer.max_time", "null", "--data.eval_ks", "[5, 10, 20]"]
    return extra


def interrupted_checkpoint(model: str, seed: int) -> Path | None:
    """The furthest-trained ``last.ckpt`` (latest epoch, then newest file) that an interrupted earlier
    attempt at this run left under ``runs/``, if any.

    Resuming at the same thread count gives the uninterrupted run's result (the random state and the
    epoch's batch order travel in the checkpoint), so an interrupted table run loses at most one epoch.
    """
    found = list((RUN_LOGS / f"gen_{run_file(model, seed).stem}").glob("version_*/checkpoints/last.ckpt"))
    return max(found, key=lambda p: (load_checkpoint(p)["epoch"], p.stat().st_mtime), default=None)


def run_all(models: Sequence[str], seeds: Sequence[int], max_epochs: int | None) -> None:
    """Train and test every (model, seed) that has no stored result yet, storing each as it finishes."""
    RUNS.mkdir(parents=True, exist_ok=True)
    for model in models:
        for seed in seeds:
            path = run_file(model, seed)
            if path.exists():
                print(f"[skip] {model} seed {seed}: {path.name} exists")
                continue
            resume = interrupted_checkpoint(model, seed)
            print(f"[run] {model} seed {seed}" + (f" (resuming {resume})" if resume else ""), flush=True)
            result = fit_and_test(CONFIGS / MODELS[model][0], overrides(model, seed, max_epochs),
                                  ckpt_path=resume)
            result.update(model=model, seed=seed, max_epochs=max_epochs)
            atomic_write(path, lambda fh, r=result: fh.write(json.dumps(r, indent=2, default=str).encode()))
            print(f"[done] {model} seed {seed}: test ndcg@10 {result['test']['ndcg@10']:.4f} "
                  f"in {result['train_seconds']:.0f} s ({result['epochs']} epochs)", flush=True)


def load_runs() -> dict[str, list[dict[str, Any]]]:
    """Every stored run, grouped by model in :data:`MODELS` order, sorted by seed."""
    grouped: dict[str, list[dict[str, Any]]] = {model: [] for model in MODELS}
    for path in sorted(RUNS.glob("*.json")):
        run = json.loads(path.read_text())
        grouped.setdefault(run["model"], []).append(run)
    return {model: sorted(runs, key=lambda r: r["seed"]) for model, runs in grouped.items() if runs}


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def summarise(runs: Mapping[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per model: mean and std of each test metric, seeds, training seconds and epochs."""
    out = {}
    for model, group in runs.items():
        row: dict[str, Any] = {"seeds": [r["seed"] for r in group]}
        for metric in METRICS:
            row[metric] = mean_std([r["test"][metric] for r in group])
        fresh = [r["train_seconds"] for r in group if not r.get("resumed_from")]  # resumed: partial times
        row["train_seconds"] = mean_std(fresh) if fresh else (float("nan"), 0.0)
        row["epochs"] = mean_std([r["epochs"] for r in group])
        out[model] = row
    return out


def trierec_gains(summary: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """Relative NDCG@10 gain of TrieRec over its backbone, per pair with both sides run, and their mean."""
    gains = {f"{plus} vs {base}": summary[plus]["ndcg@10"][0] / summary[base]["ndcg@10"][0] - 1
             for base, plus in TRIEREC_PAIRS if base in summary and plus in summary}
    if gains:
        gains["mean"] = statistics.fmean(gains.values())
    return gains


def render(summary: Mapping[str, Mapping[str, Any]], gains: Mapping[str, float], command: str) -> str:
    """The markdown table (mean ± std over seeds) and the TrieRec gains."""
    head = "| model | seeds | " + " | ".join(METRICS) + " | train s | epochs |"
    lines = [head, "|---|---:|" + "---:|" * (len(METRICS) + 2)]
    for model, row in summary.items():
        cells = [f"{row[m][0]:.4f} ± {row[m][1]:.4f}" for m in METRICS]
        lines.append(f"| {model} | {len(row['seeds'])} | " + " | ".join(cells)
                     + f" | {row['train_seconds'][0]:.0f} | {row['epochs'][0]:.0f} |")
    text = ("## ML-100K, semantic-ID generative models, leave-one-out, full ranking (seen items masked), "
            "test split\n\n"
            f"Command: `{command}`. Mean ± sample std over seeds (network and tokenizer seed). "
            "*train s*: mean training wall time of the runs that were not resumed from an interrupted "
            "attempt; 2-4 runs shared the 2 cores, so it varied 3-5x with the load and is not a speed "
            "comparison (`benchmarks/decoding.py` times the decoding alone).\n\n"
            + "\n".join(lines) + "\n")
    if gains:
        text += "\nTrieRec's relative NDCG@10 gain over its backbone:\n\n" + "\n".join(
            f"- {pair}: {gain:+.1%}" for pair, gain in gains.items()) + "\n"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--max-epochs", type=int, default=None,
                        help="epoch cap per run (default: the configs' 30; their time cap is lifted)")
    parser.add_argument("--render-only", action="store_true", help="only aggregate the stored runs")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads for this shell (default: torch's); with several shells, give "
                             "each cores / shells: oversubscribed OpenMP threads made runs here 3-5x slower")
    ns = parser.parse_args(argv)
    if ns.threads is not None:
        import torch

        torch.set_num_threads(ns.threads)
    if not ns.render_only:
        run_all(ns.models, ns.seeds, ns.max_epochs)
    runs = load_runs()
    if not runs:
        print(f"no finished runs under {RUNS}; run without --render-only first")
        return 1
    summary = summarise(runs)
    gains = trierec_gains(summary)
    command = "python -m benchmarks.ml100k_generative" + (
        f" --max-epochs {ns.max_epochs}" if ns.max_epochs else "")
    md = render(summary, gains, command)
    write_results("ml100k_generative", {"summary": summary, "trierec_ndcg10_gain": gains,
                                        "runs": {m: [r["test"] for r in g] for m, g in runs.items()}}, md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
