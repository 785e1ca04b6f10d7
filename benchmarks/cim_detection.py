"""CIM error detection on ML-100K with SASRec: Semantic Divergence and EED against max-prob and entropy.

Run (after ``recframe data prepare ml-100k``)::

    python -m benchmarks.cim_detection                      # 3 seeds, all 943 test users
    python -m benchmarks.cim_detection --render-only        # rebuild the tables from the JSON

Per seed, SASRec is trained from ``configs/sasrec_ml100k.yaml`` (leave-one-out) with ``--seed_everything SEED
--trainer.max_epochs EPOCHS --trainer.max_time null`` (``--epochs``, default 10), logging to
``runs/cim_sasrec_ml100k_eEPOCHS_seedSEED``; an existing best checkpoint there is reused. A fixed epoch budget
rather than the config's 10-minute wall-clock cap, so that how busy the machine is does not decide how far a
seed trains (validation every 5 epochs; the best validated epoch is kept). The config's full run reaches its
best around epoch 40-55: these models are trained less than the baselines table's SASRec, and their test
HR@10 is in the table. Results: ``cim_detection`` for the default 10 epochs, ``cim_detection_eEPOCHS``
otherwise. Then, with
:class:`calib_ext.cim.CIMDetector` on the model's
:class:`~calib_ext.cim.adapters.RecommenderAdapter`:

1. **Budget, chosen on validation only.** The first ``--valid-users`` validation users are scored with keep
   fractions 0.25, 0.5 and 0.75; each single budget and the mean over the three views are candidates, and the
   one with the best mean validation AUROC of Semantic Divergence and EED (over both error types) is kept.
2. **Test.** Every test user is scored with the chosen budget: Semantic Divergence (distribution effects, JS
   over 32 k-means classes of the item embeddings), EED (embedding effects, geodesic drift of the query
   embedding), EED on Semantic Divergence's views, ``1 - max p`` and the entropy; AUROC for a wrong top-1 and
   a miss@10 (seen items masked, full catalogue), and the wall time per user of each score's own pipeline.

``--task minilm`` runs the text case instead: the offline MiniLM sentence encoder answering "which genre is
this movie?" from ML-100K titles (:mod:`calib_ext.cim.text`: the title's word pieces are the parts, the 18
options ``"<genre> movie"``, correct = any of the movie's genres), questions in a fixed random order (seed 0),
the first ``--valid-users`` for the budget and the next ``--test-users`` (default 300) for the table; no
training, so one run. Writes ``cim_detection_minilm``.

Differences of AUROC are given with a 95 % paired bootstrap interval: users resampled with replacement within
each seed, the difference averaged over the seeds, 1000 draws; an interval that covers 0 reads "no significant
difference". Times are wall clock on whatever the machine is doing (the three pipelines alternate batch by
batch, so they share the same load). Writes ``benchmarks/results/cim_detection.{json,md}``.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from benchmarks.common import RESULTS, fit_and_test, write_results
from calib_ext.cim import CIMDetector, RecommenderAdapter, auroc
from calib_ext.cim.callback import view_batches
from calib_ext.cim.detector import summary
from recframe.checkpoint_io import load_checkpoint
from recframe.data.datamodule import RecDataModule
from recframe.models import SASRec

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "sasrec_ml100k.yaml"
BUDGETS = (0.25, 0.5, 0.75)
SHOWN = {"semantic_divergence": "Semantic Divergence", "eed": "EED", "eed_same_view": "EED on SD's views",
         "max_prob": "max-prob (1 - max p)", "entropy": "entropy"}
PAIRS = (("eed", "semantic_divergence"), ("semantic_divergence", "max_prob"), ("eed", "max_prob"),
         ("semantic_divergence", "entropy"), ("eed", "entropy"))
ERRORS = ("wrong_top1", "miss@10")
BOOTSTRAP = 1000


def run_name(seed: int, epochs: int) -> str:
    return f"cim_sasrec_ml100k_e{epochs}_seed{seed}"


def best_checkpoint(seed: int, epochs: int) -> Path | None:
    """The best-validation checkpoint of the newest run of ``seed`` under ``runs/`` (None if none)."""
    versions = sorted((ROOT / "runs" / run_name(seed, epochs)).glob("version_*"),
                      key=lambda p: int(p.name.split("_")[1]))
    for version in reversed(versions):
        found = sorted(version.glob("checkpoints/best-*.ckpt"))
        if found:
            return found[-1]
    return None


def trained(seed: int, epochs: int) -> Path:
    """Train seed ``seed`` from the config unless a best checkpoint exists; the checkpoint path."""
    ckpt = best_checkpoint(seed, epochs)
    if ckpt is None:
        fit_and_test(CONFIG, ["--seed_everything", str(seed), "--trainer.max_epochs", str(epochs),
                              "--trainer.max_time", "null", "--trainer.logger.init_args.name",
                              run_name(seed, epochs)])
        ckpt = best_checkpoint(seed, epochs)
    if ckpt is None:
        raise RuntimeError(f"training seed {seed} wrote no best checkpoint under "
                           f"runs/{run_name(seed, epochs)}")
    return ckpt


def load(ckpt: Path) -> tuple[SASRec, RecDataModule]:
    """The model of ``ckpt`` (weights_only, integrity-checked) and the datamodule of its run's config."""
    state = load_checkpoint(ckpt)
    hparams = {k: v for k, v in state["hyper_parameters"].items() if not k.startswith("_")}
    model = SASRec(**hparams)
    model.load_state_dict(state["state_dict"])
    config = yaml.safe_load((ckpt.parent.parent / "config.yaml").read_text())
    dm = RecDataModule(**config["data"])
    dm.setup("test")
    return model.eval(), dm


def choose_budget(res: Any, errors: tuple[str, ...] = ERRORS) -> tuple[tuple[float, ...], dict[str, float]]:
    """The candidate budget with the best mean validation AUROC of SD and EED over both errors."""
    cands = {f"{rho:g}": (f"semantic_divergence@{rho:g}", f"eed@{rho:g}", (rho,)) for rho in BUDGETS}
    cands["mean of " + "/".join(f"{r:g}" for r in BUDGETS)] = ("semantic_divergence", "eed", BUDGETS)
    value = {name: float(np.mean([auroc(res.scores[s], res.errors[e]) for s in (sd, eed) for e in errors]))
             for name, (sd, eed, _) in cands.items()}
    best = max(value, key=value.get)
    return cands[best][2], value


def per_user(res: Any) -> dict[str, Any]:
    """Per-input scores (7 decimals) and error flags (one ``0``/``1`` character per input) for the JSON."""
    return {"scores": {k: np.round(v, 7).tolist() for k, v in res.scores.items()},
            "errors": {k: "".join("1" if f else "0" for f in v) for k, v in res.errors.items()}}


def run_seed(seed: int, epochs: int, valid_users: int | None, test_users: int | None,
             batch: int) -> dict[str, Any]:
    ckpt = trained(seed, epochs)
    model, dm = load(ckpt)
    adapter = RecommenderAdapter(model, miss_k=10)
    valid = dm.eval_view("valid")
    det = CIMDetector(keep_fractions=BUDGETS).fit(adapter)
    res_v = det.score(adapter, view_batches(valid, batch, valid_users))
    budgets, val_auroc = choose_budget(res_v)
    test = dm.eval_view("test")
    det = CIMDetector(keep_fractions=budgets).fit(adapter)
    start = time.perf_counter()
    res = det.score(adapter, view_batches(test, batch, test_users))
    out = summary(res)
    out.update({
        "seed": seed, "max_epochs": epochs, "checkpoint": str(ckpt.relative_to(ROOT)),
        "data_fingerprint": dm.fingerprint,
        "best_val_ndcg@10": float(ckpt.stem.split("val_ndcg=")[1]),
        "best_epoch": int(ckpt.stem.split("epoch=")[1].split("-")[0]),
        "budgets": list(budgets), "validation_users": res_v.n, "test_users": res.n,
        "validation_auroc_by_budget": val_auroc,
        "hr@10": 1.0 - out["error_rate"]["miss@10"], "top1_accuracy": 1.0 - out["error_rate"]["wrong_top1"],
        "score_seconds_total": time.perf_counter() - start,
        "per_user": per_user(res),
    })
    print(f"seed {seed}: budgets {budgets}, AUROC {json.dumps(out['auroc'])}, "
          f"ms/user {out['ms_per_example']}")
    return out


def run_minilm(n_valid: int, n_test: int, batch: int) -> dict[str, Any]:
    """The MiniLM genre task (module docstring): budget on validation questions, scores on test ones."""
    from calib_ext.cim.text import TextMultipleChoiceAdapter, genre_questions

    dm = RecDataModule(dataset="ml-100k", split="loo", max_len=50)
    dm.setup("test")
    view = dm.eval_view("test")
    if view.item_titles is None or view.item_features is None or view.item_features.categories is None:
        raise RuntimeError("ML-100K item titles and genres are missing; run `recframe data prepare ml-100k`.")
    questions, options, correct = genre_questions(view.item_titles[1:], view.item_features.categories[1:])
    order = np.random.default_rng(0).permutation(len(questions))
    adapter = TextMultipleChoiceAdapter(options, miss_k=3)

    def batches(idx: np.ndarray):
        for i in range(0, len(idx), batch):
            part = idx[i:i + batch]
            yield adapter.tokenize([questions[j] for j in part], [correct[j] for j in part])

    det = CIMDetector(keep_fractions=BUDGETS, n_clusters=8).fit(adapter, skip_first=False)
    res_v = det.score(adapter, batches(order[:n_valid]))
    budgets, val_auroc = choose_budget(res_v, ("wrong_top1", "miss@3"))
    det = CIMDetector(keep_fractions=budgets, n_clusters=8).fit(adapter, skip_first=False)
    res = det.score(adapter, batches(order[n_valid:n_valid + n_test]))
    out = summary(res)
    out.update({"seed": 0, "max_epochs": 0, "checkpoint": "all-MiniLM-L6-v2 (offline package)",
                "options": options, "budgets": list(budgets), "validation_users": res_v.n,
                "test_users": res.n,
                "validation_auroc_by_budget": val_auroc, "hr@10": 1.0 - out["error_rate"]["miss@3"],
                "top1_accuracy": 1.0 - out["error_rate"]["wrong_top1"], "per_user": per_user(res)})
    return out


def paired_bootstrap(runs: list[dict[str, Any]], a: str, b: str, error: str, seed: int = 0) -> dict[str, Any]:
    """Mean over seeds of AUROC(a) - AUROC(b) with a 95 % per-user paired bootstrap interval."""
    rng = np.random.default_rng(seed)
    data = []
    for run in runs:
        sa, sb = (np.asarray(run["per_user"]["scores"][k]) for k in (a, b))
        lab = np.array([c == "1" for c in run["per_user"]["errors"][error]])
        data.append((sa, sb, lab))
    point = float(np.mean([auroc(sa, lab) - auroc(sb, lab) for sa, sb, lab in data]))
    draws = np.empty(BOOTSTRAP)
    for i in range(BOOTSTRAP):
        diffs = []
        for sa, sb, lab in data:
            idx = rng.integers(0, len(lab), len(lab))
            diffs.append(auroc(sa[idx], lab[idx]) - auroc(sb[idx], lab[idx]))
        draws[i] = np.nanmean(diffs)
    low, high = np.quantile(draws, [0.025, 0.975])
    return {"mean": point, "ci95": [float(low), float(high)], "significant": bool(low > 0 or high < 0)}


TITLES = {"sasrec": "SASRec on ML-100K (leave-one-out, full ranking, seen items masked)",
          "minilm": "MiniLM genre multiple choice on ML-100K titles (18 options, tokens as parts)"}
ERROR_NAMES = {"wrong_top1": "wrong top-1", "miss@10": "miss@10", "miss@3": "miss@3"}


def effects_share(runs: list[dict[str, Any]]) -> str:
    """" Share of ... spent on the effects" sentence, when the runs recorded it."""
    keys = ("semantic_divergence", "eed")
    if not all(f"{k}_effects" in r["seconds"] for r in runs for k in keys):
        return ""
    share = {k: np.mean([r["seconds"][f"{k}_effects"] / r["seconds"][k] for r in runs]) for k in keys}
    return (f" The intervention effects (one forward pass per maskable part) take "
            f"{100 * share['semantic_divergence']:.0f} % of Semantic Divergence's pipeline and "
            f"{100 * share['eed']:.0f} % of EED's.")


def render(runs: list[dict[str, Any]], differences: dict[str, Any], command: str,
           errors: tuple[str, ...] = ERRORS) -> str:
    """The markdown tables: AUROC and time per score, AUROC differences, and one row per seed."""
    task = "minilm" if errors != ERRORS else "sasrec"
    what = "seeds" if task == "sasrec" else "runs"

    def ms(score: str) -> str:
        vals = [r["ms_per_example"].get(score) for r in runs]
        return "-" if any(v is None for v in vals) else f"{np.mean(vals):.1f}"

    head = " | ".join(f"AUROC {ERROR_NAMES[e]}" for e in errors)
    rule = "---:|" * len(errors)
    title = f"## CIM error detection, {TITLES[task]}, {len(runs)} {what[:-1] if len(runs) == 1 else what}"
    if task == "sasrec":
        title += f", {'/'.join(str(e) for e in sorted({r.get('max_epochs') for r in runs}, key=str))} " \
                 "training epochs"
    unit = "user" if task == "sasrec" else "question"
    lines = [title, "", f"Command: `{command}`", "",
             f"AUROC for predicting the error (mean ± sd over {what}; higher score = more uncertain), and "
             f"wall time per test {unit} of each score's own pipeline (ms, mean over {what}).", "",
             f"| score | {head} | ms / {unit} |", f"|---|{rule}---:|"]
    for score, shown in SHOWN.items():
        cells = []
        for err in errors:
            vals = [r["auroc"][err][score] for r in runs]
            cells.append(f"{np.mean(vals):.3f} ± {np.std(vals):.3f}" if len(vals) > 1 else f"{vals[0]:.3f}")
        lines.append(f"| {shown} | {' | '.join(cells)} | {ms(score)} |")
    sd_ms, eed_ms = (np.mean([r["ms_per_example"][s] for r in runs]) for s in ("semantic_divergence", "eed"))
    lines += ["", f"EED time / Semantic Divergence time: {eed_ms / sd_ms:.2f} "
              f"(EED {100 * (1 - eed_ms / sd_ms):+.0f} % faster)." + effects_share(runs), "",
              f"Differences of AUROC (mean over {what}, 95 % per-{unit} paired bootstrap interval):", "",
              f"| difference | {' | '.join(ERROR_NAMES[e] for e in errors)} |", f"|---|{rule}"]
    for key, row in differences.items():
        cells = []
        for err in errors:
            d = row[err]
            verdict = "" if d["significant"] else " (no significant difference)"
            cells.append(f"{d['mean']:+.3f} [{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]{verdict}")
        lines.append(f"| {key} | {' | '.join(cells)} |")
    if task == "sasrec":
        lines += ["", "Per seed:", "",
                  "| seed | best epoch | val NDCG@10 | test HR@10 | top-1 acc | budget (validation) | users "
                  "| ms/user SD | ms/user EED | ms/user baselines |",
                  "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
        for r in runs:
            t = r["ms_per_example"]
            budget = ", ".join(f"{b:g}" for b in r["budgets"])
            lines.append(f"| {r['seed']} | {r['best_epoch']} | {r['best_val_ndcg@10']:.4f} | "
                         f"{r['hr@10']:.4f} | {r['top1_accuracy']:.4f} | {budget} | {r['n']} | "
                         f"{t['semantic_divergence']:.1f} | {t['eed']:.1f} | {t['max_prob']:.2f} |")
    else:
        for r in runs:
            lines += ["", f"Top-1 accuracy {r['top1_accuracy']:.3f}, hit@3 {r['hr@10']:.3f}; budget "
                      f"(validation, {r['validation_users']} questions): "
                      f"{', '.join(f'{b:g}' for b in r['budgets'])}; {r['n']} test questions."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--valid-users", type=int, default=128,
                        help="validation users scored to choose the budget (the first in loader order)")
    parser.add_argument("--test-users", type=int, default=None,
                        help="test users scored, the first in loader order (default: all)")
    parser.add_argument("--epochs", type=int, default=10, help="training epochs per seed (default 10)")
    parser.add_argument("--batch", type=int, default=64, help="users per batch")
    parser.add_argument("--task", choices=["sasrec", "minilm"], default="sasrec",
                        help="sasrec: the recommender table (default); minilm: the text multiple-choice case")
    parser.add_argument("--render-only", action="store_true", help="rebuild the tables from the JSON")
    ns = parser.parse_args(argv)
    torch.set_num_threads(1)
    if ns.task == "minilm":
        n_test = 300 if ns.test_users is None else ns.test_users
        previous = RESULTS / "cim_detection_minilm.json"
        if ns.render_only:
            payload = json.loads(previous.read_text())
            run = payload["runs"][0]
            default = f"python -m benchmarks.cim_detection --task minilm --test-users {n_test}"
            command = payload.get("command", default)
        else:
            run = run_minilm(ns.valid_users, n_test, ns.batch)
            command = f"python -m benchmarks.cim_detection --task minilm --test-users {n_test}"
            if ns.valid_users != 128:
                command += f" --valid-users {ns.valid_users}"
        publish([run], command, "cim_detection_minilm", ("wrong_top1", "miss@3"))
        return 0
    name = "cim_detection" if ns.epochs == 10 else f"cim_detection_e{ns.epochs}"
    command = "python -m benchmarks.cim_detection" + ("" if ns.epochs == 10 else f" --epochs {ns.epochs}")
    if ns.test_users is not None:
        command += f" --test-users {ns.test_users}"
    if ns.valid_users != 128:
        command += f" --valid-users {ns.valid_users}"
    previous = RESULTS / f"{name}.json"
    runs = {r["seed"]: r for r in json.loads(previous.read_text())["runs"]} if previous.exists() else {}
    if ns.render_only:
        publish(list(runs.values()), command, name)
        return 0
    for seed in ns.seeds:  # each finished seed is written at once; seeds not rerun keep their recorded runs
        run = run_seed(seed, ns.epochs, ns.valid_users, ns.test_users, ns.batch)
        # several processes (one per seed) may finish together: merge with the file as it is now, under a lock
        with open(Path(tempfile.gettempdir()) / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            recorded = json.loads(previous.read_text())["runs"] if previous.exists() else []
            runs = {r["seed"]: r for r in recorded}
            runs[seed] = run
            publish([runs[s] for s in sorted(runs)], command, name)
    return 0


def publish(runs: list[dict[str, Any]], command: str, name: str, errors: tuple[str, ...] = ERRORS) -> None:
    """Bootstrap the differences, render the tables and write the JSON and markdown."""
    differences = {f"{SHOWN[a]} − {SHOWN[b]}": {e: paired_bootstrap(runs, a, b, e) for e in errors}
                   for a, b in PAIRS}
    md = render(runs, differences, command, errors)
    payload = {"command": command, "config": str(CONFIG.relative_to(ROOT)), "budgets_searched": list(BUDGETS),
               "runs": runs,
               "differences": differences, "bootstrap_draws": BOOTSTRAP}
    js, out = write_results(name, payload, md)
    print(md)
    print(f"wrote {js.relative_to(ROOT)} and {out.relative_to(ROOT)}")


if __name__ == "__main__":
    raise SystemExit(main())
