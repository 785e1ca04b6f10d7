"""Continual recommendation on ML-100K: VAMIRec against fine-tune, full retrain, replay, LwF and EWC.

Run (after ``recframe data prepare ml-100k``; the settings are those of ``configs/continual_ml100k.yaml``)::

    nice -n 10 python -m benchmarks.continual_ml100k                 # seeds 0 1 2
    nice -n 10 python -m benchmarks.continual_ml100k --seeds 0       # one seed

5 global-time stages; at stage t every learner updates its SASRec on stage t from its stage t-1 model and is
tested on the returning users of stage t+1 (full ranking, known items masked). The table gives the mean over
the 4 tests of NDCG@10 and Recall@10 (mean ± sd over seeds) and backward transfer, on the *test users*
(70 % of users; the other 30 % are validation users). The baseline VAMIRec is compared with is the one of
fine-tune / replay / distillation / EWC with the best validation-user mean NDCG@10; the interval is a 95 %
paired bootstrap over (stage, test user) units of the seed-averaged per-user NDCG@10 difference
(``benchmarks.per_user.BOOTSTRAP_SAMPLES`` draws). Methods' settings are fixed in the config (no search).
Writes ``benchmarks/results/continual_ml100k.{json,md}``; each seed is stored in
``benchmarks/results/continual_ml100k/seedN.json`` as it finishes, and a rerun reads finished seeds back
(``--fresh`` reruns them).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import RESULTS, write_results
from benchmarks.per_user import BOOTSTRAP_SAMPLES
from recframe.checkpoint_io import atomic_write
from recframe.continual.cli import build_data, load_config, mean_table, run_comparison

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "continual_ml100k.yaml"
CANDIDATES = ("fine-tune", "replay", "distillation (LwF)", "EWC")


def paired_interval(ours: list[list[float]], theirs: list[list[float]], seed: int = 0) -> dict[str, Any]:
    """Mean difference and 95 % bootstrap interval over (stage, user) units of per-user values."""
    diff = np.concatenate([np.asarray(a) - np.asarray(b) for a, b in zip(ours, theirs)])
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), (BOOTSTRAP_SAMPLES, len(diff)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return {"mean": float(diff.mean()), "ci95": [float(low), float(high)], "units": int(len(diff))}


def _covers_zero(interval: dict[str, Any]) -> bool:
    """Whether a paired interval's 95 % range contains 0 (reported as "no significant difference")."""
    low, high = interval["ci95"]
    return low <= 0 <= high


def _seed_mean(per_user: dict[str, Any], row: str) -> list[list[float]]:
    """Per stage, each test user's NDCG@10 averaged over seeds (the same users in every seed)."""
    seeds = list(per_user)
    stages = len(per_user[seeds[0]][row])
    return [np.mean([per_user[s][row][t] for s in seeds], axis=0).tolist() for t in range(stages)]


def seeds_resumably(data: Any, cfg: Any, seeds: list[int], share: float, progress: bool = False,
                    fresh: bool = False, folder: Path | None = None) -> dict[str, Any]:
    """:func:`run_comparison` one seed at a time, each seed's result stored as it finishes.

    A seed whose stored result was made on the same data (fingerprint) with the same settings is read back
    instead of rerun, so a benchmark stopped after some seeds resumes at the next one. Returns the merged
    result, shaped as :func:`run_comparison` returns it for all ``seeds`` at once.
    """
    folder = folder or RESULTS / "continual_ml100k"
    settings = {"fingerprint": data.inter.fingerprint, "backbone": dataclasses.asdict(cfg.backbone),
                "methods": cfg.methods, "validation_share": share, "n_stages": data.n_stages}
    merged: dict[str, Any] = {"runs": {}, "seconds": {}, "per_user_ndcg@10": {}, "validation_share": share}
    for seed in seeds:
        path = folder / f"seed{seed}.json"
        stored = json.loads(path.read_text()) if path.exists() and not fresh else None
        if stored is None or stored.get("settings") != json.loads(json.dumps(settings)):
            stored = {"settings": settings, **run_comparison(data, cfg.backbone, cfg.methods, [seed], share,
                                                            progress=progress, per_user=True)}
            folder.mkdir(parents=True, exist_ok=True)
            atomic_write(path, lambda fh, s=stored: fh.write(json.dumps(s, indent=1).encode()))
        else:
            print(f"seed {seed}: read back from {path.name}")
        for key in ("runs", "seconds", "per_user_ndcg@10"):
            merged[key].update(stored[key])
        merged["test users per stage"] = stored["test users per stage"]
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--config", default=str(CONFIG))
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--fresh", action="store_true", help="rerun seeds whose stored result exists")
    ns = parser.parse_args(argv)
    cfg = load_config(ns.config)
    data = build_data(cfg.data)
    share = float(cfg.data.get("validation_share", 0.3))
    result = seeds_resumably(data, cfg, ns.seeds, share, ns.progress, ns.fresh)
    runs = result["runs"]
    valid_ndcg = {row: np.mean([runs[s][row]["valid"]["ndcg@10"] for s in runs]) for row in CANDIDATES
                  if row in runs[str(ns.seeds[0])]}
    best = max(valid_ndcg, key=valid_ndcg.get)
    per_user = result["per_user_ndcg@10"]
    interval = paired_interval(_seed_mean(per_user, "VAMIRec"), _seed_mean(per_user, best))
    lo, hi = interval["ci95"]
    verdict = ("no significant difference" if _covers_zero(interval) else
               ("VAMIRec better" if lo > 0 else f"{best} better"))
    beats = {row: bool(np.mean([runs[s]["VAMIRec"]["test"]["ndcg@10"] for s in runs])
                       > np.mean([runs[s][row]["test"]["ndcg@10"] for s in runs]))
             for row in CANDIDATES if row in runs[str(ns.seeds[0])]}
    ops = {s: runs[s]["VAMIRec"].get("operations") for s in runs}
    vs_each = {row: paired_interval(_seed_mean(per_user, "VAMIRec"), _seed_mean(per_user, row))
               for row in per_user[str(ns.seeds[0])] if row != "VAMIRec"}
    each_lines = "\n".join(
        f"| {row} | {iv['mean']:+.4f} | [{iv['ci95'][0]:+.4f}, {iv['ci95'][1]:+.4f}] | "
        f"{'no significant difference' if _covers_zero(iv) else 'significant'} |"
        for row, iv in vs_each.items())
    md = (f"## Continual ML-100K: {data.n_stages} time stages, SASRec backbone, {len(ns.seeds)} seed(s)\n\n"
          f"Command: `python -m benchmarks.continual_ml100k --seeds {' '.join(map(str, ns.seeds))}`\n\n"
          "Mean over the stage tests (test users; mean ± sd over seeds); BWT = backward transfer "
          "(final model on earlier test sets minus the model of that time).\n\n"
          + mean_table(runs, "test") +
          f"\nValidation users, same rows:\n\n{mean_table(runs, 'valid')}\n"
          f"Best baseline on validation users (mean NDCG@10): **{best}**. VAMIRec - {best}, test users, "
          f"per-user NDCG@10 paired over (stage, user): {interval['mean']:+.4f} "
          f"[{lo:+.4f}, {hi:+.4f}] ({interval['units']} units): {verdict}.\n\n"
          "Claim (VAMIRec beats fine-tune, replay, distillation and EWC on mean stage NDCG@10), test users: "
          + ", ".join(f"{row}: {'yes' if b else 'no'}" for row, b in beats.items()) + ".\n\n"
          "VAMIRec minus each row, test users, per-user NDCG@10 paired over (stage, user):\n\n"
          "| row | VAMIRec − row | 95 % interval | |\n|---|---:|---|---|\n" + each_lines + "\n")
    payload = {**result, "best_baseline": best, "interval_vs_best": interval, "interval_vs_each": vs_each,
               "beats": beats,
               "config": {"data": cfg.data, "backbone": dataclasses.asdict(cfg.backbone),
                          "methods": cfg.methods, "seeds": ns.seeds},
               "data_fingerprint": data.inter.fingerprint, "vamirec_operations": ops}
    js, out = write_results("continual_ml100k", payload, md)
    print(md)
    print(f"wrote {js} and {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
