"""TRACER's verdict from paired per-user intervals, over seeds of the original model (issue 31, item 1).

For each seed of the original model, every method runs on a validation grid of **the same size for every
method** (:func:`equal_grid`: ``GRID_POINTS`` learning rates for gradient ascent, NPO, TRACER and TRACER
without reassignment, as many thresholds for suppression), the setting of each is chosen on validation
(:mod:`recframe.unlearning.selection`, forget first, then retain NDCG; the retrain reference and the
fine-tuning loops take the original's seed), and the chosen settings' test
per-user retain NDCG@10 are compared user by user: TRACER against suppression, and TRACER against TRACER
without reassignment, each as a 95 % paired bootstrap interval (``benchmarks.per_user.bootstrap_difference``)
per seed and over the seeds (each user's difference averaged over the seeds first). The retrain-from-scratch
reference (the selection rule's exposure target) trains with the original's seed.

TRACER without reassignment has one exclusive root per forget item, so it runs with the sampled-root estimate
of the concept unlikelihood (``root_sample``, :mod:`recframe.unlearning.tracer`). Where the exact ablation is
affordable (``--scale synthetic``) it runs too (``tracer@no_reassign_exact``), as a check that the estimate
does not change what the ablation finds.

Scales:

* ``synthetic`` (default; minutes at one CPU thread): a planted concept. Synthetic data (4 clusters; cluster
  "Horror" is the concept, a quarter of the items), a one-layer decoder-only model on planted codes
  (:func:`planted_codes`: every first code is shared by the concept and retain items, the fourth one is free,
  and second-level nodes mix concept and retain items at random, so suppression's threshold matters), the
  original trained with early stopping on validation (the same procedure as the retrain reference).
  Writes ``benchmarks/results/unlearning_intervals_synthetic.{json,md}``.
* ``ml100k``: the ML-100K concept configs on ``configs/decoder_collab_ml100k.yaml`` trained with
  ``seed_everything`` 0, 1, 2 (its collaborative item table keeps ``collaborative_seed: 0``, so the SID table
  is the same in every seed and only the decoder's seed changes). About 35 minutes per original model and 20
  per retrain reference at one idle CPU thread, plus the grid; hours on a 2-core machine, more than one
  session. So nothing finished is lost, even on a new checkout:

  * each finished (seed, concept) report is kept under ``benchmarks/results/ml100k_unlearning_intervals/``
    (:func:`kept_report`, version-controlled, about 30 kB) and reused while its inputs match
    (:func:`report_inputs`: concept, seed, the grid's methods, batch, the model config's text and the data
    fingerprint); a seed whose every concept is kept does not even train its original;
  * the collaborative item table the original's SIDs come from is kept there too (``item_tables/``) and
    imported into the cache before a fit (:func:`benchmarks.common.import_kept_table`);
  * an original model already trained under ``runs/unlearning_intervals/`` is reused, and one killed
    part-way resumes from its ``last.ckpt`` (:func:`ml100k_original`).

  Writes ``benchmarks/results/ml100k_unlearning_intervals.{json,md}``.

Run::

    OMP_NUM_THREADS=1 python -m benchmarks.unlearning_intervals --scale synthetic
    OMP_NUM_THREADS=1 python -m benchmarks.unlearning_intervals --scale ml100k --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.common import import_kept_table, keep_item_tables
from benchmarks.per_user import MISS, bootstrap_difference
from benchmarks.seeded_runs import slug
from recframe.unlearning.selection import EXPOSURE_FLOOR, choose_settings, expand_grid, grid_sizes

ROOT = Path(__file__).resolve().parent.parent
GRID_POINTS = 3
#: exclusive roots sampled per step for TRACER without reassignment
ROOT_SAMPLE = {"synthetic": 8, "ml100k": 16}
THRESHOLDS = (0.3, 0.5, 0.7)
LRS = {"synthetic": (3e-4, 1e-3, 3e-3), "ml100k": (3e-5, 1e-4, 3e-4)}
#: the comparisons (alternative, baseline) the verdict rests on
COMPARISONS = (("tracer", "suppression"), ("tracer", "tracer@no_reassign"))
CHECK_COMPARISON = ("tracer@no_reassign_exact", "tracer@no_reassign")

SYNTH = {"n_users": 1000, "n_items": 120, "n_clusters": 4, "mean_length": 14, "seed": 1, "seq_strength": 0.9}
SYNTH_DATA = {"dataset": "synthetic", "synthetic": SYNTH, "split": "loo", "max_len": 8, "batch_size": 64,
              "eval_batch_size": 256}
SYNTH_MODEL = {"max_len": 8, "dim": 64, "n_layers": 1, "n_heads": 2, "inner": 128, "dropout": 0.1,
               "normalize": "valid", "history_tokens": "items", "lr": 2e-3}
SYNTH_TRAIN = {"max_epochs": 20, "patience": 2, "check_val_every_n_epoch": 1}
SYNTH_LOOP = {"steps": 40, "batch_size": 32}
SYNTH_CONCEPT = 'genre == "Horror"'

MODEL_CONFIG = "configs/decoder_collab_ml100k.yaml"
#: where the ML-100K scale keeps its finished (seed, concept) reports and item tables (version-controlled)
KEPT = ROOT / "benchmarks" / "results" / "ml100k_unlearning_intervals"
CONCEPTS = ("configs/unlearn_ml100k_horror.yaml", "configs/unlearn_ml100k_pre1970.yaml")


# ------------------------------------------------------------------ the grid
def equal_grid(
    lrs: tuple[float, ...], thresholds: tuple[float, ...], root_sample: int, exact_ablation: bool = False
) -> dict[str, tuple[dict[str, Any], ...]]:
    """The validation grid: ``lrs`` for every fine-tuning family, ``thresholds`` for suppression.

    Families: ``ga``, ``npo``, ``suppression``, ``tracer``, ``tracer@no_reassign`` (sampled roots) and, with
    ``exact_ablation``, ``tracer@no_reassign_exact``.

    Raises:
        ValueError: ``lrs`` and ``thresholds`` differ in length (every method gets the same number of
            settings to choose from).
    """
    if len(lrs) != len(thresholds):
        raise ValueError(
            f"the grid gives {len(lrs)} learning rates and {len(thresholds)} suppression thresholds; give "
            "every method the same number of settings (e.g. 3 and 3)"
        )
    lr_points = tuple({"lr": float(lr)} for lr in lrs)
    grid: dict[str, tuple[dict[str, Any], ...]] = {
        "ga": lr_points, "npo": lr_points, "suppression": tuple({"threshold": float(t)} for t in thresholds),
        "tracer": lr_points, "tracer@no_reassign": lr_points,
    }
    if exact_ablation:
        grid["tracer@no_reassign_exact"] = lr_points
    return grid


def grid_methods(
    methods: dict[str, dict[str, Any]], grid: dict[str, tuple[dict[str, Any], ...]], root_sample: int
) -> dict[str, dict[str, Any]]:
    """A concept's ``methods`` with the ablation families added and every family expanded on ``grid``."""
    extra = {"tracer@no_reassign": {"reassign": False, "root_sample": int(root_sample)},
             "tracer@no_reassign_exact": {"reassign": False}}
    base = {**methods, **{k: v for k, v in extra.items() if k in grid}}
    return expand_grid(base, grid)


# ------------------------------------------------------------------ synthetic scale
def planted_codes(n_items: int, seed: int = 0, group: int = 5) -> tuple[np.ndarray, tuple[int, int, int]]:
    """Codes ``[n_items + 1, 3]`` and codebook sizes: items in a fixed random order ``p``, first code
    ``p % 3`` (the fourth first code is left free), second ``(p // 3) // group``, third ``(p // 3) % group``.

    The first codes are shared by every cluster, and each second-level node holds ``group`` items drawn
    without regard to the concept, so nodes mix concept and retain items in varying shares.
    """
    order = np.random.default_rng(seed).permutation(n_items)
    per_root = -(-n_items // 3)
    codes = np.zeros((n_items + 1, 3), dtype=np.int64)
    codes[1 + order] = np.stack([np.arange(n_items) % 3, (np.arange(n_items) // 3) // group,
                                 (np.arange(n_items) // 3) % group], axis=1)
    return codes, (4, -(-per_root // group), group)


def synthetic_original(
    seed: int, data: dict[str, Any], model_kw: dict[str, Any], train: dict[str, Any]
) -> Any:
    """The synthetic original model of ``seed``: planted codes, early stopping on validation (the retrain
    reference's own procedure, on the full data)."""
    from recframe.data.datamodule import RecDataModule
    from recframe.models.generative import SIDDecoder
    from recframe.unlearning.retrain import RetrainSettings, retrain_without

    dm = RecDataModule(**data)
    template = SIDDecoder(n_items=dm.n_items, n_users=dm.n_users, **model_kw)
    codes, sizes = planted_codes(dm.n_items)
    template.build_from_codes(codes, sizes)
    return retrain_without(template, data, np.zeros(0, dtype=np.int64), RetrainSettings(seed=seed, **train))


# ------------------------------------------------------------------ one seed
def run_seed(
    model: Any, ckpt: dict[str, Any], data: dict[str, Any], concept: str, methods: dict[str, dict[str, Any]],
    eval_batch_size: int, save_dir: Path | None = None,
) -> dict[str, Any]:
    """Every method of ``methods`` on ``model`` for ``concept``, scored on validation and test with per-user
    retain NDCG; the settings chosen on validation, and the chosen models' test ranks (compact)."""
    from recframe.unlearning.concepts import parse_concept
    from recframe.unlearning.pipeline import run_unlearning

    fingerprint = (ckpt.get("recframe") or {}).get("data_fingerprint")
    report = run_unlearning(model, ckpt, data, parse_concept(concept), methods, save_dir=save_dir,
                            eval_batch_size=eval_batch_size, stages=("valid", "test"), per_user=True,
                            resume=True, expect_fingerprint=fingerprint)
    choice = choose_settings(report["rows_by_stage"]["valid"])
    test = report.pop("per_user")["test"]
    keep = ["original", "retrain", *(c["chosen"] for c in choice.values())]
    report["choice"] = choice
    report["grid_sizes"] = grid_sizes(report["rows_by_stage"]["valid"])
    report["test_users"] = test["users"]
    report["test_top10_ranks"] = {n: rank_string(test["retain_ndcg@10"][n]) for n in keep
                                  if n in test["retain_ndcg@10"]}
    return report


def rank_string(ndcg: Iterable[float]) -> str:
    """Per-user leave-one-out NDCG@10 as one character per user: the 0-based rank, or ``MISS`` outside the
    top 10 (``benchmarks.per_user``'s format; NDCG = 1 / log2(rank + 2), checked)."""
    out = []
    for value in ndcg:
        if value <= 0:
            out.append(MISS)
            continue
        rank = int(round(2 ** (1 / value) - 2))
        if not 0 <= rank < 10 or abs(1 / np.log2(rank + 2) - value) > 1e-6:
            raise ValueError(f"NDCG@10 {value} is not a leave-one-out value 1/log2(rank + 2)")
        out.append(str(rank))
    return "".join(out)


def ndcg_of(ranks: str) -> np.ndarray:
    """The per-user NDCG@10 of a :func:`rank_string`."""
    return np.array([0.0 if c == MISS else 1.0 / np.log2(int(c) + 2) for c in ranks])


# ------------------------------------------------------------------ the comparisons
def compare(seeds: dict[str, dict[str, Any]], alternative: str, baseline: str) -> dict[str, Any]:
    """``alternative - baseline`` (families, each at its chosen setting) in test retain NDCG@10, per user:
    a paired interval per seed and over the seeds (each user's difference averaged over them)."""
    diffs, out = [], {"alternative": alternative, "baseline": baseline, "per_seed": {}}
    for seed, report in seeds.items():
        a, b = (report["choice"][f]["chosen"] for f in (alternative, baseline))
        diff = ndcg_of(report["test_top10_ranks"][a]) - ndcg_of(report["test_top10_ranks"][b])
        diffs.append(diff)
        out["per_seed"][seed] = {"chosen": [a, b], **bootstrap_difference(diff, seed=0)}
    if len({len(d) for d in diffs}) != 1 or len({tuple(r["test_users"]) for r in seeds.values()}) != 1:
        raise ValueError("the seeds' retain test users differ; the pooled interval needs the same users")
    out["pooled"] = bootstrap_difference(np.mean(diffs, axis=0), seed=0)
    return out


def verdict_line(result: dict[str, Any]) -> str:
    """One line: the pooled mean with its interval, and how many seeds' intervals exclude 0 either way."""
    pooled = result["pooled"]
    low, high = pooled["ci95"]
    above = sum(r["ci95"][0] > 0 for r in result["per_seed"].values())
    below = sum(r["ci95"][1] < 0 for r in result["per_seed"].values())
    reading = "higher" if low > 0 else "lower" if high < 0 else "not distinguishable"
    return (f"{result['alternative']} - {result['baseline']}: {pooled['mean']:+.4f} "
            f"[{low:+.4f}, {high:+.4f}] over {pooled['users']} users ({reading}); seeds with the interval "
            f"above 0: {above}, below 0: {below}, of {len(result['per_seed'])}")


# ------------------------------------------------------------------ the report
def method_seconds(payload: dict[str, Any]) -> float:
    """The seconds the reports' rows took (retrain references and every method's setting), summed over
    concepts and seeds: a command that reuses kept reports takes seconds itself, so its own time alone
    would hide what the table cost."""
    return sum(float(row.get("seconds") or 0.0) for block in payload["concepts"].values()
               for report in block["seeds"].values()
               for row in report["rows_by_stage"]["test"].values())


def markdown(payload: dict[str, Any]) -> str:
    cols = ["exposure@10", "forget_recall@10", "retain_ndcg@10", "retain_ndcg@10_rel"]
    lines = [f"# TRACER: paired per-user intervals over seeds ({payload['scale']})\n",
             f"Command: `{payload['command']}`; device {payload['device']}; "
             f"this command {payload['seconds']:.0f} s "
             f"(kept reports are read, not recomputed; their methods and retrain references took "
             f"{method_seconds(payload) / 60:.0f} min; the original models' training is not included). "
             f"Grid: {payload['grid_points']} settings per method (sizes per family: "
             f"{payload['grid_sizes']}); chosen on validation (exposure@10 at most max(retrain's, "
             f"{EXPOSURE_FLOOR:g} x original's), then the highest retain NDCG@10). Test split; intervals: "
             "95 % paired bootstrap over the retain test users (5000 draws), pooled = each user's difference "
             "averaged over the seeds first.\n"]
    for concept, block in payload["concepts"].items():
        lines.append(f"## Concept `{concept}`\n")
        for result in block["comparisons"]:
            lines.append(f"- {verdict_line(result)}")
        if block.get("check"):
            lines.append(f"- estimate check: {verdict_line(block['check'])}")
        lines += ["", "| seed | method | chosen | " + " | ".join(cols) + " |", "|---" * (len(cols) + 3) + "|"]
        for seed, report in block["seeds"].items():
            test = report["rows_by_stage"]["test"]
            names = [("original", "original"), ("retrain", "retrain"),
                     *((f, c["chosen"]) for f, c in report["choice"].items())]
            for family, name in names:
                row = test[name]
                setting = name.rsplit("@", 1)[1] if "@" in name and name != family else "–"
                cells = " | ".join(f"{row[c]:.4f}" if isinstance(row.get(c), float) else "–" for c in cols)
                lines.append(f"| {seed} | {family} | {setting} | {cells} |")
        lines.append("")
        for result in block["comparisons"] + ([block["check"]] if block.get("check") else []):
            lines.append(f"Per seed, {result['alternative']} - {result['baseline']}:\n")
            for seed, r in result["per_seed"].items():
                lines.append(f"- seed {seed} ({r['chosen'][0]} vs {r['chosen'][1]}): {r['mean']:+.4f} "
                             f"[{r['ci95'][0]:+.4f}, {r['ci95'][1]:+.4f}]")
            lines.append("")
    return "\n".join(lines)


def concept_block(seeds: dict[str, dict[str, Any]], exact_ablation: bool) -> dict[str, Any]:
    """The comparisons of one concept over its seeds' reports."""
    block = {"seeds": seeds, "comparisons": [compare(seeds, a, b) for a, b in COMPARISONS]}
    if exact_ablation:  # the ablation's comparison once more against its exact arm, and the estimate's check
        block["comparisons"].append(compare(seeds, "tracer", CHECK_COMPARISON[0]))
        block["check"] = compare(seeds, *CHECK_COMPARISON)
    return block


def device_name() -> str:
    """Where this process trains: the Lightning fits (originals, retrain references) on the GPU when one is
    visible, the fine-tuning methods and the evaluation on the CPU. Every seed and both arms of every
    comparison run in this one process, so they share these devices."""
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        return f"cuda:0 {name} (original and retrain fits); cpu (methods, evaluation)"
    return "cpu"


def run_synthetic(seeds: list[int], lrs: tuple[float, ...], thresholds: tuple[float, ...], root_sample: int,
                  log: Callable[[str], None] = print) -> dict[str, Any]:
    """The synthetic scale (module docstring): every seed, one concept, with the exact ablation check."""
    grid = equal_grid(lrs, thresholds, root_sample, exact_ablation=True)
    by_seed = {}
    for seed in seeds:
        start = time.perf_counter()
        model = synthetic_original(seed, SYNTH_DATA, SYNTH_MODEL, SYNTH_TRAIN)
        loop = {**SYNTH_LOOP, "seed": seed}
        methods = grid_methods({"retrain": {**SYNTH_TRAIN, "seed": seed}, "ga": loop, "npo": loop,
                                "suppression": {}, "tracer": loop}, grid, root_sample)
        by_seed[str(seed)] = run_seed(model, {}, SYNTH_DATA, SYNTH_CONCEPT, methods, 256)
        log(f"seed {seed}: {time.perf_counter() - start:.0f} s")
    return {SYNTH_CONCEPT: concept_block(by_seed, exact_ablation=True)}


def ml100k_original(seed: int, runs_dir: Path | None = None, config: str = MODEL_CONFIG) -> str:
    """The best checkpoint of ``config`` trained with ``seed`` in ``runs_dir/<config name>_seed<seed>``
    (default ``runs/unlearning_intervals``).

    A finished fit leaves ``finished.json`` naming its best checkpoint, which is then reused. A fit killed
    part-way (its folder holds a ``last.ckpt`` but no ``finished.json``) resumes from its furthest
    ``last.ckpt`` (:func:`benchmarks.seeded_runs.interrupted_checkpoint`), so it ends as an uninterrupted fit
    would: its ``best-*.ckpt`` so far is not the finished model's."""
    from benchmarks.seeded_runs import interrupted_checkpoint
    from recframe.checkpoint_io import atomic_write
    from recframe.runs import fit_and_test

    runs_dir = runs_dir or ROOT / "runs" / "unlearning_intervals"
    folder = runs_dir / f"{Path(config).stem}_seed{seed}"
    marker = folder / "finished.json"
    if marker.is_file():
        best = Path(json.loads(marker.read_text())["best_checkpoint"])
        if best.is_file():
            return str(best)
    resume = interrupted_checkpoint(folder.name, runs_dir) if folder.is_dir() else None
    result = fit_and_test(ROOT / config, ["--seed_everything", str(seed),
                                          "--trainer.logger.init_args.save_dir", str(runs_dir),
                                          "--trainer.logger.init_args.name", folder.name], ckpt_path=resume)
    if not result["best_checkpoint"]:
        raise SystemExit(f"{config} seed {seed}: the fit left no best-validation checkpoint")
    body = json.dumps({"best_checkpoint": str(result["best_checkpoint"]), "epochs": result["epochs"],
                       "resumed_from": str(resume) if resume else None}, default=str).encode()
    atomic_write(marker, lambda fh: fh.write(body))
    return str(result["best_checkpoint"])


def run_ml100k(seeds: list[int], lrs: tuple[float, ...], thresholds: tuple[float, ...], root_sample: int,
               concepts: list[str], log: Callable[[str], None] = print, runs_dir: Path | None = None,
               config: str = MODEL_CONFIG, kept_dir: Path | None = None) -> dict[str, Any]:
    """The ML-100K scale (module docstring): every concept config on every seed's original model of
    ``config``; the retrain reference and the fine-tuning loops take the seed too (as at the synthetic
    scale). Originals and unlearned checkpoints go under ``runs_dir`` (default
    ``runs/unlearning_intervals``); finished reports and item tables are kept in ``kept_dir`` (default
    :data:`KEPT`), and a seed whose every report is kept there is not trained again."""
    from recframe.unlearning.cli import load_config
    from recframe.unlearning.pipeline import data_settings, load_generative

    runs_dir = runs_dir or ROOT / "runs" / "unlearning_intervals"
    kept_dir = kept_dir or KEPT
    grid = equal_grid(lrs, thresholds, root_sample)
    cfgs = [load_config(ROOT / c) for c in concepts]
    fingerprint = config_data_fingerprint(config)
    out: dict[str, dict[str, Any]] = {cfg["concept"].text: {} for cfg in cfgs}
    for seed in seeds:
        todo = []
        for cfg in cfgs:
            text = cfg["concept"].text
            methods = {k: dict(v or {}) for k, v in cfg["methods"].items()}
            for name in ("retrain", "ga", "npo", "tracer"):
                if name in methods:
                    methods[name] = {**methods[name], "seed": seed}
            run = grid_methods(methods, grid, root_sample)
            batch = int(cfg.get("eval_batch_size") or 64)
            inputs = report_inputs(text, seed, run, batch, config, fingerprint)
            path = kept_report(kept_dir, seed, text)
            stored = read_finished(path, inputs)
            if stored is not None:
                log(f"seed {seed}, {text}: finished before ({path.name}), reused")
                out[text][str(seed)] = stored
            else:
                todo.append((text, run, batch, inputs, path))
        if not todo:
            continue
        collaborative = collaborative_source(config)
        if collaborative is not None:
            import_kept_table(collaborative[0], kept_dir, "SASRec", collaborative[1])
        try:
            model, ckpt = load_generative(ml100k_original(seed, runs_dir, config))
        finally:  # the table is cached before the original trains: keep it even if that fit is stopped
            if collaborative is not None:
                keep_item_tables(collaborative[0], kept_dir, "SASRec")
        if (ckpt.get("recframe") or {}).get("data_fingerprint") != fingerprint:
            raise SystemExit(f"the original of {config} seed {seed} was trained on other data (fingerprint "
                             f"{(ckpt.get('recframe') or {}).get('data_fingerprint')}, the config's data now "
                             f"{fingerprint}); delete {runs_dir} and run again.")
        data = data_settings(ckpt)
        original = {"epoch": ckpt.get("epoch"), "global_step": ckpt.get("global_step")}
        for text, run, batch, inputs, path in todo:
            save = runs_dir / f"seed{seed}" / slug(text)
            save.mkdir(parents=True, exist_ok=True)
            out[text][str(seed)] = finished_report(
                path, inputs, partial(with_original, original,
                                      partial(run_seed, model, ckpt, data, text, run, batch, save_dir=save)),
                log)
            log(f"seed {seed}, {text}: done")
    return {text: concept_block(seeds_, exact_ablation=False) for text, seeds_ in out.items()}


def kept_report(kept_dir: Path, seed: int, concept: str) -> Path:
    """Where the finished report of (``seed``, ``concept``) is kept."""
    return kept_dir / f"seed{seed}__{slug(concept)}.json"


def report_inputs(concept: str, seed: int, methods: dict[str, Any], batch: int, config: str,
                  fingerprint: str) -> dict[str, Any]:
    """What a (seed, concept) report depends on: the concept, the seed, the grid's methods, the evaluation
    batch, the original's config text (sha256) and its data's fingerprint. The original model is a function
    of these (training is deterministic under the seed), so a report kept by another checkout is the one
    this checkout would compute."""
    digest = hashlib.sha256((ROOT / config).read_bytes()).hexdigest()
    return {"concept": concept, "seed": seed, "methods": methods, "eval_batch_size": batch,
            "model_config_sha256": digest, "data_fingerprint": fingerprint}


def config_data_fingerprint(config: str) -> str:
    """The data fingerprint the original of ``config`` records (its ``data:`` section), without training."""
    import yaml

    from recframe.data.datamodule import RecDataModule

    data = yaml.safe_load((ROOT / config).read_text())["data"]
    return RecDataModule(**data).fingerprint


def collaborative_source(config: str) -> tuple[str, int] | None:
    """The item-table config and seed the SIDs of ``config`` come from (``features: collaborative``), or
    ``None`` when they come from elsewhere."""
    import yaml

    init = (yaml.safe_load((ROOT / config).read_text())["model"].get("init_args") or {})
    if init.get("features") != "collaborative" or not init.get("collaborative"):
        return None
    return str(ROOT / init["collaborative"]), int(init.get("collaborative_seed") or 0)


def with_original(original: dict[str, Any], compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``compute()``'s report with the original model it ran on (epoch, step) recorded."""
    return {**compute(), "original": original}


def read_finished(path: Path, inputs: dict[str, Any]) -> dict[str, Any] | None:
    """The report kept at ``path`` when it was computed from the same ``inputs``; ``None`` when there is
    none, it is damaged, or its inputs differ."""
    inputs = json.loads(json.dumps(inputs, default=str))
    if not path.is_file():
        return None
    try:
        stored = json.loads(path.read_text())
    except ValueError:
        return None
    if not isinstance(stored, dict) or stored.get("inputs") != inputs or "report" not in stored:
        return None
    return stored["report"]


def finished_report(path: Path, inputs: dict[str, Any], compute: Callable[[], dict[str, Any]],
                    log: Callable[[str], None] = print) -> dict[str, Any]:
    """The report of one (seed, concept): read from ``path`` when a finished one with the same ``inputs``
    is there (:func:`read_finished`), else ``compute()`` written there atomically. An ML-100K (seed,
    concept) is about 45 minutes at one thread, so a killed ``--scale ml100k`` run resumes at the next
    unfinished one. Both paths give the JSON round trip of the report (what the result file holds), so a
    resumed run's numbers equal an uninterrupted one's."""
    from recframe.checkpoint_io import atomic_write

    stored = read_finished(path, inputs)
    if stored is not None:
        log(f"{path}: finished before, reused")
        return stored
    inputs = json.loads(json.dumps(inputs, default=str))
    report = json.loads(json.dumps(compute(), default=str))
    body = json.dumps({"inputs": inputs, "report": report}, indent=1, default=str).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda fh: fh.write(body))
    return report


def ablation_cost(steps: int, root_sample: int, concepts: list[str]) -> dict[str, Any]:
    """Seconds per fine-tuning step of TRACER without reassignment on ML-100K, exact against sampled roots.

    The step's cost does not depend on trained weights, so this needs no trained model: the decoder of
    ``configs/decoder_collab_ml100k.yaml`` (its sizes) on random collision-free 3 x 64 codes (collaborative
    codes need the SASRec item table), at its initial weights, with each concept's forget items (their
    exclusive roots on these codes). ``steps`` steps per arm, the loop's default batch (64 + 64 examples).
    """
    import yaml

    from recframe.data.datamodule import RecDataModule
    from recframe.models.generative import SIDDecoder
    from recframe.unlearning.cli import load_config
    from recframe.unlearning.methods import FinetuneSettings
    from recframe.unlearning.objectives import Examples
    from recframe.unlearning.pipeline import forget_mask
    from recframe.unlearning.tracer import TracerSettings, run_tracer

    config = yaml.safe_load((ROOT / MODEL_CONFIG).read_text())
    kw = {k: v for k, v in config["model"]["init_args"].items()
          if k in ("history_tokens", "normalize", "dim", "n_layers", "n_heads", "inner", "dropout", "lr")}
    data = config["data"]
    dm = RecDataModule(**data)
    rng = np.random.default_rng(0)
    flat = rng.choice(64**3, size=dm.n_items, replace=False)
    codes = np.concatenate([np.zeros((1, 3), dtype=np.int64),
                            np.stack([flat // 4096, (flat // 64) % 64, flat % 64], axis=1)])
    torch.manual_seed(0)
    model = SIDDecoder(n_items=dm.n_items, n_users=dm.n_users, max_len=data["max_len"], **kw)
    model.build_from_codes(codes, (64, 64, 64))
    loop = FinetuneSettings(steps=steps)
    out: dict[str, Any] = {"steps": steps, "batch_size": loop.batch_size, "root_sample": root_sample}
    for path in concepts:
        cfg = load_config(ROOT / path)
        forget = forget_mask(cfg["concept"], dm)
        f_ex, r_ex = Examples.from_histories(dm.split.train.histories, dm.max_len).split(forget)
        arms = {}
        sampled = TracerSettings(reassign=False, root_sample=root_sample)
        for label, tracer in (("reassigned", TracerSettings()),
                              ("no_reassign_exact", TracerSettings(reassign=False)),
                              ("no_reassign_sampled", sampled)):
            start = time.perf_counter()
            _, info = run_tracer(model, forget, f_ex, r_ex, loop, tracer)
            arms[label] = {"seconds_per_step": round((time.perf_counter() - start) / steps, 3),
                           "exclusive_roots": info["exclusive_roots"],
                           "roots_per_step": info["roots_per_step"]}
        out[cfg["concept"].text] = arms
    return out


def cost_markdown(payload: dict[str, Any]) -> str:
    """The table of :func:`ablation_cost`."""
    cost = payload["cost"]
    lines = [
        "# TRACER without reassignment: the cost of a fine-tuning step on ML-100K\n",
        f"Command: `{payload['command']}`; device {payload['device']}; {cost['steps']} steps of "
        f"{cost['batch_size']} + {cost['batch_size']} examples per arm, the decoder of `{MODEL_CONFIG}` on "
        "random 3 x 64 codes (the cost does not depend on the weights).\n",
        "| concept | arm | exclusive roots | roots per step | seconds per step |",
        "|---|---|---:|---:|---:|",
    ]
    for concept, arms in cost.items():
        if not isinstance(arms, dict):
            continue
        for arm, row in arms.items():
            lines.append(f"| `{concept}` | {arm} | {row['exclusive_roots']} | {row['roots_per_step']} | "
                         f"{row['seconds_per_step']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", choices=("synthetic", "ml100k"), default="synthetic")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--lrs", nargs="+", type=float,
                        help="the fine-tuning methods' grid (default per scale)")
    parser.add_argument("--thresholds", nargs="+", type=float, default=list(THRESHOLDS))
    parser.add_argument("--root-sample", type=int,
                        help="roots per step without reassignment (default per scale)")
    parser.add_argument("--concepts", nargs="+", default=list(CONCEPTS), metavar="CONFIG",
                        help="with --scale ml100k: the concept configs")
    parser.add_argument("--ablation-cost", type=int, metavar="STEPS",
                        help="instead: time STEPS fine-tuning steps of the ML-100K ablation, exact against "
                             "sampled roots (writes ml100k_unlearning_ablation_cost)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--results", metavar="NAME", help="result name under benchmarks/results")
    ns = parser.parse_args(argv)
    torch.set_num_threads(ns.threads)
    lrs = tuple(ns.lrs or LRS[ns.scale])
    thresholds = tuple(ns.thresholds)
    root_sample = ns.root_sample if ns.root_sample is not None else ROOT_SAMPLE[ns.scale]
    try:
        equal_grid(lrs, thresholds, root_sample)
    except ValueError as err:
        parser.error(str(err))
    start = time.perf_counter()
    command = "python -m benchmarks.unlearning_intervals " + " ".join(sys.argv[1:] if argv is None else argv)
    if ns.ablation_cost:
        from benchmarks.common import write_results

        cost = {"device": device_name(), "threads": ns.threads, "command": command,
                "cost": ablation_cost(ns.ablation_cost, ROOT_SAMPLE["ml100k"] if ns.root_sample is None
                                      else ns.root_sample, ns.concepts)}
        cost["seconds"] = round(time.perf_counter() - start, 1)
        md = cost_markdown(cost)
        write_results(ns.results or "ml100k_unlearning_ablation_cost", cost, md)
        print(md)
        return 0
    if ns.scale == "synthetic":
        concepts = run_synthetic(ns.seeds, lrs, thresholds, root_sample)
    else:
        concepts = run_ml100k(ns.seeds, lrs, thresholds, root_sample, ns.concepts)
    sizes = {f: s for block in concepts.values() for r in block["seeds"].values()
             for f, s in r["grid_sizes"].items()}
    payload = {
        "scale": ns.scale, "seeds": ns.seeds, "device": device_name(), "threads": ns.threads,
        "grid_points": len(lrs), "grid_sizes": sizes, "lrs": list(lrs), "thresholds": list(thresholds),
        "root_sample": root_sample, "seconds": round(time.perf_counter() - start, 1),
        "command": command,
        "concepts": concepts,
    }
    if ns.scale == "synthetic":
        payload.update(data=SYNTH_DATA, model=SYNTH_MODEL, train=SYNTH_TRAIN, loop=SYNTH_LOOP)
    else:
        payload["model_config"] = MODEL_CONFIG
    from benchmarks.common import write_results

    md = markdown(payload)
    name = ns.results or ("unlearning_intervals_synthetic" if ns.scale == "synthetic"
                          else "ml100k_unlearning_intervals")
    write_results(name, payload, md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
