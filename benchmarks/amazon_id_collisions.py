"""How well attribute-only semantic IDs can tell the Amazon items apart.

Run (needs the datasets prepared: ``recframe data prepare amazon-beauty`` and sports, toys)::

    python -m benchmarks.amazon_id_collisions            # all three datasets, 1-7 minutes (mostly loading)
    python -m benchmarks.amazon_id_collisions --datasets toys --no-write

These files carry no item text, only attribute ids (brand and categories), so the content IDs of the
Amazon tables are built from the attribute multi-hot (``features: none``). Items with the same attribute set
get the same feature vector and therefore, under any tokenizer, the same semantic path; only the
disambiguation level tells them apart. This script measures that, per dataset:

* **attribute sets**: distinct sets, the fraction of items whose set is shared, the largest group;
* for each tokenizer of the Amazon configs (TIGER: RQ-KMeans 3 x 64, seed 0; FLASH: SimHash 4 x 8 bits,
  seed 0), the collision rate before disambiguation, distinct paths and the disambiguation level's size;
* the same collision rate over the **test targets** (each user's last item, the leave-one-out test);
* the **path-only ceiling** of NDCG@10: a model that ranks the test target's path first but cannot tell the
  items on that path apart (it ranks them in uniformly random order), so the target lands at a uniform rank
  ``r`` in ``1..g`` for a group of ``g`` items. Its expected NDCG@10 is
  ``mean over test users of (1/g) * sum_{r=1}^{min(g,10)} 1 / log2(r + 1)``.
  A decoder that scores the disambiguation code independently of the path (FLASH's parallel heads) is in
  this position for the items of one path; an autoregressive decoder (TIGER) conditions that code on the
  path and the history, so it is not bound by the ceiling.

``--collaborative-seeds 0 1`` adds, per dataset and seed, the same statistics for the **collaborative**
IDs of the ``*_collab_*`` rows: the config tokenizers at that seed (the rows' tokenizer seed is the run
seed) over the SASRec item table those rows quantise (``configs/amazon/sasrec_<dataset>.yaml`` at that
seed, best validation epoch). It reads the table from the collaborative cache only and never trains one:
a missing table is one error naming the command that caches it. These rows go to
``amazon_id_collisions_collaborative.{json,md}`` for whichever datasets were given.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import write_results
from recframe.data import catalog
from recframe.data.splits import leave_one_out
from recframe.features import item_content_features
from recframe.features.collaborative import collaborative_cache_path
from recframe.tokenizers import RQKMeansTokenizer, SIDTokenizer, SimHashTokenizer
from recframe.tokenizers.collisions import path_groups

DATASETS = {"beauty": "amazon-beauty", "sports": "amazon-sports", "toys": "amazon-toys"}
CONFIGS = Path(__file__).resolve().parent.parent / "configs" / "amazon"


def config_tokenizers(seed: int = 0) -> dict[str, SIDTokenizer]:
    """The tokenizers of ``configs/amazon/{tiger,flash}_*.yaml``, by row label."""
    return {"TIGER: RQ-KMeans 3x64": RQKMeansTokenizer(3, 64, seed=seed),
            "FLASH: SimHash 4x8 bits": SimHashTokenizer(4, 8, seed=seed)}


def feature_groups(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(group, group_size)`` per real item: items with identical feature rows share a group."""
    _, group = np.unique(np.asarray(features), axis=0, return_inverse=True)
    return path_groups(group.reshape(-1, 1))


def path_only_ndcg(group_size: np.ndarray, k: int = 10) -> np.ndarray:
    """Expected NDCG@k per target whose path holds ``group_size`` items, ranked uniformly within it."""
    discounts = np.cumsum(1.0 / np.log2(np.arange(2, k + 2)))  # sum_{r<=m} 1/log2(r+1), m = 1..k
    g = np.asarray(group_size, dtype=np.int64)
    return discounts[np.minimum(g, k) - 1] / g


def describe(features: np.ndarray, targets: np.ndarray, seed: int) -> dict[str, Any]:
    """Attribute-set and tokenizer collision statistics of one dataset (``features`` without row 0)."""
    attr_group, attr_size = feature_groups(features)
    rows: dict[str, Any] = {"attribute sets": {
        "n_paths": int(attr_group.max()) + 1, "collision_rate": float((attr_size > 1).mean()),
        "max_group": int(attr_size.max()), "disambiguation_size": None, "fit_seconds": 0.0,
        "target_collision_rate": float((attr_size[targets - 1] > 1).mean()),
        "path_only_ndcg10": float(path_only_ndcg(attr_size[targets - 1]).mean())}}
    padded = np.vstack([np.zeros((1, features.shape[1]), features.dtype), features])
    rows.update(tokenizer_rows(padded, targets, seed))
    return rows


def tokenizer_rows(padded: np.ndarray, targets: np.ndarray, seed: int, label: str = ""
                   ) -> dict[str, dict[str, Any]]:
    """Collision statistics of each config tokenizer (at ``seed``) fitted on ``padded`` (row 0 = padding),
    keyed ``label + tokenizer row label``."""
    rows: dict[str, dict[str, Any]] = {}
    for name, tok in config_tokenizers(seed).items():
        table = tok.fit(padded)
        sem = table.codes[1:, :table.semantic_depth]
        _, size = path_groups(sem)
        s = table.stats
        rows[label + name] = {"n_paths": s["n_unique_paths"], "collision_rate": s["collision_rate"],
                              "max_group": s["max_collision_group"],
                              "disambiguation_size": s["disambiguation_size"],
                              "fit_seconds": s["fit_seconds"],
                              "target_collision_rate": float((size[targets - 1] > 1).mean()),
                              "path_only_ndcg10": float(path_only_ndcg(size[targets - 1]).mean())}
    return rows


def cached_sasrec_table(dataset: str, train: Any, seed: int) -> np.ndarray:
    """The cached SASRec item table ``[n_items + 1, d]`` the collaborative rows of ``dataset`` use at
    ``seed``; raises ``FileNotFoundError`` naming the command that caches it when it is not cached."""
    config = CONFIGS / f"sasrec_{dataset}.yaml"
    path = collaborative_cache_path(train, config, seed)
    if not path.is_file():
        raise FileNotFoundError(
            f"no cached SASRec item table for {dataset} seed {seed} (expected {path}); cache it with "
            f'python -m benchmarks.amazon --dataset {dataset} --rows "FLASH (collaborative IDs)" '
            f"--seeds {seed}")
    return np.load(path, allow_pickle=False)


def describe_collaborative(dataset: str, train: Any, targets: np.ndarray, seeds: list[int]
                           ) -> dict[str, dict[str, Any]]:
    """:func:`tokenizer_rows` over the cached SASRec item table of each seed."""
    rows: dict[str, dict[str, Any]] = {}
    for seed in seeds:
        rows.update(tokenizer_rows(cached_sasrec_table(dataset, train, seed), targets, seed,
                                   label=f"SASRec table seed {seed}, "))
    return rows


ATTRIBUTE_TITLE = "Attribute-only semantic IDs on the Amazon files: how many items share a path"


def markdown(results: dict[str, dict[str, Any]], meta: dict[str, Any], title: str = ATTRIBUTE_TITLE) -> str:
    """The table with its provenance line and column notes."""
    lines = [f"## {title}", "",
             f"Command: `{meta['command']}` (wall {meta['wall_seconds']:.0f} s, tokenizer seed "
             f"{meta['seed']}).", "",
             "| dataset | items | IDs | distinct paths | items sharing their path | largest group | "
             "disamb. size | test targets sharing their path | path-only NDCG@10 ceiling |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for ds, r in results.items():
        for name, row in r["rows"].items():
            dis = "–" if row["disambiguation_size"] is None else str(row["disambiguation_size"])
            lines.append(f"| {ds} | {r['n_items']} | {name} | {row['n_paths']} | "
                         f"{row['collision_rate']:.3f} | {row['max_group']} | {dis} | "
                         f"{row['target_collision_rate']:.3f} | "
                         f"{row['path_only_ndcg10']:.4f} |")
    lines += ["", "distinct paths: distinct semantic paths before disambiguation (attribute sets: distinct "
              "sets); items sharing their path: the collision rate; disamb. size: codes of the appended "
              "level; "
              "test targets: each user's last item; path-only ceiling: the expected NDCG@10 of a model that "
              "puts the target's path first and orders the items on it at random (module docstring).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--seed", type=int, default=0, help="tokenizer seed (the configs use 0)")
    parser.add_argument("--root", default=None, help="dataset root (default $RECFRAME_DATA or datasets)")
    parser.add_argument("--collaborative-seeds", type=int, nargs="*", default=[],
                        help="measure the collaborative IDs over the cached SASRec tables of these seeds")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    results, collab = {}, {}
    for ds in args.datasets:
        inter = catalog.load(DATASETS[ds], args.root)
        split = leave_one_out(inter)  # the benchmark's split (split: loo)
        targets = split.test.item
        if args.collaborative_seeds:
            collab[ds] = {"n_items": int(inter.n_items), "n_test_users": int(len(targets)),
                          "rows": describe_collaborative(ds, split.train, targets, args.collaborative_seeds)}
        else:
            features = item_content_features(inter.item_features, encoder="none")[1:]
            results[ds] = {"n_items": int(len(features)), "n_test_users": int(len(targets)),
                           "rows": describe(features, targets, args.seed)}
        print(f"{ds}: done", flush=True)
    given = sys.argv[1:] if argv is None else argv
    meta = {"command": " ".join(["python -m benchmarks.amazon_id_collisions", *given]), "seed": args.seed,
            "wall_seconds": time.perf_counter() - start}
    if collab:
        meta["seed"] = "the run seed of each row"
        md = markdown(collab, meta, title="Collaborative semantic IDs (SASRec item tables) on the Amazon "
                                          "files: how many items share a path")
        print(md)
        if not args.no_write:
            write_results("amazon_id_collisions_collaborative", {**meta, "datasets": collab}, md)
        return {**meta, "datasets": collab}
    md = markdown(results, meta)
    print(md)
    if not args.no_write and set(args.datasets) == set(DATASETS):
        write_results("amazon_id_collisions", {**meta, "datasets": results}, md)
    return {**meta, "datasets": results}


if __name__ == "__main__":
    main()
