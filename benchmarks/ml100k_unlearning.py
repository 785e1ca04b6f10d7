"""Concept unlearning on ML-100K: GA, NPO, suppression and TRACER against retraining without the concept.

The model is the best generative configuration, ``configs/decoder_collab_ml100k.yaml`` (decoder-only,
collaborative semantic IDs), trained once (or reused with ``--checkpoint``); for each concept config
(``configs/unlearn_ml100k_horror.yaml``, ``configs/unlearn_ml100k_pre1970.yaml``) the retrain-from-scratch
reference is trained and every method runs with the config's settings
(:func:`recframe.unlearning.pipeline.run_unlearning`). Writes
``benchmarks/results/ml100k_unlearning.{json,md}``:
per concept, exposure@10, forget Recall@10, retain NDCG@10 (absolute and relative to the original model) and
the distance to the retrained model (1 - overlap@10).

Run (about 20 CPU minutes for the original model, about as long per concept for its retrained reference, and
a few minutes per fine-tuning method and evaluation)::

    OMP_NUM_THREADS=1 python -m benchmarks.ml100k_unlearning --threads 1

``--smoke`` runs the same pipeline on the tiny synthetic smoke decoder (2 epochs, a few steps per method) in
seconds and writes to ``--out`` (default ``runs/unlearning_smoke``) instead of ``benchmarks/results``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch

from recframe.checkpoint_io import atomic_write
from recframe.unlearning.cli import load_config
from recframe.unlearning.concepts import parse_concept
from recframe.unlearning.pipeline import data_settings, load_generative, report_table, run_unlearning
from recframe.unlearning.selection import EXPOSURE_FLOOR, choose_settings, expand_grid, grid_sizes

ROOT = Path(__file__).resolve().parent.parent
MODEL_CONFIG = "configs/decoder_collab_ml100k.yaml"
CONCEPTS = ("configs/unlearn_ml100k_horror.yaml", "configs/unlearn_ml100k_pre1970.yaml")
SMOKE_METHODS = {
    "retrain": {"max_epochs": 2, "patience": 0},
    "ga": {"steps": 5, "batch_size": 16, "lr": 1e-3},
    "npo": {"steps": 5, "batch_size": 16, "lr": 1e-3},
    "suppression": {"threshold": 0.5},
    "tracer": {"steps": 5, "batch_size": 16, "lr": 1e-3},
}
SMOKE_CONCEPTS = ('genre == "Horror"', "year < 1990")
#: ``--tune``: each method's settings tried on validation (recframe.unlearning.selection chooses one); the
#: learning rate is the fine-tuning methods' main knob (a factor of ~3 around the configs' 1e-4), the masking
#: threshold suppression's; ``tracer@no_reassign`` is TRACER without its code reassignment, tuned alike. Every
#: method gets the same number of settings (3: GA, NPO, TRACER and the ablation 3 learning rates each,
#: suppression 3 thresholds); a grid or a merge that gives one method more is refused.
LRS = (3e-5, 1e-4, 3e-4)
THRESHOLDS = (0.3, 0.5, 0.7)
#: exclusive roots sampled per step by the ablation: without reassignment every forget item is its own root
#: (92-179), and the exact concept unlikelihood took over ten times TRACER's fine-tuning time
ABLATION_ROOT_SAMPLE = 16
TUNE_EXTRA = {"tracer@no_reassign": {"reassign": False, "root_sample": ABLATION_ROOT_SAMPLE}}


def tune_grid(
    lrs: tuple[float, ...] = LRS, thresholds: tuple[float, ...] = THRESHOLDS
) -> dict[str, tuple[dict[str, Any], ...]]:
    """The ``--tune`` grid: ``lrs`` for every fine-tuning method, ``thresholds`` for suppression.

    Raises:
        ValueError: ``lrs`` and ``thresholds`` differ in length (every method gets as many settings).
    """
    if len(lrs) != len(thresholds):
        raise ValueError(
            f"--lrs gives {len(lrs)} settings and --thresholds {len(thresholds)}; give every method the same "
            "number of settings to choose from (e.g. 3 and 3)"
        )
    points = tuple({"lr": lr} for lr in lrs)
    return {"ga": points, "npo": points, "suppression": tuple({"threshold": t} for t in thresholds),
            "tracer": points, "tracer@no_reassign": points}


TUNE_GRID = tune_grid()


def device_summary() -> str:
    """Where this process trains: Lightning fits (the original, the retrain reference) on the GPU when one
    is visible, the fine-tuning methods and every evaluation on the CPU (the checkpoints load there)."""
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        return f"cuda:0 {name} (original and retrain fits); cpu (methods, evaluation)"
    return "cpu"


def train_original(config: str, extra: list[str]) -> tuple[str, dict[str, Any]]:
    """Fit ``config`` (plus overrides) and return its best checkpoint and the fit summary."""
    from benchmarks.common import fit_and_test

    result = fit_and_test(ROOT / config if not Path(config).is_absolute() else config, extra)
    if not result["best_checkpoint"]:
        raise SystemExit(f"{config}: the fit left no best-validation checkpoint")
    return result["best_checkpoint"], result


def run(
    concepts: list[tuple[str, dict[str, dict[str, Any]]]],
    checkpoint: str,
    save_root: Path | None,
    eval_batch_size: int,
    on_concept: Any = None,
    reuse_retrain: bool = False,
    stages: tuple[str, ...] = ("test",),
) -> dict[str, Any]:
    """Every concept's report on the model of ``checkpoint``; ``on_concept(payload)``, if given, is called
    with the payload so far after each concept (the benchmark writes its result files there, so a long run
    keeps every finished concept). ``reuse_retrain``: a concept's retrained reference stored by an earlier run
    (``<save_root>/<concept>/retrain.ckpt``) is loaded instead of trained again."""
    model, ckpt = load_generative(checkpoint)
    data = data_settings(ckpt)
    reports = {}
    for text, methods in concepts:
        slug = "".join(ch if ch.isalnum() else "_" for ch in text).strip("_")
        save = None if save_root is None else save_root / slug
        if save is not None:
            save.mkdir(parents=True, exist_ok=True)
        reuse = None
        if reuse_retrain and save is not None and (save / "retrain.ckpt").exists():
            print(f"{text}: reusing the retrained reference {save / 'retrain.ckpt'}", flush=True)
            reuse = {"retrain": load_generative(save / "retrain.ckpt")[0]}
        reports[text] = run_unlearning(
            model,
            ckpt,
            data,
            parse_concept(text),
            methods,
            save_dir=save,
            eval_batch_size=eval_batch_size,
            expect_fingerprint=(ckpt.get("recframe") or {}).get("data_fingerprint"),
            reuse=reuse,
            stages=stages,
        )
        if "valid" in stages:
            reports[text]["choice"] = choose_settings(reports[text]["rows_by_stage"]["valid"])
        if on_concept is not None:
            on_concept({"checkpoint": str(checkpoint), "data": data, "concepts": dict(reports)})
    return {"checkpoint": str(checkpoint), "data": data, "concepts": reports}


def markdown(payload: dict[str, Any], title: str) -> str:
    lines = [
        f"# {title}\n",
        f"Model: `{payload['model_config']}`; test users, exact full ranking. Exposure = share "
        "of top-10 slots holding concept items; forget Recall@10 over test cases whose target is a concept "
        "item; retain NDCG@10 over the others (rel = / original); distance = 1 - overlap@10 with the "
        "model retrained without the concept's rows.\n",
    ]
    for text, report in payload["concepts"].items():
        lines.append(
            f"## Concept `{text}` ({report['details']['forget_items']} items; test cases: "
            f"{report['test_cases']['forget']} forget, {report['test_cases']['retain']} retain)\n"
        )
        lines.append(report_table(report))
    return "\n".join(lines)


def tune_methods(
    methods: dict[str, dict[str, Any]],
    lrs: tuple[float, ...] = LRS,
    thresholds: tuple[float, ...] = THRESHOLDS,
) -> dict[str, dict[str, Any]]:
    """A concept config's ``methods`` expanded into the validation grid of ``--tune``."""
    return expand_grid({**methods, **TUNE_EXTRA}, tune_grid(lrs, thresholds))


def merge_tuned(payloads: list[dict[str, Any]]) -> dict[str, Any]:
    """Tuned runs of the same model combined: per concept the union of their rows (the first payload's
    ``original`` and ``retrain`` rows, variants from all), and the choice made again on the union's
    validation rows (e.g. a grid extended by a later run with ``--lrs``)."""
    if not payloads:
        raise SystemExit("--merge needs at least one result name")
    out = {k: v for k, v in payloads[0].items() if k != "concepts"}
    out["merged_from"] = [p.get("command") for p in payloads]
    out["concepts"] = {}
    for payload in payloads:
        first = payloads[0]
        if payload.get("data") != first.get("data") or payload["checkpoint"] != first["checkpoint"]:
            raise SystemExit("--merge: the result files come from different models or data")
        for text, report in payload["concepts"].items():
            merged = out["concepts"].setdefault(text, {**report, "rows_by_stage": {}, "details": {}})
            for stage, rows in report["rows_by_stage"].items():
                target = merged["rows_by_stage"].setdefault(stage, {})
                for name, row in rows.items():
                    target.setdefault(name, row)
            for name, detail in report["details"].items():
                merged["details"].setdefault(name, detail)
    for text, report in out["concepts"].items():
        sizes = grid_sizes(report["rows_by_stage"]["valid"])
        if len(set(sizes.values())) > 1:
            raise SystemExit(
                f"--merge: concept {text!r}: the merged grid gives the methods different numbers of settings "
                f"({sizes}); extend every method's grid alike (the comparison needs equal grid sizes)"
            )
        report["grid_sizes"] = sizes
        report["rows"] = report["rows_by_stage"]["test"]
        report["choice"] = choose_settings(report["rows_by_stage"]["valid"])
    return out


def evaluate_saved(
    checkpoint: str, text: str, names: list[str], folder: Path, eval_batch_size: int
) -> dict[str, Any]:
    """A concept's report (both stages, the settings chosen on validation) from the unlearned checkpoints an
    earlier ``--tune`` run saved under ``folder`` (``NAME__LABEL.ckpt``), without fine-tuning again: a run
    stopped before it wrote its report is finished this way. Names without a saved checkpoint are skipped."""
    import numpy as np

    from recframe.checkpoint_io import load_checkpoint
    from recframe.data.datamodule import RecDataModule
    from recframe.unlearning.pipeline import evaluate_stages, forget_mask, stage_rows

    model, ckpt = load_generative(checkpoint)
    dm = RecDataModule(**data_settings(ckpt))
    forget = forget_mask(parse_concept(text), dm)
    stages = ("valid", "test")
    results = {"original": (evaluate_stages(model, dm, forget, eval_batch_size, stages), 0.0)}
    details: dict[str, Any] = {}
    for name in ["retrain", *names]:
        path = folder / f"{name.replace('@', '__')}.ckpt"
        if not path.exists():
            print(f"{name}: no saved checkpoint, skipped", flush=True)
            continue
        details[name] = load_checkpoint(path).get("unlearning") or {}
        unlearned = load_generative(path)[0]
        results[name] = (evaluate_stages(unlearned, dm, forget, eval_batch_size, stages), float("nan"))
        print(f"{name}: evaluated", flush=True)
    by_stage = stage_rows(results, stages)
    original = results["original"][0]["test"]
    return {"concept": text, "rows": by_stage["test"], "rows_by_stage": by_stage,
            "details": {"forget_items": int(np.sum(forget)), **details},
            "test_cases": {"forget": original.n_forget_cases, "retain": original.n_retain_cases},
            "choice": choose_settings(by_stage["valid"]), "evaluated_from_saved": True}


def tuned_markdown(payload: dict[str, Any]) -> str:
    """The validation grid (validation numbers only) and the chosen variants' test rows, per concept."""
    cols = ["exposure@10", "forget_recall@10", "retain_ndcg@10", "retain_ndcg@10_rel",
            "distance_to_retrain@10"]
    head = "| method | setting | " + " | ".join(cols) + " |\n" + "|---" * (len(cols) + 2) + "|"

    def cells(row: dict[str, Any]) -> str:
        return " | ".join(f"{row[c]:.4f}" if isinstance(row.get(c), float) else "–" for c in cols)

    lines = [
        "# Concept unlearning on ML-100K, every method's settings chosen on validation\n",
        f"Model: `{payload['model_config']}` (seed 0). Grid: every setting in the validation table; rule "
        f"(`recframe.unlearning.selection`): among the settings whose validation exposure@10 is at most "
        f"max(retrain's, {EXPOSURE_FLOOR:g} x original's), the highest validation retain NDCG@10 (else the "
        "lowest exposure). Test rows are the chosen settings'; distance = 1 - overlap@10 with the retrained "
        "model.\n",
    ]
    for text, report in payload["concepts"].items():
        valid, test = report["rows_by_stage"]["valid"], report["rows_by_stage"]["test"]
        chosen = {c["chosen"]: family for family, c in report["choice"].items()}
        lines += [f"## Concept `{text}` ({report['details']['forget_items']} items)\n",
                  "Validation (the grid):\n", head]
        for name, row in valid.items():
            family, _, setting = name.rpartition("@") if "@" in name else (name, "", "")
            mark = " **chosen**" if name in chosen else ""
            lines.append(f"| {family or name} | {setting}{mark} | {cells(row)} |")
        lines += ["", "Test (original, retrain reference and each method at its chosen setting):\n", head]
        for name, row in test.items():
            if name in ("original", "retrain") or name in chosen:
                family, _, setting = name.rpartition("@") if "@" in name else (name, "", "")
                eligible = name not in chosen or report["choice"][chosen[name]]["eligible"]
                flag = "" if eligible else " (none eligible)"
                lines.append(f"| {family or name} | {setting}{flag} | {cells(row)} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny synthetic run (seconds)")
    parser.add_argument("--checkpoint", help="reuse a trained model's checkpoint instead of fitting")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="runs/unlearning_smoke", help="smoke output folder")
    parser.add_argument("--concepts", nargs="+", default=list(CONCEPTS), metavar="CONFIG",
                        help="the concept configs to run (default: both ML-100K concepts)")
    parser.add_argument("--methods", nargs="+", metavar="NAME",
                        help="run only these of the configs' methods (e.g. `retrain` alone on a GPU)")
    parser.add_argument("--tune", action="store_true",
                        help="choose every method's setting on validation (TUNE_GRID) and report the chosen "
                             "settings' test rows (writes ml100k_unlearning_tuned.{json,md})")
    parser.add_argument("--lrs", nargs="+", type=float, default=list(LRS), metavar="LR",
                        help="with --tune: the fine-tuning methods' learning-rate grid")
    parser.add_argument("--thresholds", nargs="+", type=float, default=list(THRESHOLDS), metavar="T",
                        help="with --tune: suppression's threshold grid")
    parser.add_argument("--merge", nargs="+", metavar="NAME",
                        help="combine these tuned result files (benchmarks/results/NAME.json) of one model "
                             "into --results (default ml100k_unlearning_tuned), choosing again on the union")
    parser.add_argument("--from-saved", action="store_true",
                        help="with --tune: evaluate the unlearned checkpoints an earlier --tune run saved "
                             "(runs/ml100k_unlearning/<concept>/) instead of fine-tuning again")
    parser.add_argument("--results", metavar="NAME",
                        help="result file name under benchmarks/results (default ml100k_unlearning, with "
                             "--tune ml100k_unlearning_tuned); e.g. one per concept run in parallel")
    parser.add_argument("--reuse-retrain", action="store_true",
                        help="load each concept's retrained reference from runs/ml100k_unlearning/<concept>/ "
                             "when an earlier run stored it, instead of training it again")
    ns = parser.parse_args(argv)
    torch.set_num_threads(ns.threads)
    start = time.perf_counter()
    if ns.merge:
        from benchmarks.common import RESULTS, write_results

        merged = merge_tuned([json.loads((RESULTS / f"{n}.json").read_text()) for n in ns.merge])
        md = tuned_markdown(merged)
        write_results(ns.results or "ml100k_unlearning_tuned", merged, md)
        print(md)
        return 0
    if ns.tune:
        try:
            tune_grid(tuple(ns.lrs), tuple(ns.thresholds))
        except ValueError as err:
            parser.error(str(err))
    name = ns.results or ("ml100k_unlearning_tuned" if ns.tune else "ml100k_unlearning")
    stages = ("valid", "test") if ns.tune else ("test",)

    def render(payload: dict[str, Any]) -> str:
        if ns.tune:
            return tuned_markdown(payload)
        return markdown(payload, "Concept unlearning" + (" (smoke: synthetic data, tiny model)" if ns.smoke
                                                          else " on ML-100K"))
    if ns.smoke:
        out = Path(ns.out)
        out.mkdir(parents=True, exist_ok=True)
        config = "configs/smoke/sid_decoder.yaml"
        checkpoint = (
            ns.checkpoint
            or train_original(
                config, ["--trainer.max_epochs", "2", "--trainer.logger.init_args.save_dir", str(out / "fit")]
            )[0]
        )
        grid = (tuple(ns.lrs), tuple(ns.thresholds))
        methods = tune_methods(SMOKE_METHODS, *grid) if ns.tune else SMOKE_METHODS
        payload = run([(text, methods) for text in SMOKE_CONCEPTS], checkpoint, None, 256, stages=stages)
    else:
        config = MODEL_CONFIG
        fit = None
        checkpoint = ns.checkpoint
        if checkpoint is None:
            checkpoint, fit = train_original(config, [])
        cfgs = [load_config(ROOT / c) for c in ns.concepts]
        concepts = [(cfg["concept"].text, cfg["methods"]) for cfg in cfgs]
        if ns.methods:
            unknown = sorted(set(ns.methods) - {m for _, methods in concepts for m in methods})
            if unknown:
                parser.error(f"--methods {unknown}: not in the concept configs' methods")
            concepts = [(text, {m: v for m, v in methods.items() if m in ns.methods})
                        for text, methods in concepts]

        if ns.tune:
            grid = (tuple(ns.lrs), tuple(ns.thresholds))
            concepts = [(text, tune_methods(methods, *grid)) for text, methods in concepts]
        if ns.from_saved:
            if not ns.tune:
                parser.error("--from-saved reads the checkpoints of a --tune run; add --tune")
            from benchmarks.common import write_results

            reports = {}
            for text, methods in concepts:
                slug = "".join(ch if ch.isalnum() else "_" for ch in text).strip("_")
                names = [n for n in methods if n != "retrain"]
                folder = ROOT / "runs" / "ml100k_unlearning" / slug
                reports[text] = evaluate_saved(checkpoint, text, names, folder,
                                               int(cfgs[0].get("eval_batch_size") or 64))
            payload = {"checkpoint": str(checkpoint), "data": data_settings(load_generative(checkpoint)[1]),
                       "concepts": reports, "model_config": config, "original_fit": fit,
                       "seconds": round(time.perf_counter() - start, 1),
                       "command": "python -m benchmarks.ml100k_unlearning --tune --from-saved",
                       "device": "cpu (evaluation of the saved checkpoints)"}
            md = tuned_markdown(payload)
            write_results(name, payload, md)
            print(md)
            return 0

        def save_partial(partial: dict[str, Any]) -> None:
            from benchmarks.common import write_results

            partial.update(model_config=config, original_fit=fit, partial=True, device=device_summary(),
                           seconds=round(time.perf_counter() - start, 1))
            write_results(name, partial, render(partial))

        payload = run(
            concepts,
            checkpoint,
            ROOT / "runs" / "ml100k_unlearning",
            int(cfgs[0].get("eval_batch_size") or 64),
            on_concept=save_partial,
            reuse_retrain=ns.reuse_retrain,
            stages=stages,
        )
        payload["original_fit"] = fit
    payload.update(
        {
            "device": device_summary(),
            "model_config": config,
            "seconds": round(time.perf_counter() - start, 1),
            "command": "python -m benchmarks.ml100k_unlearning" + (" --smoke" if ns.smoke else "")
            + (" --tune" if ns.tune else ""),
        }
    )
    md = render(payload)
    if ns.smoke:
        atomic_write(
            out / f"{name}.json",
            lambda fh: fh.write(json.dumps(payload, indent=2, default=str).encode()),
        )
        atomic_write(out / f"{name}.md", lambda fh: fh.write(md.encode()))
    else:
        from benchmarks.common import write_results

        write_results(name, payload, md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
