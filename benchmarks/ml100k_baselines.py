"""Popularity, BPR-MF, LightGCN and SASRec on ML-100K, full ranking, seen items masked.

Run (after ``recframe data prepare ml-100k``)::

    python -m benchmarks.ml100k_baselines                 # leave-one-out
    python -m benchmarks.ml100k_baselines --split ratio   # signed protocol

Each model trains from its config in ``configs/`` (10-minute cap each), the
best-validation checkpoint is tested, and the table reports every model's test
NDCG@10 as a ratio to Popularity's (the floor every table shows). With
``--split ratio`` the split is the per-user chronological 80/10/10 one, all
later interactions are held out, conventional metrics count liked items and
the signed metrics are added. Writes
``benchmarks/results/ml100k_baselines_{loo,ratio}.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.common import RESULTS, fit_and_test, write_results
from recframe.report import metric_columns, metrics_table

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
MODELS = {"Popularity": "popularity_ml100k.yaml", "BPR-MF": "bprmf_ml100k.yaml",
          "LightGCN": "lightgcn_ml100k.yaml", "SASRec": "sasrec_ml100k.yaml"}
TITLES = {"loo": "leave-one-out",
          "ratio": "signed protocol (per-user chronological 80/10/10, all later interactions held out)"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS),
                        help="models to (re)train; the others keep their rows from the existing results")
    parser.add_argument("--split", choices=["loo", "ratio"], default="loo")
    parser.add_argument("--render-only", action="store_true",
                        help="rebuild the markdown table from the existing JSON without training")
    parser.add_argument("--max-time", metavar="DD:HH:MM:SS",
                        help="override the configs' trainer.max_time (10 minutes); on a loaded machine this "
                             "lets a run that early stopping ends before the cap finish as it does when idle "
                             "(the override is recorded with the run)")
    ns = parser.parse_args(argv)
    name = f"ml100k_baselines_{ns.split}"
    if ns.render_only:
        runs = json.loads((RESULTS / f"{name}.json").read_text())["runs"]
    else:
        extra = ["--data.split", ns.split]
        if ns.max_time:
            extra += ["--trainer.max_time", ns.max_time]
        previous = RESULTS / f"{name}.json"
        # a subset of --models reruns only those; the other rows keep their recorded runs
        runs = json.loads(previous.read_text())["runs"] if previous.exists() else {}
        runs.update({model: fit_and_test(CONFIGS / MODELS[model], extra) for model in ns.models})
        runs = {model: runs[model] for model in MODELS if model in runs}
    floor = runs.get("Popularity", {}).get("test", {}).get("ndcg@10")
    rows = {}
    for model, run in runs.items():
        row = dict(run["test"])
        if floor:
            row["ndcg@10 / Pop"] = row["ndcg@10"] / floor
        row["train s"] = run["train_seconds"]
        row["epochs"] = run["epochs"]
        rows[model] = row
    names = ["recall", "ndcg"]
    if ns.split == "ratio":
        names += ["signed_recall", "signed_hr", "signed_ndcg"]
    cols = [*metric_columns(names, (10, 20)), "ndcg@10 / Pop", "train s", "epochs"]
    command = "python -m benchmarks.ml100k_baselines" + (" --split ratio" if ns.split == "ratio" else "")
    md = (f"## ML-100K, {TITLES[ns.split]}, full ranking (seen items masked), test split\n\n"
          f"Command: `{command}`\n\n"
          + metrics_table(rows, cols, formats={"ndcg@10 / Pop": ".2f", "train s": ".0f"}) + "\n")
    js, out = write_results(name, {"split": ns.split, "runs": runs}, md)
    print(md)
    print(f"wrote {js} and {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
