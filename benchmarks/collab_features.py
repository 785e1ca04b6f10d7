"""Collaborative semantic-ID inputs on ML-100K: the SASRec item tables and RQ-KMeans on text / CF / hybrid.

Run (needs ML-100K prepared; each uncached SASRec table trains for minutes)::

    python -m benchmarks.collab_features                       # seeds 0 1 2
    python -m benchmarks.collab_features --seeds 0 --no-write  # one seed

For each seed: the SASRec item table of ``configs/sasrec_ml100k.yaml`` trained on the leave-one-out
training split (max_len 50) by :func:`recframe.features.collaborative_item_embeddings` (cached; the
generative models' ``bind_data`` reuses the same cache entry), its best epoch and validation NDCG@10,
then RQ-KMeans 3 x 64 (seed 0, the headline tokenizer of ``benchmarks/tokenizer_stats.py``) fitted on

* ``text``: MiniLM embeddings of "title (year); genres" (the text-only IDs, kept for cold-start items);
* ``collaborative``: the SASRec item table;
* ``hybrid``: :func:`recframe.features.hybrid_item_features` (text, table, ``--collab-weight``).

Reported per input: the ``tokenizer_stats`` columns (usage, perplexity, collision rate, disambiguation
size, unique paths, genre coherence of the first level) plus ``same-L1 CF cos``: the mean cosine, in the
SASRec table, between items sharing a first-level code (how collaborative the first token is).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import numpy as np

from benchmarks.common import write_results
from benchmarks.tokenizer_stats import describe, genre_sets, share_genre_rate
from recframe.data.datamodule import RecDataModule
from recframe.features import collaborative_item_embeddings, hybrid_item_features, item_content_features
from recframe.features.collaborative import read_run_info
from recframe.tokenizers import RQKMeansTokenizer

CONFIG = "configs/sasrec_ml100k.yaml"


def loo_train() -> Any:
    """The training split the generative ML-100K configs use (leave-one-out, max_len 50)."""
    return RecDataModule(dataset="ml-100k", split="loo", max_len=50).split.train


def same_code_cosine(table: np.ndarray, groups: np.ndarray) -> float:
    """Mean cosine (rows of ``table`` without padding) over item pairs in the same group."""
    x = table[1:] / np.maximum(np.linalg.norm(table[1:], axis=1, keepdims=True), 1e-12)
    sim = x @ x.T
    same = groups[:, None] == groups[None, :]
    np.fill_diagonal(same, False)
    return float(sim[same].mean())


def run_seed(train: Any, text: np.ndarray, genres: np.ndarray, seed: int, weight: float,
             config: str = CONFIG) -> dict[str, Any]:
    """Table + run record for one SASRec seed, and RQ-KMeans stats on the three inputs."""
    table = collaborative_item_embeddings(train, config, seed=seed)
    info = read_run_info(train, config, seed) or {}
    hybrid = hybrid_item_features(text, table, weight)
    inputs = {"text": text, "collaborative": table, f"hybrid (w={weight})": hybrid}
    rows = {}
    for name, x in inputs.items():
        sid = RQKMeansTokenizer(3, 64, seed=0).fit(x)
        rows[name] = {**describe(sid, genres), "same_l1_cf_cos": same_code_cosine(table, sid.codes[1:, 0])}
        print(f"seed {seed} {name}: collision rate {rows[name]['collision_rate']:.3f}", flush=True)
    return {"run": info, "all_pairs_cf_cos": same_code_cosine(table, np.zeros(len(table) - 1)), "rows": rows}


def markdown(results: dict[int, dict[str, Any]], meta: dict[str, Any]) -> str:
    """Two tables: the SASRec runs, then the RQ-KMeans stats per seed and input."""
    fmt = lambda vals, p: " / ".join(f"{v:.{p}f}" for v in vals)  # noqa: E731
    lines = ["## Collaborative semantic-ID inputs on ML-100K (leave-one-out training split)", "",
             f"Command: `{meta['command']}` (wall time {meta['wall_seconds']:.0f} s). SASRec: "
             f"`{meta['config']}`, no wall-clock cap, early stopping on validation NDCG@10, best-validation "
             "checkpoint's item table.", "",
             "| SASRec seed | best epoch | epochs run | validation NDCG@10 | train s |",
             "|---:|---:|---:|---:|---:|"]
    for seed, r in results.items():
        run = r["run"]
        ndcg = "-" if run.get("best_val_ndcg") is None else f"{run['best_val_ndcg']:.4f}"
        lines.append(f"| {seed} | {run.get('best_epoch', '-')} | {run.get('epochs', '-')} | {ndcg} | "
                     f"{run.get('train_seconds', '-')} |")
    lines += ["", "RQ-KMeans 3 x 64 (seed 0) on each input:", "",
              "| SASRec seed | input | perplexity per level | collision rate | disamb. size | unique paths | "
              "same-L1 share genre | same-L1 CF cos |", "|---:|---|---|---:|---:|---:|---:|---:|"]
    for seed, r in results.items():
        for name, row in r["rows"].items():
            lines.append(f"| {seed} | {name} | {fmt(row['perplexity'], 1)} | {row['collision_rate']:.3f} | "
                         f"{row['disambiguation_size']} | {row['n_unique_paths']} | "
                         f"{row['same_l1_share_genre']:.3f} | {row['same_l1_cf_cos']:.3f} |")
    lines += ["", f"Over all item pairs: share a genre {meta['share_genre_all_pairs']:.3f}; mean CF cosine "
              + " / ".join(f"{r['all_pairs_cf_cos']:.3f}" for r in results.values()) + " (per seed). "
              "same-L1 CF cos: mean cosine of the SASRec vectors of item pairs with the same first-level "
              "code; other columns as in tokenizer_stats.md.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--collab-weight", type=float, default=0.5)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    train = loo_train()
    text = item_content_features(train.item_features)
    genres = genre_sets(train.item_features.categories)
    results = {seed: run_seed(train, text, genres, seed, args.collab_weight) for seed in args.seeds}
    given = sys.argv[1:] if argv is None else argv
    meta = {"command": " ".join(["python -m benchmarks.collab_features", *given]), "config": CONFIG,
            "train_fingerprint": train.fingerprint, "collab_weight": args.collab_weight,
            "share_genre_all_pairs": share_genre_rate(genres), "wall_seconds": time.perf_counter() - start}
    md = markdown(results, meta)
    print(md)
    if not args.no_write:
        write_results("collab_features", {**meta, "seeds": {str(k): v for k, v in results.items()}}, md)
    return {**meta, "seeds": results}


if __name__ == "__main__":
    main()
