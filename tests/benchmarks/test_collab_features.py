"""benchmarks.collab_features: the same-code cosine by hand and one seed end to end on synthetic data."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import collab_features as cf
from benchmarks.tokenizer_stats import genre_sets
from recframe.data.datamodule import RecDataModule
from recframe.features import metadata_features


def test_same_code_cosine_by_hand():
    table = np.array([[0, 0], [1, 0], [2, 0], [0, 1], [1, 1]], dtype=np.float32)
    groups = np.array([0, 0, 1, 1])
    # pairs (1,2): cos 1; (3,4): cos 1/sqrt2
    assert cf.same_code_cosine(table, groups) == pytest.approx((1 + 2 ** -0.5) / 2)


def test_one_seed_on_synthetic(monkeypatch, tmp_path):
    monkeypatch.setenv("RECFRAME_DATA", str(tmp_path))  # the default cache then lives under tmp_path
    train = RecDataModule(dataset="synthetic", max_len=20, synthetic={
        "n_users": 200, "n_items": 120, "n_clusters": 4, "mean_length": 20, "seed": 0}).split.train
    text = metadata_features(train.item_features)
    genres = genre_sets(train.item_features.categories)
    out = cf.run_seed(train, text, genres, seed=0, weight=0.5, config="configs/smoke/sasrec_item_table.yaml")
    assert out["run"]["best_epoch"] >= 1 and (tmp_path / ".cache" / "item_collab").is_dir()
    rows = out["rows"]
    assert set(rows) == {"text", "collaborative", "hybrid (w=0.5)"}
    # first-level codes of the collaborative table group CF-similar items: above the all-pairs mean
    assert rows["collaborative"]["same_l1_cf_cos"] > out["all_pairs_cf_cos"] + 0.1
    meta = {"command": "x", "wall_seconds": 1.0, "config": "c", "share_genre_all_pairs": 0.5}
    md = cf.markdown({0: out}, meta)
    assert "| 0 | collaborative |" in md
