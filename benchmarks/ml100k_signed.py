"""Valence-aware recommendation on ML-100K, signed protocol (seed ¶4): do models keep disliked items out?

Run (after ``recframe data prepare ml-100k``)::

    python -m benchmarks.ml100k_signed --rows SiReN "LightGCN-Neg" "LightGCN + ValenceMargin" --seeds 0
    python -m benchmarks.ml100k_signed --render-only

Protocol: the ratio split of ``benchmarks/ml100k_baselines.py --split ratio`` (per-user chronological
80/10/10, all later interactions held out; conventional metrics count liked items, rating >= 4, as relevant;
signed metrics give a held-out disliked item, rating <= 2, gain -1). Each row trains from its config in
``configs/`` with ``--data.split ratio`` (early stopping on validation NDCG@10, best checkpoint tested).

Rows. Popularity (the floor), BPR-MF, LightGCN and SASRec (sign-blind: they train on every interaction),
the two sign-aware graph models (SiReN, LightGCN with the negative-aware loss, "LightGCN-Neg"), and each
embedding model again with the ValenceMargin add-on (``*_valence_ml100k_signed.yaml``).

Columns, all on the test split:

* Recall@10, NDCG@10, Signed Recall/HR/NDCG@10: the evaluator's (:mod:`recframe.metrics.signed`);
* disliked/top-10: held-out disliked items in a user's top 10, averaged over test users, from the
  evaluator's :class:`~recframe.metrics.DislikedHitsFamily` (added with ``--data.metric_families``);
* probe AUROC / score AUROC: :func:`recframe.models.signed.valence_probe` on the tested model (a logistic
  probe on frozen ``q_u ⊙ e_i``, trained on training pairs, AUROC on test pairs; and the AUROC of the
  model's own inner product on the same pairs); ``-`` for Popularity (no embeddings);
* NDCG@10 / Pop: a row below 1 is flagged, as a baseline that loses to Popularity is a bug.

Below the table: Kendall's tau between the model rankings under a conventional metric and its signed
counterpart (NDCG@10 vs Signed NDCG@10, Recall@10 vs Signed Recall@10; ``scipy.stats.kendalltau`` over the
rows' seed means). Every run writes ``benchmarks/results/ml100k_signed/ROW__seedS.json`` as it finishes
(a run killed mid-way resumes from its ``last.ckpt`` under ``runs/signed_ROW__seedS``); ``--render-only``
(and every run) builds ``benchmarks/results/ml100k_signed.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import RESULTS, claim, fit_and_test, write_results
from benchmarks.devices import refusal
from recframe.checkpoint_io import atomic_write

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
RUNS = RESULTS / "ml100k_signed"
RUN_LOGS = Path("runs")
MARGIN_SEARCH = RESULTS / "ml100k_signed_margin_search"
#: the ValenceMargin weights --margin-search tries, and the share of Recall@10 the chosen one must keep
MARGIN_WEIGHTS = (0.01, 0.03, 0.1, 0.3)
#: tried next, for a model none of whose MARGIN_WEIGHTS keeps the budget (the grid continues downward in the
#: same steps of about 3x: a model whose scores span a wider range needs a smaller weight)
MARGIN_WEIGHTS_LOW = (0.001, 0.003)
RECALL_BUDGET = 0.95
ROWS: dict[str, str] = {
    "Popularity": "popularity_ml100k.yaml",
    "BPR-MF": "bprmf_ml100k.yaml",
    "BPR-MF + ValenceMargin": "bprmf_valence_ml100k_signed.yaml",
    "LightGCN": "lightgcn_ml100k.yaml",
    "LightGCN + ValenceMargin": "lightgcn_valence_ml100k_signed.yaml",
    "SASRec": "sasrec_ml100k.yaml",
    "SASRec + ValenceMargin": "sasrec_valence_ml100k_signed.yaml",
    "SiReN": "sirens_ml100k_signed.yaml",
    "SiReN + ValenceMargin": "sirens_valence_ml100k_signed.yaml",
    "LightGCN-Neg": "lightgcn_neg_ml100k_signed.yaml",
    "LightGCN-Neg + ValenceMargin": "lightgcn_neg_valence_ml100k_signed.yaml",
}
FAMILIES = [{"class_path": "recframe.metrics.DislikedHitsFamily"}]
#: the table's metric columns (test split), in order
METRICS = ("recall@10", "ndcg@10", "signed_recall@10", "signed_hr@10", "signed_ndcg@10", "disliked_hits@10")
#: metrics compared per user between a model with and without ValenceMargin (paired bootstrap)
PAIRED_METRICS = ("recall@10", "ndcg@10", "signed_ndcg@10", "disliked_hits@10")
#: (conventional, signed) metric pairs whose model rankings Kendall's tau compares
TAU_PAIRS = (("ndcg@10", "signed_ndcg@10"), ("recall@10", "signed_recall@10"))


def slug(row: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in row).strip("_")


def run_file(row: str, seed: int) -> Path:
    return RUNS / f"{slug(row)}__seed{seed}.json"


def per_user_values(model: Any, dm: Any) -> dict[str, dict[str, float]]:
    """Each test user's value of every :data:`PAIRED_METRICS` entry, keyed by raw user id (users outside a
    metric's average left out), from the model's own evaluator (:meth:`FullRankingEvaluator.per_user`): the
    terms whose mean the table reports, for paired per-user comparisons."""
    users = dm.split.train.user_ids
    out: dict[str, dict[str, float]] = {metric: {} for metric in PAIRED_METRICS}
    with torch.no_grad():
        for batch in dm.test_dataloader():
            values = model.evaluator.per_user(model.eval_scores(batch, "test"), batch["targets"],
                                              batch["labels"], batch["seen"])
            raw = [str(users[u]) for u in batch["users"].tolist()]
            for metric in PAIRED_METRICS:
                value, mask = values[metric]
                out[metric].update((user, round(float(v), 6))
                                   for user, v, m in zip(raw, value.tolist(), mask.tolist()) if m)
    return out


def probe_hook(model: Any, dm: Any) -> dict[str, Any]:
    """``after_test``: each test user's metric values, and the valence probe of the tested model (``None``
    for a model without embeddings)."""
    per_user = per_user_values(model, dm)
    if not callable(getattr(model, "item_embeddings", None)):
        return {"probe": None, "per_user": per_user}
    from recframe.models.signed import valence_probe

    return {"probe": valence_probe(model, dm.split, max_len=dm.max_len), "per_user": per_user}


def paired_addon_gains(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per model with and without ValenceMargin (both rows with per-user values): for each of
    :data:`PAIRED_METRICS`, the mean per-user difference (with − without; each user's value averaged over
    the row's seeds first, users present in both) with a 95 % paired bootstrap interval."""
    import numpy as np

    from benchmarks.per_user import bootstrap_difference

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for row in runs:
        with_addon = f"{row} + ValenceMargin"
        both = [runs[r] for r in (row, with_addon) if r in runs]
        if len(both) < 2 or not all(run.get("per_user") for group in both for run in group):
            continue
        refused = refusal(*both)  # never pair a GPU run with a CPU run (benchmarks/devices.py)
        if refused is not None:
            out[with_addon] = refused
            continue
        out[with_addon] = {}
        for metric in PAIRED_METRICS:
            means = [{user: statistics.fmean(run["per_user"][metric][user] for run in group)
                      for user in set.intersection(*(set(run["per_user"][metric]) for run in group))}
                     for group in both]
            users = sorted(set(means[0]) & set(means[1]))
            diff = np.array([means[1][u] - means[0][u] for u in users])
            out[with_addon][metric] = bootstrap_difference(diff)
    return out


def margin_override(weight: float) -> list[str]:
    """CLI override replacing a ``+ ValenceMargin`` config's add-on by one of weight ``weight`` (margin 1.0,
    every config's)."""
    addon = [{"class_path": "recframe.models.signed.ValenceMargin",
              "init_args": {"weight": weight, "margin": 1.0}}]
    return ["--model.init_args.addons", json.dumps(addon)]


def choose_margin_weight(base: dict[str, float], found: dict[float, dict[str, float]]) -> float | None:
    """The largest weight whose validation metrics ``found[weight]`` keep ``RECALL_BUDGET`` of ``base``'s
    Recall@10 and have fewer disliked items per top 10 (``None`` when no weight does)."""
    ok = [w for w, v in found.items() if v["recall@10"] >= RECALL_BUDGET * base["recall@10"]
          and v["disliked_hits@10"] < base["disliked_hits@10"]]
    return max(ok, default=None)


def margin_search(rows: list[str], weights: tuple[float, ...], max_time: str | None,
                  train: tuple[float, ...] | None = None, train_rows: set[str] | None = None) -> str:
    """Choose ValenceMargin's weight per model on validation alone (seed 0) and return the table.

    Each ``ROW + ValenceMargin`` trains at every weight in ``weights``; the chosen weight is the largest whose
    validation Recall@10 stays within :data:`RECALL_BUDGET` of the model without the add-on (its seed-0 run in
    the table, which must exist) while lowering validation disliked/top-10, the issue's criterion read on
    validation. Runs are stored under ``ml100k_signed_margin_search/``; no test number is shown.

    ``train`` (default: all of ``weights``) are the weights this process may train; the others are read when
    stored (so several processes can each train a part of the grid). A row whose grid is not complete gets
    no choice. A row for which no weight of the complete grid qualifies continues with
    :data:`MARGIN_WEIGHTS_LOW`. ``train_rows`` (default: all of ``rows``) are the rows this process may train;
    the others are only read (the table keeps rows searched before without extending their search).
    """
    MARGIN_SEARCH.mkdir(parents=True, exist_ok=True)
    lines = ["## ValenceMargin weight, chosen on validation (seed 0)", "",
             f"Rule: the largest weight whose validation Recall@10 is at least {RECALL_BUDGET:.0%} of the "
             "model without the add-on while its validation disliked/top-10 is lower. Validation only.", "",
             "| model | weight | validation recall@10 | / without | validation disliked/top-10 | chosen |",
             "|---|---:|---:|---:|---:|---|"]
    for row in rows:
        base_row = row.removesuffix(" + ValenceMargin")
        if base_row == row or not run_file(base_row, 0).exists():
            raise SystemExit(f"{row}: needs a '+ ValenceMargin' row whose base row has a seed-0 run "
                             f"({run_file(base_row, 0).name}); run it first")
        base = json.loads(run_file(base_row, 0).read_text())["valid"]
        found: dict[float, dict[str, float]] = {}
        chosen, grid = None, tuple(weights)
        for extension in (tuple(weights), MARGIN_WEIGHTS_LOW):
            if extension is MARGIN_WEIGHTS_LOW:
                if chosen is not None or len(found) < len(grid):
                    break  # a weight was chosen, or the grid so far is not complete: no extension
                grid = grid + extension
            for weight in extension:
                path = MARGIN_SEARCH / f"{slug(row)}__w{weight:g}.json"
                trainable = (train_rows is None or row in train_rows) and (train is None or weight in train)
                if not path.exists() and not trainable:
                    continue
                if not path.exists():
                    print(f"[run] {row} weight {weight:g}", flush=True)
                    result = {"row": row, "weight": weight,
                              **run_one(row, 0, max_time, margin_override(weight),
                                        f"signedsearch_{path.stem}", probe=False)}
                    text = json.dumps(result, indent=2, default=str).encode()
                    atomic_write(path, lambda fh, t=text: fh.write(t))
                found[weight] = json.loads(path.read_text())["valid"]
            chosen = choose_margin_weight(base, found) if len(found) == len(grid) else None
        lines.append(f"| {base_row} | 0 | {base['recall@10']:.4f} | 1.00 | "
                     f"{base['disliked_hits@10']:.3f} | |")
        for weight, v in sorted(found.items()):
            ratio = v["recall@10"] / base["recall@10"]
            lines.append(f"| {row} | {weight:g} | {v['recall@10']:.4f} | {ratio:.2f} | "
                         f"{v['disliked_hits@10']:.3f} | {'**chosen**' if weight == chosen else ''} |")
    return "\n".join(lines) + "\n"


def run_one(row: str, seed: int, max_time: str | None, extra: list[str] | None = None,
            name: str | None = None, probe: bool = True) -> dict[str, Any]:
    """Fit and test one row and seed (resuming its ``last.ckpt``); ``extra`` CLI overrides, ``name`` the log
    name (default ``signed_ROW__seedS``), ``probe`` whether to run the after-test hook."""
    name = name or "signed_" + run_file(row, seed).stem
    args = ["--seed_everything", str(seed), "--data.split", "ratio", "--data.metric_families",
            json.dumps(FAMILIES), "--trainer.logger.init_args.name", name, *(extra or [])]
    if max_time:
        args += ["--trainer.max_time", max_time]
    resume = max((RUN_LOGS / name).glob("version_*/checkpoints/last.ckpt"), default=None,
                 key=lambda p: p.stat().st_mtime)
    return fit_and_test(CONFIGS / ROWS[row], args, ckpt_path=resume, after_test=probe_hook if probe else None)


def run_all(rows: list[str], seeds: list[int], max_time: str | None) -> None:
    RUNS.mkdir(parents=True, exist_ok=True)
    for row in rows:
        for seed in seeds if row != "Popularity" else [0]:  # Popularity has nothing random
            path = run_file(row, seed)
            if path.exists():
                continue
            with claim(RUN_LOGS / f"signed_{path.stem}.claim") as mine:
                if not mine or path.exists():
                    continue
                print(f"[run] {row} seed {seed}", flush=True)
                result = {"row": row, "seed": seed, **run_one(row, seed, max_time)}
                text = json.dumps(result, indent=2, default=str).encode()
                atomic_write(path, lambda fh, t=text: fh.write(t))
                print(f"[done] {row} seed {seed}: ndcg@10 {result['test']['ndcg@10']:.4f} signed_ndcg@10 "
                      f"{result['test']['signed_ndcg@10']:.4f}", flush=True)


def load_runs(folder: Path = RUNS) -> dict[str, list[dict[str, Any]]]:
    """Every stored run, grouped by row (in :data:`ROWS` order), sorted by seed."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.json")):
        run = json.loads(path.read_text())
        grouped.setdefault(run["row"], []).append(run)
    return {row: sorted(grouped[row], key=lambda r: r["seed"]) for row in ROWS if row in grouped}


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per row: seeds, and ``(mean, std)`` over seeds of every metric column, probe AUROCs and train time."""
    summary: dict[str, dict[str, Any]] = {}
    for row, group in runs.items():
        entry: dict[str, Any] = {"seeds": [r["seed"] for r in group]}
        for metric in METRICS:
            values = [r["test"][metric] for r in group if metric in r["test"]]
            if values:
                entry[metric] = _mean_std(values)
        for key in ("probe_auroc", "score_auroc"):
            values = [r["probe"][key] for r in group if r.get("probe")]
            if values:
                entry[key] = _mean_std(values)
        entry["train_seconds"] = _mean_std([float(r["train_seconds"]) for r in group])
        entry["epochs"] = _mean_std([float(r["epochs"]) for r in group])
        entry["gpu_seeds"] = sum(str(r.get("device", "cpu")).startswith("cuda") for r in group)
        summary[row] = entry
    return summary


def _family(row: str) -> str:
    """A row's model family: its name without the add-on (``"SASRec + ValenceMargin"`` -> ``"SASRec"``)."""
    return row.split(" + ")[0]


def tau_subsets(rows: list[str]) -> dict[str, list[str]]:
    """The row sets Kendall's tau is reported over: every row; the distinct models only (one row per family,
    the add-on variants left out); and every row without each family in turn (which family drives tau)."""
    families = list(dict.fromkeys(_family(r) for r in rows))
    subsets = {"all rows": list(rows), "distinct models": [r for r in rows if r == _family(r)]}
    for family in families:
        subsets[f"without {family}"] = [r for r in rows if _family(r) != family]
    return subsets


def kendall_taus(summary: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Kendall's tau (and its p-value) between the rows' rankings under each pair of :data:`TAU_PAIRS`,
    over every row set of :func:`tau_subsets` (keys ``"<conventional> vs <signed>"`` for all rows,
    ``"<conventional> vs <signed> | <subset>"`` for the others)."""
    from scipy.stats import kendalltau

    out = {}
    for conventional, signed in TAU_PAIRS:
        rows = [r for r, e in summary.items() if conventional in e and signed in e]
        for subset, members in tau_subsets(rows).items():
            if len(members) < 3:
                continue
            first = [summary[r][conventional][0] for r in members]
            second = [summary[r][signed][0] for r in members]
            result = kendalltau(first, second)
            key = f"{conventional} vs {signed}" + ("" if subset == "all rows" else f" | {subset}")
            out[key] = {"tau": float(result.statistic), "p_value": float(result.pvalue),
                        "n_rows": len(members)}
    return out


def _cell(entry: dict[str, Any], key: str, fmt: str = ".4f") -> str:
    if key not in entry:
        return "-"
    mean, std = entry[key]
    return format(mean, fmt) + (f" ± {format(std, fmt)}" if len(entry["seeds"]) > 1 else "")


def markdown(summary: dict[str, dict[str, Any]], taus: dict[str, dict[str, float]]) -> str:
    floor = summary.get("Popularity", {}).get("ndcg@10", (None,))[0]
    lines = ["## ML-100K, signed protocol: valence-aware recommendation (seed ¶4)", "",
             "Command: `python -m benchmarks.ml100k_signed` (per-user chronological 80/10/10, all later "
             "interactions held out, test split; mean ± std over seeds where there are several).", "",
             "| model | seeds | recall@10 | ndcg@10 | signed_recall@10 | signed_hr@10 | signed_ndcg@10 | "
             "disliked/top-10 | probe AUROC | score AUROC | ndcg@10 / Pop | train s | epochs |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row, e in summary.items():
        ratio = "-"
        if floor and "ndcg@10" in e:
            value = e["ndcg@10"][0] / floor
            ratio = f"{value:.2f}" + (" (below Popularity)" if value < 1 else "")
        cells = [str(len(e["seeds"])), *(_cell(e, m) for m in METRICS[:5]), _cell(e, METRICS[5], ".3f"),
                 _cell(e, "probe_auroc", ".3f"), _cell(e, "score_auroc", ".3f"), ratio,
                 f"{e['train_seconds'][0]:.0f}" + (f" †{e['gpu_seeds']}" if e.get("gpu_seeds") else ""),
                 f"{e['epochs'][0]:.0f}"]
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    if any(e.get("gpu_seeds") for e in summary.values()):
        lines += ["", "†n: n of the row's seeds trained on a lent GPU (each run's JSON names the device); "
                  "the row's train s mixes GPU and CPU times and is not a speed comparison."]
    if taus:
        lines += ["", "Kendall's tau between the model rankings under a conventional metric and its signed "
                  "counterpart (1: the same order; lower: the signed metric reorders the table):", "",
                  "| metrics | rows | tau | p-value | n rows |", "|---|---|---:|---:|---:|"]
        for name, t in taus.items():
            metrics, _, subset = name.partition(" | ")
            lines.append(f"| {metrics} | {subset or 'all rows'} | {t['tau']:.3f} | {t['p_value']:.3f} "
                         f"| {t['n_rows']} |")
    return "\n".join(lines) + "\n"


def paired_markdown(gains: dict[str, dict[str, dict[str, Any]]]) -> str:
    """The ValenceMargin gains table ("no significant difference" where the interval covers 0)."""
    if not gains:
        return ""
    lines = ["", "ValenceMargin's effect per model, paired per test user (with − without; each user's value "
             "averaged over the seeds first; 95 % bootstrap interval):", "",
             "| model | " + " | ".join(PAIRED_METRICS) + " |", "|---|" + "---|" * len(PAIRED_METRICS)]
    for row, metrics in gains.items():
        if "refused" in metrics:
            lines.append(f"| {row} | not compared: {metrics['refused']} |" + " |" * (len(PAIRED_METRICS) - 1))
            continue
        cells = []
        for metric in PAIRED_METRICS:
            d = metrics[metric]
            low, high = d["ci95"]
            cells.append(f"{d['mean']:+.4f} [{low:+.4f}, {high:+.4f}]"
                         + ("" if d["significant"] else " (no significant difference)"))
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render(folder: Path = RUNS, write: bool = True) -> str:
    runs = load_runs(folder)
    summary = summarise(runs)
    taus = kendall_taus(summary)
    gains = paired_addon_gains(runs)
    md = markdown(summary, taus) + paired_markdown(gains)
    if write:
        write_results("ml100k_signed", {"split": "ratio", "rows": summary, "kendall_tau": taus,
                                        "valence_margin_paired": gains}, md)
    return md


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (1 on a shared machine)")
    parser.add_argument("--max-time", metavar="DD:HH:MM:SS",
                        help="override the configs' trainer.max_time (10 minutes), recorded with each run; "
                             "on a loaded machine it lets early stopping end a run as it would when idle")
    parser.add_argument("--render-only", action="store_true")
    parser.add_argument("--margin-weights", nargs="+", type=float, metavar="W",
                        help="with --margin-search: train only these weights of the grid (read the others "
                             "when stored), e.g. to split the search over processes")
    parser.add_argument("--margin-search", action="store_true",
                        help="choose ValenceMargin's weight on validation for the '+ ValenceMargin' rows")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.margin_search:
        # the table keeps every row searched before (stored runs are read, not retrained)
        searched = {json.loads(f.read_text())["row"] for f in MARGIN_SEARCH.glob("*.json")}
        rows = [row for row in ROWS
                if row.endswith(" + ValenceMargin") and (row in searched or row in args.rows)]
        bad = sorted(set(args.margin_weights or ()) - set(MARGIN_WEIGHTS) - set(MARGIN_WEIGHTS_LOW))
        if bad:
            grid = list(MARGIN_WEIGHTS_LOW + MARGIN_WEIGHTS)
            parser.error(f"--margin-weights {bad} are not in the grid {grid}")
        md = margin_search(rows, MARGIN_WEIGHTS, args.max_time,
                           tuple(args.margin_weights) if args.margin_weights else None, set(args.rows))
        atomic_write(RESULTS / "ml100k_signed_margin_search.md", lambda fh: fh.write(md.encode()))
        print(md)
        return
    if not args.render_only:
        run_all(args.rows, args.seeds, args.max_time)
    print(render())


if __name__ == "__main__":
    main()
