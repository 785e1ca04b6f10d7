"""Attribute-only ID collisions: hand-computed groups and the path-only NDCG ceiling."""

import math

import numpy as np
import pytest

from benchmarks.amazon_id_collisions import describe, feature_groups, path_only_ndcg


def test_path_only_ndcg_by_hand() -> None:
    d = [1 / math.log2(r + 1) for r in range(1, 11)]
    got = path_only_ndcg(np.array([1, 2, 4, 10, 20]))
    want = [1.0, (d[0] + d[1]) / 2, sum(d[:4]) / 4, sum(d) / 10, sum(d) / 20]
    assert got == pytest.approx(want, rel=1e-12)


def test_feature_groups_share_identical_rows_only() -> None:
    x = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1e-6], [1.0, 0.0]])
    group, size = feature_groups(x)
    assert size.tolist() == [3, 1, 3, 1, 3]
    assert group[0] == group[2] == group[4] and len({group[0], group[1], group[3]}) == 3


def test_planted_duplicates_collide_under_every_tokenizer() -> None:
    rng = np.random.default_rng(0)
    features = rng.normal(size=(300, 8)).astype(np.float32)
    features[10:20] = features[10]  # ten items with one attribute set
    rows = describe(features, targets=np.array([11, 12, 1]), seed=0)
    attr = rows["attribute sets"]
    assert attr["n_paths"] == 291 and attr["max_group"] == 10
    assert attr["collision_rate"] == pytest.approx(10 / 300)
    assert attr["target_collision_rate"] == pytest.approx(2 / 3)
    assert attr["path_only_ndcg10"] == pytest.approx((2 * path_only_ndcg(np.array([10]))[0] + 1) / 3)
    for name, row in rows.items():
        assert row["max_group"] >= 10, name  # identical features cannot get different paths
        assert row["target_collision_rate"] >= 2 / 3, name


def test_collaborative_rows_read_the_cached_table_and_never_train(tmp_path, monkeypatch) -> None:
    import benchmarks.amazon_id_collisions as mod

    rng = np.random.default_rng(1)
    table = np.vstack([np.zeros((1, 16)), rng.normal(size=(200, 16))]).astype(np.float32)
    table[51:61] = table[51]  # items 51-60 share one table row, so they must share every path
    cached = tmp_path / "table.npy"
    monkeypatch.setattr(mod, "collaborative_cache_path", lambda train, config, seed: cached)
    with pytest.raises(FileNotFoundError, match=r'--rows "FLASH \(collaborative IDs\)" --seeds 3'):
        mod.describe_collaborative("toys", train=None, targets=np.array([1, 52]), seeds=[3])
    np.save(cached, table)
    rows = mod.describe_collaborative("toys", train=None, targets=np.array([1, 52]), seeds=[3])
    assert set(rows) == {f"SASRec table seed 3, {name}" for name in mod.config_tokenizers(3)}
    for row in rows.values():
        assert row["max_group"] >= 10 and row["target_collision_rate"] >= 0.5
    flash = rows["SASRec table seed 3, FLASH: SimHash 4x8 bits"]
    # 32 random hyperplanes keep 191 distinct Gaussian rows apart almost surely: 190 singletons + the group
    assert flash["n_paths"] >= 185
