"""Semantic-ID generative models on ML-100K against SASRec, with paired per-user intervals (issue 16's table).

Run (after ``recframe data prepare ml-100k``)::

    python -m benchmarks.ml100k_generative                                # every row, seeds 0 1 2
    python -m benchmarks.ml100k_generative --rows "TIGER (collaborative IDs)" --seeds 0 --threads 1
    python -m benchmarks.ml100k_generative --render-only                   # table from the finished runs
    python -m benchmarks.ml100k_generative --search "lr 0.001" --rows ...  # validation-only search, seed 0
    python -m benchmarks.ml100k_generative --promote ROW ...            # selected point = the row's seed 0

Protocol: leave-one-out, full ranking over all 1,682 items (a generative model ranks by the exact
log-probability of every item's code path, :meth:`GenerativeRecModel.score`), seen items masked. Each run
is ``recframe fit`` on the row's config with ``seed_everything``, the tokenizer's seed and (for
collaborative IDs) the seed of the SASRec run that produces the item table all set to the run's seed;
training stops early on validation NDCG@10 over **all** 943 validation users, and the best-validation
checkpoint is tested. Settings are chosen on validation only: ``--search`` trains seed 0 of the given rows
at every point of :data:`SEARCH` and writes a table of validation NDCG@10 alone
(``ml100k_generative_search.md``; the runs' test numbers are stored but not shown).

Every finished run is written at once to ``benchmarks/results/ml100k_generative/ROW__seedS.json``, with each
test user's rank of the held-out item (capped at 10), so the table's gains come with a per-user paired
bootstrap interval (:func:`benchmarks.per_user.paired_over_seeds`); a restarted command skips finished runs
and resumes an interrupted one from its ``last.ckpt``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import seeded_runs
from benchmarks.common import RESULTS, save_figure, write_results
from benchmarks.devices import refusal
from benchmarks.per_user import paired_over_seeds
from recframe.checkpoint_io import atomic_write, load_checkpoint

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
RUNS = RESULTS / "ml100k_generative"
FIGURE = RESULTS.parent.parent / "docs" / "img" / "ml100k_generative.png"
RUN_LOGS = Path("runs")  # the configs' logger save_dir, relative to the working directory
METRICS = ["ndcg@5", "ndcg@10", "recall@5", "recall@10"]
#: earlier rows of this benchmark's own results, for reference in the text (LOO test NDCG@10)
REFERENCES = {"Popularity": 0.0432, "BPR-MF": 0.0655, "LightGCN": 0.0766}


@dataclass(frozen=True)
class Row:
    """One table row: its config, and which seeds a run sets besides ``seed_everything``."""

    config: str
    tokenizer_seed: bool = True
    collaborative_seed: bool = False
    #: CLI overrides on top of the config (a variant that differs from its config by a setting or two)
    extra: tuple[str, ...] = ()


def rgrec_weights(weight: str) -> tuple[str, ...]:
    """CLI override giving all three R-GRec objectives of ``tiger_rgrec_ml100k.yaml`` the weight ``weight``
    (the add-on's other settings are its defaults, which are the config's)."""
    return ("--model.init_args.addons",
            '[{"class_path": "recframe.models.generative.RGRec", "init_args": {'
            f'"neighbor_weight": {weight}, "contrast_weight": {weight}, "link_weight": {weight}}}}}]')


ROWS: dict[str, Row] = {
    "SASRec": Row("sasrec_ml100k.yaml", tokenizer_seed=False),
    "TIGER (text IDs)": Row("tiger_ml100k.yaml"),
    "TIGER (text IDs) + TrieRec": Row("tiger_trierec_ml100k.yaml"),
    "TIGER (collaborative IDs)": Row("tiger_collab_ml100k.yaml", collaborative_seed=True),
    "TIGER (collaborative IDs) + TrieRec": Row("tiger_collab_trierec_ml100k.yaml", collaborative_seed=True),
    "Decoder-only (text IDs)": Row("decoder_ml100k.yaml"),
    "Decoder-only (text IDs) + TrieRec": Row("decoder_trierec_ml100k.yaml"),
    "Decoder-only (collaborative IDs)": Row("decoder_collab_ml100k.yaml", collaborative_seed=True),
    "Decoder-only (collaborative IDs) + TrieRec": Row("decoder_collab_trierec_ml100k.yaml",
                                                      collaborative_seed=True),
    # issue 17: FLASH (parallel heads over SimHash IDs) and TIGER on the same SimHash IDs
    "FLASH": Row("flash_ml100k.yaml"),
    "FLASH (no alignment)": Row("flash_ml100k.yaml", extra=("--model.init_args.align_weight", "0.0")),
    "TIGER (SimHash IDs)": Row("tiger_simhash_ml100k.yaml"),
    # issue 17: R-GRec's graph objectives on TIGER (text IDs), each alone and all three
    "TIGER (text IDs) + R-GRec": Row("tiger_rgrec_ml100k.yaml"),
    "TIGER (text IDs) + R-GRec (neighbor)": Row("tiger_rgrec_neighbor_ml100k.yaml"),
    "TIGER (text IDs) + R-GRec (contrast)": Row("tiger_rgrec_contrast_ml100k.yaml"),
    "TIGER (text IDs) + R-GRec (link)": Row("tiger_rgrec_link_ml100k.yaml"),
    # issue 17: the weight of the three R-GRec objectives (one weight for all three), chosen on the mean
    # validation NDCG@10 over the seeds among these rows and the config's 0.1 (RGREC_WEIGHT_ROWS)
    **{f"TIGER (text IDs) + R-GRec (weight {w})": Row("tiger_rgrec_ml100k.yaml", extra=rgrec_weights(w))
       for w in ("0.03", "0.3", "1.0")},
    # issue 32: SASRec's scalable loss (sampled softmax, logQ correction, in-batch + 256 uniform negatives)
    # against its full softmax, same config and seeds; paired against "SASRec" like every row
    "SASRec (sampled softmax, logQ)": Row("sasrec_ml100k.yaml", tokenizer_seed=False,
                                          extra=("--model.init_args.loss_type", "sampled_logq")),
}
#: (baseline, with the add-on): TrieRec's gain on each backbone and ID kind
TRIEREC_PAIRS = [(base, f"{base} + TrieRec") for base in ROWS if f"{base} + TrieRec" in ROWS]
#: (baseline, alternative): what collaborative IDs change, per backbone
ID_PAIRS = [("TIGER (text IDs)", "TIGER (collaborative IDs)"),
            ("Decoder-only (text IDs)", "Decoder-only (collaborative IDs)")]
#: (baseline, alternative): FLASH's alignment, FLASH against learned-tokenizer TIGER, and the tokenizer
#: (RQ-KMeans vs SimHash under the same TIGER) apart from the decoding (beam vs parallel heads)
FLASH_PAIRS = [("FLASH (no alignment)", "FLASH"), ("TIGER (text IDs)", "FLASH"),
               ("TIGER (text IDs)", "TIGER (SimHash IDs)"), ("TIGER (SimHash IDs)", "FLASH")]
#: (backbone, backbone + R-GRec objectives)
RGREC_PAIRS = [("TIGER (text IDs)", row) for row in ROWS if "R-GRec" in row]
#: the rows among which R-GRec's objective weight is chosen on validation (the config's 0.1 and the overrides)
RGREC_WEIGHT_ROWS = ["TIGER (text IDs) + R-GRec"] + [row for row in ROWS if "R-GRec (weight" in row]


#: the search grid, the same for every row: one setting changed at a time from the config's
SEARCH: dict[str, list[str]] = {
    "config": [],
    "lr 0.001": ["--model.init_args.lr", "0.001"],
    "lr 0.004": ["--model.init_args.lr", "0.004"],
    "dropout 0.2": ["--model.init_args.dropout", "0.2"],
    "width 128": ["--model.init_args.dim", "128", "--model.init_args.inner", "512"],
    "depth 3": ["--model.init_args.n_layers", "3"],
}
SEARCH_RUNS = RESULTS / "ml100k_generative_search"


#: each text-ID row takes the setting selected for its collaborative-ID twin (same backbone and add-on):
#: the search covers the four collaborative rows, one grid for both backbones with and without TrieRec
TWINS: dict[str, str] = {row.replace("text IDs", "collaborative IDs"): row
                         for row in ROWS if "text IDs" in row}
SUPERSEDED = RESULTS / "ml100k_generative_superseded"


def point_folder(point: str) -> Path:
    """Where the seed-0 runs of one search point are stored."""
    return SEARCH_RUNS / "".join(c if c.isalnum() else "_" for c in point)


def selected_point(row: str) -> tuple[str, float] | None:
    """The search point with the highest validation NDCG@10 for ``row`` (seed 0), and that value."""
    found = {point: json.loads(path.read_text())["valid"]["ndcg@10"]
             for point in SEARCH if (path := run_file(row, 0, point_folder(point))).exists()}
    return max(found.items(), key=lambda kv: kv[1]) if found else None


def config_value(config: Path, flag: str) -> Any:
    """The value a config file gives the CLI flag ``--a.b.c`` (``KeyError`` naming the key when absent)."""
    import yaml

    value: Any = yaml.safe_load(config.read_text())
    for key in flag.removeprefix("--").split("."):
        if not isinstance(value, dict) or key not in value:
            raise KeyError(f"{config.name} has no {flag.removeprefix('--')}")
        value = value[key]
    return value


def config_differences(row: str, point: str) -> list[str]:
    """How ``row``'s config differs from the settings of search ``point`` (empty: it has them all)."""
    args, config = SEARCH[point], CONFIGS / ROWS[row].config
    return [f"{config.name}: {flag.removeprefix('--')} is {have}, set it to {value}"
            for flag, value in zip(args[::2], args[1::2])
            if float(have := config_value(config, flag)) != float(value)]


def promote(row: str) -> str:
    """Make the selected search point ``row``'s table setting: its seed-0 search run becomes the row's seed 0.

    The row's config (and its text-ID twin's, :data:`TWINS`) must already hold the point's settings; a
    config still at another setting is one clear error naming the key and value. Results and interrupted
    runs made at the old setting (the row's seeds >= 1, every seed of the twin) are moved to
    ``ml100k_generative_superseded/`` and ``runs/superseded/``, so nothing resumes or reports a run
    trained at a setting that is no longer the row's. Returns what was done, for the log.
    """
    chosen = selected_point(row)
    if chosen is None:
        raise SystemExit(f"{row}: no search run is stored; run --search first")
    point = chosen[0]
    rows = [row] + ([TWINS[row]] if row in TWINS else [])
    wrong = [d for r in rows for d in config_differences(r, point)]
    if wrong:
        raise SystemExit(f"{row}: the search selected {point!r}, but " + "; ".join(wrong) + ".")
    moved = []
    for r in rows:
        for path in sorted(RUNS.glob(f"{run_file(r, 0).stem[:-1]}*.json")):
            if json.loads(path.read_text()).get("search_point") != point:
                SUPERSEDED.mkdir(parents=True, exist_ok=True)
                path.replace(SUPERSEDED / path.name)
                moved.append(path.name)
        for seed_log in sorted(RUN_LOGS.glob(f"{log_name(r, 0)[:-1]}*")):
            (RUN_LOGS / "superseded").mkdir(parents=True, exist_ok=True)
            seed_log.replace(RUN_LOGS / "superseded" / seed_log.name)
            moved.append(f"runs/{seed_log.name}")
    result = json.loads(run_file(row, 0, point_folder(point)).read_text())
    result["search_point"] = point
    atomic_write(run_file(row, 0), lambda fh: fh.write(json.dumps(result, indent=2, default=str).encode()))
    return f"{row}: {point!r} promoted to seed 0; moved aside: {', '.join(moved) or 'nothing'}"


def log_name(row: str, seed: int, folder: Path | None = None) -> str:
    """The run's logger name under ``runs/`` (distinct per search point, so resuming finds the right run)."""
    folder = RUNS if folder is None else folder
    tag = "" if folder == RUNS else f"{folder.name}__"
    return f"gen_{tag}{run_file(row, seed).stem}"


def run_file(row: str, seed: int, folder: Path | None = None) -> Path:
    """Where the finished run of ``row`` with ``seed`` is stored."""
    folder = RUNS if folder is None else folder
    slug = "".join(c if c.isalnum() else "_" for c in row).strip("_")
    return folder / f"{slug}__seed{seed}.json"


def overrides(row: str, seed: int, extra: Sequence[str] = (), folder: Path | None = None) -> list[str]:
    """CLI overrides of one run: the seeds (network, tokenizer, collaborative table) and the log name."""
    folder = RUNS if folder is None else folder
    spec = ROWS[row]
    args = ["--seed_everything", str(seed), "--trainer.logger.init_args.name", log_name(row, seed, folder),
            "--trainer.max_time", "null"]
    if spec.tokenizer_seed:
        args += ["--model.init_args.tokenizer.init_args.seed", str(seed)]
    if spec.collaborative_seed:
        args += ["--model.init_args.collaborative_seed", str(seed)]
    if row.startswith("SASRec"):
        args += ["--data.eval_ks", "[5, 10, 20]"]
    return args + list(spec.extra) + list(extra)


def interrupted_checkpoint(name: str) -> Path | None:
    """The furthest-trained ``last.ckpt`` an interrupted earlier attempt left under ``runs/NAME``."""
    return seeded_runs.interrupted_checkpoint(name, RUN_LOGS)


with_ranks = seeded_runs.with_ranks


def validation_curve(name: str) -> list[dict[str, float]]:
    """``[{epoch, val_ndcg}]`` of run ``name`` across its version folders (see seeded_runs)."""
    return seeded_runs.validation_curve(name, RUN_LOGS)


def training_finished(row: str, seed: int) -> bool:
    """Whether the run's training ended: a stored result, or a ``last.ckpt`` whose early stopping fired or
    whose epoch is the last one (a run cut by a kill has neither)."""
    if run_file(row, seed).exists():
        return True
    last = interrupted_checkpoint(log_name(row, seed))
    if last is None:
        return False
    state = load_checkpoint(last)
    stopped = any(v.get("stopped_epoch", 0) > 0 for k, v in state.get("callbacks", {}).items()
                  if "EarlyStopping" in k)
    max_epochs = config_value(CONFIGS / ROWS[row].config, "--trainer.max_epochs")
    return stopped or state["epoch"] >= max_epochs - 1


def stored_or_logged_curve(row: str, seed: int) -> list[dict[str, float]]:
    """The validation curve of a run: the one its stored result records (committed, so a fresh checkout
    has it), else the one its logs under ``runs/`` hold (a run still training or cut by a kill)."""
    path = run_file(row, seed)
    if path.exists():
        curve = json.loads(path.read_text()).get("val_curve")
        if curve:
            return curve
    return validation_curve(log_name(row, seed))


def chosen_rgrec_weight_row() -> str | None:
    """The row ``--rgrec-weight-choice`` last chose on validation (its stored result), or ``None``."""
    path = RUNS.parent / "ml100k_generative_rgrec_weight.json"
    return json.loads(path.read_text()).get("chosen") if path.exists() else None


def rgrec_weight_choice(seeds: Sequence[int] = (0, 1, 2)) -> tuple[dict[str, Any], str]:
    """R-GRec's objective weight chosen on validation alone, from the runs' validation curves (the stored
    results' ``val_curve``, else the logs under ``runs/``: :func:`stored_or_logged_curve`).

    Every run of :data:`RGREC_WEIGHT_ROWS` is compared up to the same horizon, the last validated epoch
    that every unfinished run reached (some runs were cut before their early stop when device time ran out;
    a run that stopped early is complete at any horizon): per weight, the mean over seeds of the best
    validation NDCG@10 at or before that epoch. The weight with the
    highest mean is chosen; no test number is read. Returns the JSON payload and its markdown table.
    """
    curves = {row: {seed: stored_or_logged_curve(row, seed) for seed in seeds}
              for row in RGREC_WEIGHT_ROWS}
    missing = [f"{row} seed {seed}" for row, by_seed in curves.items()
               for seed, c in by_seed.items() if not c]
    if missing:
        raise SystemExit("no validation curve (stored result or runs/ log) for " + ", ".join(missing)
                         + "; train them first (--rows ROW --seeds S)")
    cut = [c[-1]["epoch"] for row, by_seed in curves.items() for seed, c in by_seed.items()
           if not training_finished(row, seed)]
    horizon = min(cut, default=max(c[-1]["epoch"] for by_seed in curves.values() for c in by_seed.values()))
    table = {}
    for row, by_seed in curves.items():
        capped = [max(p["val_ndcg"] for p in c if p["epoch"] <= horizon) for c in by_seed.values()]
        table[row] = {"weight": 0.1 if row == RGREC_WEIGHT_ROWS[0] else float(row.split()[-1].rstrip(")")),
                      "best_to_horizon": capped, "mean_to_horizon": statistics.fmean(capped),
                      "best_whole_run": [max(p["val_ndcg"] for p in c) for c in by_seed.values()],
                      "last_epoch": [c[-1]["epoch"] for c in by_seed.values()]}
    chosen = max(table, key=lambda row: table[row]["mean_to_horizon"])
    lines = ["## R-GRec objective weight, chosen on validation (TIGER text IDs, all three objectives)\n",
             "Command: `python -m benchmarks.ml100k_generative --rgrec-weight-choice`. One weight for the "
             "three objectives; per seed, the best validation NDCG@10 (beam search, 943 users) "
             + (f"at or before epoch {horizon}, the last validated epoch that every unfinished run reached "
                f"({len(cut)} runs are cut before their early stop; a run that stopped early is complete)"
                if cut else "over the whole run (every run has finished)")
             + "; the weight with the highest mean is chosen. No test number is read.\n",
             "| weight | best validation NDCG@10 to the horizon (seeds 0, 1, 2) | mean | whole-run best | "
             "last epoch |", "|---:|---|---:|---|---|"]
    for row, entry in sorted(table.items(), key=lambda kv: kv[1]["weight"]):
        mark = " **(chosen)**" if row == chosen else ""
        lines.append(f"| {entry['weight']}{mark} | " + ", ".join(f"{v:.4f}" for v in entry["best_to_horizon"])
                     + f" | {entry['mean_to_horizon']:.4f} | "
                     + ", ".join(f"{v:.4f}" for v in entry["best_whole_run"]) + " | "
                     + ", ".join(map(str, entry["last_epoch"])) + " |")
    payload = {"horizon_epoch": horizon, "chosen": chosen, "weights": table}
    return payload, "\n".join(lines) + "\n"


def run_all(rows: Sequence[str], seeds: Sequence[int], extra: Sequence[str] = (),
            folder: Path | None = None) -> None:
    """Train and test every (row, seed) without a stored result, storing each as it finishes
    (:func:`benchmarks.seeded_runs.run_missing`; a search folder prints validation only)."""
    folder = RUNS if folder is None else folder
    seeded_runs.run_missing(
        [(row, seed) for row in rows for seed in seeds], folder,
        config_of=lambda row: CONFIGS / ROWS[row].config,
        overrides_of=lambda row, seed, _name: overrides(row, seed, extra, folder),
        log_name_of=lambda row, seed: log_name(row, seed, folder),
        show_test=folder == RUNS, run_logs=RUN_LOGS, recorded={"extra": list(extra)})


def load_runs(folder: Path | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every stored run, grouped by row in :data:`ROWS` order, sorted by seed."""
    folder = RUNS if folder is None else folder
    grouped: dict[str, list[dict[str, Any]]] = {row: [] for row in ROWS}
    for path in sorted(folder.glob("*.json")):
        run = json.loads(path.read_text())
        grouped.setdefault(run["row"], []).append(run)
    return {row: sorted(runs, key=lambda r: r["seed"]) for row, runs in grouped.items() if runs}


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single value)."""
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def summarise(runs: Mapping[str, list[dict[str, Any]]], split: str = "test") -> dict[str, dict[str, Any]]:
    """Per row: mean and std of each metric of ``split``, training seconds, selected epochs."""
    out = {}
    for row, group in runs.items():
        entry: dict[str, Any] = {"seeds": [r["seed"] for r in group]}
        for metric in METRICS:
            entry[metric] = mean_std([r[split][metric] for r in group])
        entry["valid_ndcg@10"] = mean_std([r["valid"]["ndcg@10"] for r in group])
        # a run resumed from a checkpoint without timer state timed only its last process: left out
        fresh = [r["train_seconds"] for r in group
                 if not r.get("resumed_from") or r.get("train_seconds_complete")]
        entry["train_seconds"] = mean_std(fresh) if fresh else (float("nan"), 0.0)
        entry["selected_epochs"] = [r["best_checkpoint_epoch"] for r in group]
        entry["epochs"] = [r["epochs"] for r in group]
        entry["selected_last"] = sum(bool(r.get("selected_last")) for r in group)
        entry["gpu"] = any("GPU" in str(r.get("machine", "")) for r in group)
        out[row] = entry
    return out


def paired(runs: Mapping[str, list[dict[str, Any]]], pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """Per (baseline, alternative) with per-user ranks on both sides: the paired bootstrap of the per-user
    test NDCG@10 difference (each user's value averaged over the row's seeds first)."""
    out = {}
    for base, alt in pairs:
        if base in runs and alt in runs and all("test_top10_ranks" in r for r in runs[base] + runs[alt]):
            refused = refusal(runs[base], runs[alt])
            if refused is not None:  # never pair a GPU run with a CPU run (benchmarks/devices.py)
                out[f"{alt} vs {base}"] = refused
                continue
            diff = paired_over_seeds(runs[alt], runs[base])
            diff["relative"] = diff["mean"] / statistics.fmean(r["test"]["ndcg@10"] for r in runs[base])
            out[f"{alt} vs {base}"] = diff
    return out


def verdict(diff: Mapping[str, Any]) -> str:
    """One line: the gain with its interval, or "no significant difference" when the interval covers 0
    (or why no interval was computed)."""
    if "refused" in diff:
        return f"not compared: {diff['refused']}"
    low, high = diff["ci95"]
    text = (f"{diff['mean']:+.4f} NDCG@10 ({diff['relative']:+.1%}), "
            f"95 % paired interval [{low:+.4f}, {high:+.4f}]")
    return text if diff["significant"] else text + ": no significant difference"


def render(summary: Mapping[str, Mapping[str, Any]], comparisons: Mapping[str, Any], command: str) -> str:
    """The markdown table (mean ± std over seeds) and the paired comparisons."""
    head = ("| model | seeds | validation ndcg@10 | " + " | ".join(METRICS)
            + " | train s (1 thread) | selected epoch (of run) |")
    lines = [head, "|---|---:|" + "---:|" * (len(METRICS) + 3)]

    def cell(value: tuple[float, float], n: int) -> str:
        return f"{value[0]:.4f} ± {value[1]:.4f}" if n > 1 else f"{value[0]:.4f}"

    for row, entry in summary.items():
        n = len(entry["seeds"])
        cells = [cell(entry["valid_ndcg@10"], n)] + [cell(entry[m], n) for m in METRICS]
        epochs = ", ".join(f"{s} ({e})" for s, e in zip(entry["selected_epochs"], entry["epochs"]))
        lines.append(f"| {row} | {len(entry['seeds'])} | " + " | ".join(cells)
                     + f" | {entry['train_seconds'][0]:.0f}{' †' if entry.get('gpu') else ''} | {epochs} |")
    text = ("## ML-100K, semantic-ID generative models, leave-one-out, full ranking (seen items masked), "
            "test split\n\n"
            f"Command: `{command}`. Mean ± sample std over seeds (network, tokenizer and collaborative-table "
            "seed); a single seed shows its value. Validation is the beam-search validation the runs were "
            "selected by (all 943 users). Each run trains at 1 thread (two runs shared the 2 cores, with "
            "other work beside, so *train s* is indicative) and is tested at its best-validation epoch; an "
            "epoch is 0-based. † trained on a lent H200 GPU, 15-18 runs side by side at 1 CPU thread each "
            "(the run's file names the machine): its *train s* is not comparable with the CPU rows'.\n\n"
            + "\n".join(lines) + "\n")
    if comparisons:
        text += "\nPaired per-user differences of test NDCG@10 (each user averaged over seeds first):\n\n"
        text += "\n".join(f"- {pair}: {verdict(diff)}" for pair, diff in comparisons.items()) + "\n"
    return text


def reference_lines(path: Path | None = None) -> dict[str, float]:
    """Test NDCG@10 of Popularity and LightGCN from the baselines benchmark (empty when it has not run)."""
    path = path or RESULTS / "ml100k_baselines_loo.json"
    if not path.exists():
        return {}
    runs = json.loads(path.read_text())["runs"]
    return {name: runs[name]["test"]["ndcg@10"] for name in ("Popularity", "LightGCN") if name in runs}


def plot(runs: Mapping[str, list[dict[str, Any]]], comparisons: Mapping[str, Any],
         references: Mapping[str, float], path: Path) -> Path:
    """Left: each row's test NDCG@10 per seed (dots) and mean (bar), with the reference baselines as lines.
    Right: the paired per-user differences with their 95 % bootstrap intervals (filled: significant)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(runs)
    comparisons = {k: v for k, v in comparisons.items() if "refused" not in v}
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 0.45 * max(len(rows), len(comparisons)) + 1.8),
                                      gridspec_kw={"width_ratios": [1, 1.2]})
    for y, row in enumerate(rows):
        values = [r["test"]["ndcg@10"] for r in runs[row]]
        left.barh(y, statistics.fmean(values), color="#9ecae1" if row != "SASRec" else "#fdae6b")
        left.plot(values, [y] * len(values), "k.", ms=6)
    for (name, value), style in zip(references.items(), ("--", ":")):
        left.axvline(value, color="grey", ls=style, label=f"{name} {value:.4f}")
    left.set_yticks(range(len(rows)), rows, fontsize=8)
    left.invert_yaxis()
    left.set_xlabel("test NDCG@10 (dots: seeds; bar: mean)")
    if references:
        left.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    for y, diff in enumerate(comparisons.values()):
        low, high = diff["ci95"]
        right.errorbar(diff["mean"], y, xerr=[[diff["mean"] - low], [high - diff["mean"]]], fmt="o",
                       color="k", mfc="k" if diff["significant"] else "white", capsize=3)
    right.axvline(0.0, color="grey", lw=1)
    right.set_yticks(range(len(comparisons)), list(comparisons), fontsize=7)
    right.invert_yaxis()
    right.set_xlabel("difference in test NDCG@10")
    right.set_title("paired per-user, 95 % interval (open: covers 0)", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)


def search(rows: Sequence[str], points: Sequence[str]) -> str:
    """Seed 0 of ``rows`` at each search point; returns the validation-only markdown table.

    The table covers every row with a stored search run (not only ``rows``), so searching one row does not
    drop the others from the written results."""
    for point in points:
        run_all(rows, [0], SEARCH[point], folder=point_folder(point))
    searched = {row for row in ROWS if any(run_file(row, 0, point_folder(p)).exists() for p in SEARCH)}
    rows = [row for row in ROWS if row in rows or row in searched]
    lines = ["| model | " + " | ".join(SEARCH) + " | selected |", "|---|" + "---:|" * len(SEARCH) + "---|"]
    selected = {}
    for row in rows:
        cells = []
        for point in SEARCH:
            path = run_file(row, 0, point_folder(point))
            cells.append(f"{json.loads(path.read_text())['valid']['ndcg@10']:.4f}" if path.exists() else "-")
        selected[row] = selected_point(row)
        lines.append(f"| {row} | " + " | ".join(cells) + f" | {selected[row][0] if selected[row] else '-'} |")
    md = ("## ML-100K generative search: validation NDCG@10 (seed 0, all 943 validation users)\n\n"
          "One setting changed at a time from each row's config; `-`: not run. *selected*: the highest "
          "validation NDCG@10 (test numbers are stored with the runs but not read here).\n\n"
          + "\n".join(lines) + "\n")
    write_results("ml100k_generative_search", {"points": SEARCH, "rows": list(rows), "selected": selected},
                  md)
    return md


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="*", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--render-only", action="store_true", help="only aggregate the stored runs")
    parser.add_argument("--search", nargs="*", choices=list(SEARCH), default=None,
                        help="run these search points (seed 0) for --rows and print the validation table")
    parser.add_argument("--promote", nargs="*", choices=list(ROWS), default=None,
                        help="make each row's selected search point its seed 0 (its config must hold it)")
    parser.add_argument("--rgrec-weight-choice", action="store_true",
                        help="choose R-GRec's objective weight from the weight rows' validation curves")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads for this shell (with two shells on two cores, give each 1)")
    ns = parser.parse_args(argv)
    if ns.threads is not None:
        import torch

        torch.set_num_threads(ns.threads)
    if ns.promote is not None:
        for row in ns.promote:
            print(promote(row))
        return 0
    if ns.search is not None:
        print(search(ns.rows, ns.search))
        return 0
    if ns.rgrec_weight_choice:
        payload, md = rgrec_weight_choice()
        write_results("ml100k_generative_rgrec_weight", payload, md)
        print(md)
        return 0
    if not ns.render_only:
        run_all(ns.rows, ns.seeds)
    # the weight rows only choose R-GRec's weight (--rgrec-weight-choice); the chosen one is a table row,
    # so the R-GRec verdict is also scored at the weight validation chose
    chosen = chosen_rgrec_weight_row()
    runs = {row: group for row, group in load_runs().items()
            if row not in RGREC_WEIGHT_ROWS[1:] or row == chosen}
    if not runs:
        print(f"no finished runs under {RUNS}; run without --render-only first")
        return 1
    summary = summarise(runs)
    comparisons = {**paired(runs, TRIEREC_PAIRS), **paired(runs, ID_PAIRS), **paired(runs, FLASH_PAIRS),
                   **paired(runs, RGREC_PAIRS),
                   **paired(runs, [("SASRec", row) for row in runs if row != "SASRec"])}
    md = render(summary, comparisons, "python -m benchmarks.ml100k_generative")
    figure = plot(runs, comparisons, reference_lines(), FIGURE)
    md += f"\n![test NDCG@10 per row and the paired differences](../../docs/img/{figure.name})\n"
    write_results("ml100k_generative", {"summary": summary, "paired": comparisons,
                                        "runs": {row: [{k: r[k] for k in ("seed", "valid", "test",
                                                                          "best_checkpoint_epoch", "epochs")}
                                                       for r in group] for row, group in runs.items()}}, md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
