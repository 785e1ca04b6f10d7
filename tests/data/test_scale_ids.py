"""The data layer at scale keeps every table it built before (issue 32, item 1).

Integer ids are mapped as integers, sorted sources skip the lexsort, the synthetic generator is
vectorised and exact duplicates are found by sorting tied rows only. None of that may change a table:

* ML-100K: the data-module fingerprints (ids, timestamps, ratings, labels and raw-id maps of train,
  valid and test, plus the split settings) equal the values the code before the change recorded in its
  benchmark results; skipped when ML-100K is not prepared (``recframe data prepare ml-100k``).
* the ML-100K excerpt of the catalog tests, synthetic tables of several shapes and a Parquet table
  with integer ids hash to the values the code before the change gave (hard-coded below);
* the integer id mapping and the sorted-table duplicate search agree with the string mapping and the
  full lexsort they replace, on random tables.

Reference values: the ML-100K fingerprints are the ``data_fingerprint`` of
``benchmarks/results/train_vs_recbole.json`` (``python -m benchmarks.train_vs_recbole``, loo) and of
``benchmarks/results/ml100k_signed_margin_search/*.json`` (``python -m benchmarks.ml100k_signed``,
ratio), and the code of the commit before the change (64de36a, unpacked with ``git archive 64de36a
recframe`` and put first on ``PYTHONPATH``) prints the same three values from
``RecDataModule(dataset="ml-100k", **settings).fingerprint``; the other values were printed by
``_table_hash`` / ``_synthetic_hash`` below, run on that same code.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recframe.data import catalog
from recframe.data.catalog import convert_ml100k
from recframe.data.datamodule import RecDataModule
from recframe.data.filters import exact_duplicates
from recframe.data.interactions import Interactions, dense_ids, sort_order
from recframe.data.sources import load_atomic, load_table
from recframe.data.synthetic import SyntheticData, make_synthetic

RAW = Path(__file__).parent / "fixtures" / "ml100k_raw"

# RecDataModule.fingerprint of ML-100K under three settings, as recorded by the code before the change
ML100K_FINGERPRINTS: list[tuple[dict[str, Any], str]] = [
    ({"split": "loo", "max_len": 50, "window_stride": 25}, "75cc2d6a14421c93"),  # train_vs_recbole.json
    ({"split": "ratio", "ratio": (0.8, 0.1)}, "6c0fc0a16e003df8"),  # LightGCN-Neg signed margin search
    # SASRec signed margin search
    ({"split": "ratio", "ratio": (0.8, 0.1), "max_len": 50, "window_stride": 25}, "3fdcabe572da8d72"),
]

SYNTHETIC_HASHES: list[tuple[dict[str, Any], str]] = [
    ({}, "eec854c148b7939c"),
    ({"n_users": 400, "n_items": 200, "n_clusters": 5, "mean_length": 30, "seed": 3}, "fcc2d4865c6b2443"),
    ({"n_users": 200, "n_items": 120, "n_clusters": 4, "mean_length": 20, "seed": 0}, "da7318bd7c3da230"),
    ({"n_users": 20, "n_clusters": 1, "dislike_rate": 0, "drift": 0}, "8a920eaa3c22f222"),
    ({"n_users": 300, "n_items": 900, "n_clusters": 12, "mean_length": 15, "drift": 0.9, "seq_strength": 0.5,
      "seed": 5, "min_length": 1}, "944de5db75e615f5"),
    ({"n_users": 150, "n_items": 40, "n_clusters": 3, "mean_length": 60, "dislike_rate": 0.6, "drift": 1.0,
      "seq_strength": 1.0, "popularity_skew": 0.0, "seed": 11}, "3bb35db0152f3f76"),
]
EXCERPT_HASH = "6751b780a321ae70"
PARQUET_HASH = "b68bfac37d4af497"


def _table_hash(inter: Interactions) -> str:
    """The table's fingerprint (rows and raw-id maps) plus its item feature texts."""
    h = hashlib.sha256(inter.fingerprint.encode())
    if inter.item_features is not None:
        h.update("\x1f".join(inter.item_features.texts()).encode())
    return h.hexdigest()[:16]


def _synthetic_hash(data: SyntheticData) -> str:
    """The table plus every ground-truth array of a synthetic data set."""
    h = hashlib.sha256(_table_hash(data.interactions).encode())
    for arr in (data.user_cluster, data.user_cluster_late, data.drift_step, data.item_cluster, data.successor,
                data.row_in_cluster):
        h.update(np.ascontiguousarray(arr).tobytes())
        h.update(str(arr.dtype).encode())
    h.update("\x1f".join(data.category_names).encode())
    return h.hexdigest()[:16]


def _string_dense_ids(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mapping before the change: every row stringified, ranked by first appearance via np.unique."""
    strings = np.asarray(raw).astype(str)
    uniq, first, inverse = np.unique(strings, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[order] = np.arange(1, len(uniq) + 1)
    return np.concatenate([["[PAD]"], uniq[order]]).astype(object), rank[inverse.ravel()]


def _lexsort_duplicates(inter: Interactions) -> np.ndarray:
    """The duplicate search before the change: a full lexsort over every row."""
    n = len(inter)
    order = np.lexsort((np.arange(n), inter.timestamp, inter.item, inter.user))
    u, i, t = inter.user[order], inter.item[order], inter.timestamp[order]
    repeat = np.zeros(n, dtype=bool)
    repeat[1:] = (u[1:] == u[:-1]) & (i[1:] == i[:-1]) & (t[1:] == t[:-1])
    mask = np.zeros(n, dtype=bool)
    mask[order[repeat]] = True
    return mask


@pytest.mark.parametrize(("settings", "expected"), ML100K_FINGERPRINTS)
def test_ml100k_split_fingerprint_unchanged(settings: dict[str, Any], expected: str) -> None:
    root = catalog.default_root()
    if not catalog.is_prepared("ml-100k", root):
        pytest.skip("ML-100K is not prepared (recframe data prepare ml-100k)")
    dm = RecDataModule(dataset="ml-100k", root=str(root), **settings)
    assert dm.fingerprint == expected


def test_ml100k_excerpt_table_unchanged(tmp_path: Path) -> None:
    files = convert_ml100k(*((RAW / f).read_bytes() for f in ("u.data", "u.item", "u.user")))
    folder = tmp_path / "ml-100k"
    folder.mkdir()
    for name, data in files.items():
        (folder / name).write_bytes(data)
    assert _table_hash(load_atomic(folder)) == EXCERPT_HASH


def test_parquet_integer_ids_map_as_before(tmp_path: Path) -> None:
    import pandas as pd

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"u": rng.integers(0, 50, 500) * 7 + 3, "i": rng.integers(0, 80, 500),
                          "t": rng.integers(0, 100, 500), "r": rng.integers(1, 6, 500)})
    frame.to_parquet(tmp_path / "x.parquet")
    frame.to_csv(tmp_path / "x.csv", index=False)
    columns = {"user": "u", "item": "i", "timestamp": "t", "rating": "r"}
    from_parquet = load_table(tmp_path / "x.parquet", columns)
    assert from_parquet.user_ids.dtype == object and isinstance(from_parquet.user_ids[1], str)
    assert _table_hash(from_parquet) == PARQUET_HASH
    assert _table_hash(load_table(tmp_path / "x.csv", columns)) == PARQUET_HASH  # string ids, same table


@pytest.mark.parametrize(("kwargs", "expected"), SYNTHETIC_HASHES)
def test_synthetic_generator_output_unchanged(kwargs: dict[str, Any], expected: str) -> None:
    assert _synthetic_hash(make_synthetic(**kwargs)) == expected


def test_integer_and_string_id_mapping_agree() -> None:
    rng = np.random.default_rng(1)
    for trial in range(30):
        n = int(rng.integers(1, 400))
        ints = rng.integers(-5, int(rng.integers(1, 60)), n) * int(rng.integers(1, 1000))
        cases = [ints, ints.astype(np.uint32) if ints.min() >= 0 else ints.astype(np.int32),
                 ints.astype(str), ints.astype(str).astype(object), ints.astype(float), ints > 0]
        for raw in cases:
            ref_map, ref_dense = _string_dense_ids(raw)
            id_map, dense = dense_ids(raw)
            assert id_map.tolist() == ref_map.tolist(), (trial, raw.dtype)
            assert dense.dtype == np.int64 and np.array_equal(dense, ref_dense), (trial, raw.dtype)
        prefixed, _ = dense_ids(ints, "u")
        assert prefixed.tolist() == ["[PAD]"] + [f"u{s}" for s in _string_dense_ids(ints)[0][1:]]


def test_from_raw_integer_table_equals_string_table() -> None:
    rng = np.random.default_rng(2)
    n = 3_000
    users, items = rng.integers(0, 200, n) * 13, rng.integers(0, 500, n)
    times, ratings = rng.integers(0, 50, n).astype(float), rng.integers(1, 6, n).astype(float)
    as_ints = Interactions.from_raw(users, items, times, ratings)
    as_strings = Interactions.from_raw(users.astype(str).tolist(), items.astype(str).tolist(), times, ratings)
    assert as_ints.fingerprint == as_strings.fingerprint
    assert as_ints.user_index(users[0]) == as_strings.user_index(str(users[0]))
    prefixed = Interactions.from_raw(users, items, times, ratings, user_prefix="u", item_prefix="i")
    assert prefixed.user_ids[1] == f"u{users[0]}" and prefixed.item_ids[1] == f"i{items[0]}"
    assert np.array_equal(prefixed.user, as_ints.user) and np.array_equal(prefixed.item, as_ints.item)


def test_sorted_duplicate_search_equals_full_lexsort() -> None:
    rng = np.random.default_rng(3)
    found = 0
    for _ in range(100):
        n = int(rng.integers(1, 300))
        inter = Interactions.from_raw(rng.integers(0, 5, n), rng.integers(0, int(rng.integers(1, 6)), n),
                                      rng.integers(0, int(rng.integers(1, 8)), n).astype(float))
        assert sort_order(inter.user, inter.timestamp) is None  # from_raw sorts: the fast path runs
        mask = exact_duplicates(inter)
        assert np.array_equal(mask, _lexsort_duplicates(inter))
        found += int(mask.sum())
    assert found > 0
    # a table out of (user, time) order takes the full sort, with the same answer
    shuffled = inter._take(rng.permutation(len(inter)))
    assert np.array_equal(exact_duplicates(shuffled), _lexsort_duplicates(shuffled))


def test_sort_order_is_the_stable_lexsort() -> None:
    rng = np.random.default_rng(4)
    user, time = rng.integers(0, 30, 2_000), rng.integers(0, 20, 2_000).astype(float)
    assert np.array_equal(sort_order(user, time), np.lexsort((time, user)))
    order = np.lexsort((time, user))
    assert sort_order(user[order], time[order]) is None
    assert sort_order(np.array([1]), np.array([0.0])) is None
