"""Popularity, BPR-MF, LightGCN and SASRec on ML-100K, leave-one-out, full ranking.

Run: ``python -m benchmarks.ml100k_baselines`` (after ``recframe data prepare ml-100k``).
Each model trains from its config in ``configs/`` (10-minute cap each), the
best-validation checkpoint is tested, and the table reports every model's test
NDCG@10 as a ratio to Popularity's (the floor). Writes
``benchmarks/results/ml100k_baselines.{json,md}``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.common import fit_and_test, write_results
from recframe.report import metric_columns, metrics_table

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
MODELS = {"Popularity": "popularity_ml100k.yaml", "BPR-MF": "bprmf_ml100k.yaml",
          "LightGCN": "lightgcn_ml100k.yaml", "SASRec": "sasrec_ml100k.yaml"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    ns = parser.parse_args(argv)
    runs = {name: fit_and_test(CONFIGS / MODELS[name]) for name in ns.models}
    floor = runs.get("Popularity", {}).get("test", {}).get("ndcg@10")
    rows = {}
    for name, run in runs.items():
        row = dict(run["test"])
        if floor:
            row["ndcg@10 / Pop"] = row["ndcg@10"] / floor
        row["train s"] = run["train_seconds"]
        rows[name] = row
    cols = [*metric_columns(["recall", "ndcg"], (10, 20)), "mrr@10", "ndcg@10 / Pop", "train s"]
    table = metrics_table(rows, cols)
    md = ("## ML-100K, leave-one-out, full ranking (seen items masked), test split\n\n"
          "Command: `python -m benchmarks.ml100k_baselines`\n\n" + table + "\n")
    js, out = write_results("ml100k_baselines", {"runs": runs}, md)
    print(md)
    print(f"wrote {js} and {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
