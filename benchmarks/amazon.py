"""The standard sequential benchmarks: Amazon Beauty, Sports and Toys, our rows beside the published ones.

Run (after ``recframe data prepare amazon-beauty``; likewise sports, toys)::

    python -m benchmarks.amazon --dataset beauty                       # every row with a config, seeds 0 1 2
    python -m benchmarks.amazon --dataset beauty --rows SASRec --seeds 0
    python -m benchmarks.amazon --dataset beauty --render-only          # the table from the finished runs

Protocol (the published tables'): leave-one-out (the last item of each user's line is the test item, the
second-last the validation item), every item of the catalogue ranked, the user's training items excluded.
Each run is ``recframe fit`` on ``configs/amazon/<model>_<dataset>.yaml`` with ``seed_everything`` (and the
tokenizer's and collaborative table's seed, for semantic-ID rows) set to the run's seed; early stopping on
validation NDCG@10 over every validation user; the best-validation checkpoint is tested. Every finished run
is stored at once as ``benchmarks/results/amazon_<dataset>/ROW__seedS.json`` with each test user's rank of
the held-out item (capped at 10), so the paired comparisons get per-user bootstrap intervals
(:func:`benchmarks.per_user.paired_over_seeds`); a restarted command skips finished runs and resumes an
interrupted one from its ``last.ckpt``. Several processes may share the work (each claims a run).

Settings: every row's config is fixed before any run (the recipe is written in the config); no row was
searched, so every model had the same search budget (one point). HR@K equals Recall@K here (one held-out
item per user). Writes ``benchmarks/results/amazon_<dataset>.{json,md,png}`` (the plot: test NDCG@10 of
every row beside the published ones).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS, import_kept_table, keep_item_tables, write_results
from benchmarks.devices import devices, refusal
from benchmarks.per_user import paired_over_seeds
from benchmarks.seeded_runs import load_runs, run_file, run_missing, slug

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs" / "amazon"
DATASETS = {"beauty": "Beauty", "sports": "Sports and Outdoors", "toys": "Toys and Games"}
METRICS = ["hr@5", "hr@10", "hr@20", "ndcg@5", "ndcg@10", "ndcg@20"]


@dataclass(frozen=True)
class Row:
    """One table row: its config stem (``configs/amazon/<stem>_<dataset>.yaml``) and the seeds it sets."""

    stem: str
    tokenizer_seed: bool = False
    collaborative_seed: bool = False
    generative: bool = False


ROWS: dict[str, Row] = {
    "Popularity": Row("popularity"),
    "BPR-MF": Row("bprmf"),
    "LightGCN": Row("lightgcn"),
    "GRU4Rec": Row("gru4rec"),
    "BERT4Rec": Row("bert4rec"),
    "SASRec": Row("sasrec"),
    # issue 32: the scalable loss (sampled softmax, logQ correction, in-batch + 256 uniform negatives)
    "SASRec (sampled softmax, logQ)": Row("sasrec_logq"),
    "TIGER (attribute IDs)": Row("tiger", tokenizer_seed=True, generative=True),
    "TIGER (collaborative IDs)": Row("tiger_collab", tokenizer_seed=True, collaborative_seed=True,
                                     generative=True),
    # attributes + SASRec's table, each block L2-normalised (features: hybrid, hybrid_content: none)
    "TIGER (hybrid IDs)": Row("tiger_hybrid", tokenizer_seed=True, collaborative_seed=True, generative=True),
    "TIGER (collaborative IDs) + TrieRec": Row("tiger_collab_trierec", tokenizer_seed=True,
                                               collaborative_seed=True, generative=True),
    # TrieRec with nothing else changed (the row above also takes TrieRec's own width 128 and lr 0.002)
    "TIGER (collaborative IDs) + TrieRec, TIGER's settings": Row("tiger_collab_trierec_same",
                                                                 tokenizer_seed=True,
                                                                 collaborative_seed=True, generative=True),
    "TIGER (collaborative IDs) + R-GRec": Row("tiger_collab_rgrec", tokenizer_seed=True,
                                              collaborative_seed=True, generative=True),
    "Decoder-only (collaborative IDs)": Row("decoder_collab", tokenizer_seed=True, collaborative_seed=True,
                                            generative=True),
    "FLASH": Row("flash", tokenizer_seed=True, generative=True),
    # SimHash over SASRec's item table: nearly unique paths, the test of why attribute IDs hold FLASH back
    "FLASH (collaborative IDs)": Row("flash_collab", tokenizer_seed=True, collaborative_seed=True,
                                     generative=True),
}
"""Our rows, in table order; a row whose config does not exist for a dataset is left out of its table."""

PAIRS: list[tuple[str, str]] = [
    ("SASRec", "SASRec (sampled softmax, logQ)"),
    ("TIGER (collaborative IDs)", "TIGER (collaborative IDs) + TrieRec"),
    ("TIGER (collaborative IDs)", "TIGER (collaborative IDs) + TrieRec, TIGER's settings"),
    ("TIGER (collaborative IDs)", "TIGER (collaborative IDs) + R-GRec"),
    ("TIGER (attribute IDs)", "FLASH"),
    ("TIGER (attribute IDs)", "TIGER (collaborative IDs)"),
    ("TIGER (collaborative IDs)", "TIGER (hybrid IDs)"),
    ("FLASH", "FLASH (collaborative IDs)"),
    ("TIGER (collaborative IDs)", "FLASH (collaborative IDs)"),
]
"""(baseline, alternative) pairs with a paired interval; the best generative row against SASRec is added."""

POPREC = "PopRec (S3-Rec table; counts include the test items)"
"""S3-Rec's PopRec row, reproduced only when popularity counts the test items too (poprec_protocol)."""

#: Published full-ranking rows on these exact files (leave-one-out, training items excluded), from the
#: datasets' README: S3-Rec's repository table, TIGER (Table 2), and the "SASRec is Still Strong" benchmark
#: (ActionPiece as reported there; SASRec + sampled softmax and eSASRec calculated there; R@10 and N@10 only).
PUBLISHED: dict[str, dict[str, dict[str, float]]] = {
    "beauty": {
        POPREC: {"hr@5": 0.0080, "ndcg@5": 0.0044, "hr@10": 0.0152, "ndcg@10": 0.0068,
                 "hr@20": 0.0217, "ndcg@20": 0.0084},
        "GRU4Rec (S3-Rec table)": {"hr@5": 0.0164, "ndcg@5": 0.0099, "hr@10": 0.0283, "ndcg@10": 0.0137,
                                   "hr@20": 0.0479, "ndcg@20": 0.0187},
        "BERT4Rec (S3-Rec table)": {"hr@5": 0.0203, "ndcg@5": 0.0124, "hr@10": 0.0347, "ndcg@10": 0.0170,
                                    "hr@20": 0.0599, "ndcg@20": 0.0233},
        "SASRec (S3-Rec table)": {"hr@5": 0.0387, "ndcg@5": 0.0249, "hr@10": 0.0605, "ndcg@10": 0.0318,
                                  "hr@20": 0.0902, "ndcg@20": 0.0394},
        "S3-Rec (S3-Rec table)": {"hr@5": 0.0387, "ndcg@5": 0.0244, "hr@10": 0.0647, "ndcg@10": 0.0327,
                                  "hr@20": 0.0994, "ndcg@20": 0.0414},
        "TIGER (paper)": {"hr@5": 0.0454, "ndcg@5": 0.0321, "hr@10": 0.0648, "ndcg@10": 0.0384},
        "ActionPiece (reported)": {"hr@10": 0.0775, "ndcg@10": 0.0424},
        "SASRec + sampled softmax (SASRec is Still Strong)": {"hr@10": 0.0921, "ndcg@10": 0.0531},
        "eSASRec (SASRec is Still Strong)": {"hr@10": 0.0928, "ndcg@10": 0.0523},
    },
    "sports": {
        POPREC: {"hr@5": 0.0056, "ndcg@5": 0.0041, "hr@10": 0.0094, "ndcg@10": 0.0053,
                 "hr@20": 0.0192, "ndcg@20": 0.0078},
        "GRU4Rec (S3-Rec table)": {"hr@5": 0.0129, "ndcg@5": 0.0086, "hr@10": 0.0204, "ndcg@10": 0.0110,
                                   "hr@20": 0.0333, "ndcg@20": 0.0142},
        "BERT4Rec (S3-Rec table)": {"hr@5": 0.0115, "ndcg@5": 0.0075, "hr@10": 0.0191, "ndcg@10": 0.0099,
                                    "hr@20": 0.0315, "ndcg@20": 0.0130},
        "SASRec (S3-Rec table)": {"hr@5": 0.0233, "ndcg@5": 0.0154, "hr@10": 0.0350, "ndcg@10": 0.0192,
                                  "hr@20": 0.0507, "ndcg@20": 0.0231},
        "S3-Rec (S3-Rec table)": {"hr@5": 0.0251, "ndcg@5": 0.0161, "hr@10": 0.0385, "ndcg@10": 0.0204,
                                  "hr@20": 0.0607, "ndcg@20": 0.0260},
        "TIGER (paper)": {"hr@5": 0.0264, "ndcg@5": 0.0181, "hr@10": 0.0400, "ndcg@10": 0.0225},
        "ActionPiece (reported)": {"hr@10": 0.0500, "ndcg@10": 0.0264},
        "SASRec + sampled softmax (SASRec is Still Strong)": {"hr@10": 0.0569, "ndcg@10": 0.0314},
        "eSASRec (SASRec is Still Strong)": {"hr@10": 0.0560, "ndcg@10": 0.0323},
    },
    "toys": {
        POPREC: {"hr@5": 0.0066, "ndcg@5": 0.0046, "hr@10": 0.0113, "ndcg@10": 0.0061,
                 "hr@20": 0.0163, "ndcg@20": 0.0073},
        "GRU4Rec (S3-Rec table)": {"hr@5": 0.0097, "ndcg@5": 0.0059, "hr@10": 0.0176, "ndcg@10": 0.0084,
                                   "hr@20": 0.0301, "ndcg@20": 0.0116},
        "BERT4Rec (S3-Rec table)": {"hr@5": 0.0116, "ndcg@5": 0.0071, "hr@10": 0.0203, "ndcg@10": 0.0099,
                                    "hr@20": 0.0358, "ndcg@20": 0.0138},
        "SASRec (S3-Rec table)": {"hr@5": 0.0463, "ndcg@5": 0.0306, "hr@10": 0.0675, "ndcg@10": 0.0374,
                                  "hr@20": 0.0941, "ndcg@20": 0.0441},
        "S3-Rec (S3-Rec table)": {"hr@5": 0.0443, "ndcg@5": 0.0294, "hr@10": 0.0700, "ndcg@10": 0.0376,
                                  "hr@20": 0.1065, "ndcg@20": 0.0468},
        "TIGER (paper)": {"hr@5": 0.0521, "ndcg@5": 0.0371, "hr@10": 0.0712, "ndcg@10": 0.0432},
        "SASRec + sampled softmax (SASRec is Still Strong)": {"hr@10": 0.0970, "ndcg@10": 0.0580},
        "eSASRec (SASRec is Still Strong)": {"hr@10": 0.0939, "ndcg@10": 0.0538},
    },
}


def config_path(dataset: str, row: str) -> Path:
    """``configs/amazon/<stem>_<dataset>.yaml`` of ``row``."""
    return CONFIGS / f"{ROWS[row].stem}_{dataset}.yaml"


def available_rows(dataset: str) -> list[str]:
    """The rows that have a config for ``dataset``, in table order."""
    return [row for row in ROWS if config_path(dataset, row).exists()]


def log_name(dataset: str, row: str, seed: int) -> str:
    """The run's logger name under ``runs/``."""
    return f"amazon_{dataset}__{slug(row)}__seed{seed}"


def overrides(dataset: str, row: str, seed: int, name: str) -> list[str]:
    """CLI overrides of one run: the seeds (network, tokenizer, collaborative table) and the log name."""
    spec = ROWS[row]
    args = ["--seed_everything", str(seed), "--trainer.logger.init_args.name", name,
            "--trainer.max_time", "null"]
    if spec.tokenizer_seed:
        args += ["--model.init_args.tokenizer.init_args.seed", str(seed)]
    if spec.collaborative_seed:
        args += ["--model.init_args.collaborative_seed", str(seed)]
    return args


def adopt_sasrec_tables(dataset: str, jobs: Sequence[tuple[str, int]]) -> list[int]:
    """Give the collaborative rows of ``jobs`` the item tables of this table's finished SASRec runs.

    A collaborative row's config names ``configs/amazon/sasrec_<dataset>.yaml`` and trains it at the run's
    seed without a wall-clock cap unless its table is cached; the SASRec row of this table is that very run
    (same config, ``seed_everything``, ``max_time: null``), hours per seed on a CPU. Each finished SASRec
    run whose seed a pending collaborative job needs is adopted into the cache
    (:func:`recframe.features.adopt_item_table`); where the run's checkpoint is gone (``runs/`` is not kept),
    the table kept in this table's folder (:func:`keep_sasrec_tables`) is imported instead
    (:func:`recframe.features.collaborative.import_item_table`). Returns the seeds adopted.
    """
    from recframe.features import adopt_item_table

    config = config_path(dataset, "SASRec")
    seeds = sorted({seed for row, seed in jobs if ROWS[row].collaborative_seed
                    and not run_file(folder(dataset), row, seed).exists()})
    adopted = []
    for seed in seeds:
        done = run_file(folder(dataset), "SASRec", seed)
        if import_kept_table(config, folder(dataset), "SASRec", seed):
            adopted.append(seed)
            continue
        if not done.exists():
            continue
        run = json.loads(done.read_text())
        if Path(run["config"]).name != config.name or not Path(run["best_checkpoint"]).is_file():
            continue
        info = {"best_val_ndcg": run["valid"]["ndcg@10"], "epochs": run["epochs"],
                "train_seconds": run["train_seconds"]}
        adopt_item_table(config, run["best_checkpoint"], seed=seed, run_info=info)
        adopted.append(seed)
    return adopted


def keep_sasrec_tables(dataset: str) -> list[int]:
    """Keep every cached item table of ``configs/amazon/sasrec_<dataset>.yaml`` in this table's folder
    (:func:`benchmarks.common.keep_item_tables`): a new checkout's collaborative rows import it instead of
    retraining SASRec (about an hour a Toys seed, two a Beauty or Sports seed at one thread). Returns the
    seeds kept now."""
    return keep_item_tables(config_path(dataset, "SASRec"), folder(dataset), "SASRec")


def folder(dataset: str) -> Path:
    """Where the runs of ``dataset`` are stored."""
    return RESULTS / f"amazon_{dataset}"


def epoch_cap(run: Mapping[str, Any]) -> int | None:
    """The ``trainer.max_epochs`` a stored run trained under: its ``--trainer.max_epochs`` override, else
    its config file's value (a relative path is read from the repository root); None when neither sets one
    or the file is gone."""
    import yaml

    overrides = list(run.get("overrides") or [])
    if "--trainer.max_epochs" in overrides[:-1]:
        return int(overrides[overrides.index("--trainer.max_epochs") + 1])
    path = Path(run.get("config") or "")
    path = path if path.is_absolute() else ROOT / path
    if not run.get("config") or not path.is_file():
        return None
    cap = ((yaml.safe_load(path.read_text()) or {}).get("trainer") or {}).get("max_epochs")
    return int(cap) if cap is not None else None


def epochs_cell(entry: Mapping[str, Any]) -> str:
    """Per seed ``epochs trained (tested epoch, from 1)``, marked ‡ where the run reached its epoch cap."""
    return ", ".join(f"{epochs}{'‡' if capped else ''} ({best + 1})" for epochs, best, capped
                     in zip(entry["epochs"], entry["selected_epochs"], entry["capped"], strict=True))


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def summarise(runs: Mapping[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per row: mean and std of each test metric and of validation NDCG@10, train seconds, devices."""
    out: dict[str, dict[str, Any]] = {}
    for row, group in runs.items():
        entry: dict[str, Any] = {"seeds": [r["seed"] for r in group]}
        for metric in METRICS:
            entry[metric] = mean_std([r["test"][metric] for r in group])
        entry["valid_ndcg@10"] = mean_std([r["valid"]["ndcg@10"] for r in group])
        entry["train_seconds"] = mean_std([r["train_seconds"] for r in group])
        entry["devices"] = devices(group)
        entry["selected_epochs"] = [r["best_checkpoint_epoch"] for r in group]
        entry["epochs"] = [r["epochs"] for r in group]
        # a one-epoch config (a count-based model such as Popularity) has no early stopping to reach
        entry["capped"] = [r["epochs"] == epoch_cap(r) and r["epochs"] > 1 for r in group]
        out[row] = entry
    return out


def comparisons(runs: Mapping[str, list[dict[str, Any]]], summary: Mapping[str, Any]) -> dict[str, Any]:
    """Paired per-user intervals (test NDCG@10, each user averaged over seeds) for :data:`PAIRS` and the
    best generative row (by mean validation NDCG@10) against SASRec. A pair whose arms ran on different
    devices is refused (recorded as such, never computed)."""
    pairs = list(PAIRS)
    generative = [r for r in summary if ROWS.get(r, Row("")).generative]
    if generative and "SASRec" in summary:
        best = max(generative, key=lambda r: summary[r]["valid_ndcg@10"][0])
        pairs.append(("SASRec", best))
    out: dict[str, Any] = {}
    for base, alt in pairs:
        if base not in runs or alt not in runs:
            continue
        key = f"{alt} vs {base}"
        refused = refusal(runs[base], runs[alt])  # never pair a GPU run with a CPU run
        if refused is not None:
            out[key] = refused
            continue
        diff = paired_over_seeds(runs[alt], runs[base])
        diff["relative"] = diff["mean"] / statistics.fmean(r["test"]["ndcg@10"] for r in runs[base])
        diff["seeds"] = [summary[alt]["seeds"], summary[base]["seeds"]]
        out[key] = diff
    return out


def verdict(diff: Mapping[str, Any]) -> str:
    """One line: the difference with its interval, or why it was not computed."""
    if "refused" in diff:
        return f"not compared: {diff['refused']}"
    low, high = diff["ci95"]
    text = (f"{diff['mean']:+.4f} NDCG@10 ({diff['relative']:+.1%}), 95 % paired interval [{low:+.4f}, "
            f"{high:+.4f}] over {diff['users']} users, seeds {diff['seeds'][0]} vs {diff['seeds'][1]}")
    if len(diff["seeds"][0]) < 2 or len(diff["seeds"][1]) < 2:
        text += " (fewer than 2 seeds on an arm: not a verdict)"
    return text if diff["significant"] else text + ": no significant difference"


def render(dataset: str, summary: Mapping[str, Mapping[str, Any]], comps: Mapping[str, Any]) -> str:
    """The markdown table: our rows (mean ± std over seeds), then the published rows, then the pairs."""
    head = "| model | seeds | val NDCG@10 | " + " | ".join(m.upper().replace("NDCG", "NDCG") for m in METRICS)
    lines = [head + " | train s | epochs (best) | device |",
             "|---|---:|---:|" + "---:|" * len(METRICS) + "---:|---|---|"]

    def cell(value: tuple[float, float], n: int) -> str:
        return f"{value[0]:.4f} ± {value[1]:.4f}" if n > 1 else f"{value[0]:.4f}"

    for row, entry in summary.items():
        n = len(entry["seeds"])
        cells = [cell(entry["valid_ndcg@10"], n)] + [cell(entry[m], n) for m in METRICS]
        lines.append(f"| {row} | {n} | " + " | ".join(cells)
                     + f" | {entry['train_seconds'][0]:.0f} | {epochs_cell(entry)} | "
                     + f"{', '.join(entry['devices'])} |")
    for row, values in PUBLISHED[dataset].items():
        cells = [f"{values[m]:.4f}" if m in values else "–" for m in METRICS]
        lines.append(f"| *{row}* | | | " + " | ".join(cells) + " | | | published |")
    text = (f"## Amazon {DATASETS[dataset]} (S3-Rec files), leave-one-out, full ranking, training items "
            "excluded, test split\n\n"
            f"Command: `python -m benchmarks.amazon --dataset {dataset}`. Ours: mean ± sample std over seeds "
            "(a single seed shows its value), each run tested at its best-validation epoch, trained at 1 CPU "
            "thread unless the device says otherwise (*train s* is wall time with other work on the machine: "
            "indicative). *epochs (best)*: per seed, the epochs trained and (in brackets) the tested epoch, "
            "counted from 1; ‡ marks a run that reached its config's epoch cap before early stopping "
            "(still improving: undertrained). Published rows in italics, copied from the papers (datasets "
            "README).\n\n"
            + "\n".join(lines) + "\n")
    if comps:
        text += "\nPaired per-user differences of test NDCG@10 (each user averaged over seeds first):\n\n"
        text += "\n".join(f"- {pair}: {verdict(diff)}" for pair, diff in comps.items()) + "\n"
    return text


def plot(dataset: str, summary: Mapping[str, Any], path: Path) -> Path:
    """Test NDCG@10 of every row, ours (mean, error bar: sample std over seeds) and the published ones."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.common import save_figure

    bars = [(row, *entry["ndcg@10"], True) for row, entry in summary.items()]
    bars += [(row, values["ndcg@10"], 0.0, False) for row, values in PUBLISHED[dataset].items()
             if "ndcg@10" in values]
    bars.sort(key=lambda bar: bar[1])
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(bars) + 1.2))
    ys = range(len(bars))
    ax.barh(ys, [b[1] for b in bars], xerr=[b[2] for b in bars],
            color=["tab:blue" if b[3] else "lightgrey" for b in bars],
            edgecolor=["tab:blue" if b[3] else "grey" for b in bars])
    ax.set_yticks(list(ys), [b[0] for b in bars], fontsize=7)
    ax.set_xlabel("test NDCG@10 (leave-one-out, full ranking)")
    ax.set_title(f"Amazon {DATASETS[dataset]}: ours (blue, ± std over seeds) and published (grey)",
                 fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=list(DATASETS), required=True)
    parser.add_argument("--rows", nargs="*", help="rows to run (default: every row with a config)")
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--render-only", action="store_true", help="the table from the finished runs")
    ns = parser.parse_args(argv)
    rows = available_rows(ns.dataset)
    unknown = [r for r in ns.rows or [] if r not in rows]
    if unknown:
        parser.error(f"unknown row(s) {unknown} for {ns.dataset}; rows with a config: {rows}")
    if not ns.render_only:
        jobs = [(row, seed) for row in (ns.rows or rows) for seed in ns.seeds]
        adopted = adopt_sasrec_tables(ns.dataset, jobs)
        if adopted:
            print(f"[collaborative] SASRec item tables of seeds {adopted} adopted "
                  "(this table's runs or kept tables)")
        run_missing(jobs, folder(ns.dataset), lambda row: config_path(ns.dataset, row),
                    lambda row, seed, name: overrides(ns.dataset, row, seed, name),
                    lambda row, seed: log_name(ns.dataset, row, seed))
        kept = keep_sasrec_tables(ns.dataset)
        if kept:
            print(f"[collaborative] SASRec item tables of seeds {kept} kept in "
                  f"{folder(ns.dataset) / 'item_tables'}")
    runs = load_runs(folder(ns.dataset), list(ROWS))
    summary = summarise(runs)
    comps = comparisons(runs, summary)
    md = render(ns.dataset, summary, comps)
    payload = {"dataset": ns.dataset, "summary": summary, "comparisons": comps,
               "published": PUBLISHED[ns.dataset]}
    js, out = write_results(f"amazon_{ns.dataset}", payload, md)
    png = plot(ns.dataset, summary, js.with_suffix(".png"))
    print(md)
    print(f"wrote {js}, {out} and {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
