"""Seen-item exclusion: never a seen item / 0 / -1, exact top-k among the eligible, short rows."""

from __future__ import annotations

import logging

import faiss
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recframe.retrieval import ItemIndex
from recframe.retrieval.exclusion import as_exclusion_set
from tests.retrieval.synthetic import random_items, reference_top_k

_INDEXES: dict[tuple[str, int], ItemIndex] = {}


def _index(factory: str, n_items: int) -> tuple[ItemIndex, np.ndarray]:
    items = random_items(n_items, 6, seed=n_items)
    key = (factory, n_items)
    if key not in _INDEXES:
        _INDEXES[key] = ItemIndex.from_embeddings(items, factory=factory,
                                                  **({"ef_search": 16} if factory.startswith("HNSW") else {}))
    return _INDEXES[key], items


def _as_format(seen: list[np.ndarray], fmt: str, n_items: int):  # noqa: ANN202
    if fmt == "list":
        return seen
    indptr = np.concatenate([[0], np.cumsum([len(s) for s in seen])]).astype(np.int64)
    indices = np.concatenate(seen).astype(np.int32) if seen else np.empty(0, np.int64)
    if fmt == "csr":
        return (indptr, indices)
    return sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(len(seen), n_items + 1))


@st.composite
def _case(draw):  # noqa: ANN202
    n_items = draw(st.sampled_from([1, 7, 40, 120]))
    n_rows = draw(st.integers(1, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    seen = []
    for _ in range(n_rows):
        mode = draw(st.sampled_from(["none", "some", "almost_all", "all", "dupes_and_pad"]))
        if mode == "none":
            ids = np.empty(0, np.int64)
        elif mode == "some":
            ids = rng.choice(np.arange(1, n_items + 1), size=rng.integers(1, n_items + 1), replace=False)
        elif mode == "almost_all":
            keep = rng.integers(0, 3)  # leave 0..2 items eligible
            ids = rng.permutation(np.arange(1, n_items + 1))[keep:]
        elif mode == "all":
            ids = np.arange(1, n_items + 1)
        else:
            ids = np.concatenate([[0], rng.integers(1, n_items + 1, size=5)])
        seen.append(np.asarray(ids, dtype=np.int64))
    k = draw(st.integers(1, n_items + 3))
    fmt = draw(st.sampled_from(["list", "csr", "scipy"]))
    return n_items, rng.standard_normal((n_rows, 6)).astype(np.float32), seen, k, fmt


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_case(), factory=st.sampled_from(["Flat", "HNSW8"]))
def test_exclusion_never_returns_seen_padding_or_minus_one(case, factory: str) -> None:  # noqa: ANN001
    n_items, queries, seen, k, fmt = case
    index, items = _index(factory, n_items)
    res = index.search(queries, k, exclude=_as_format(seen, fmt, n_items))
    assert res.items.shape == (len(seen), k) and res.counts.shape == (len(seen),)
    for row, ids in enumerate(seen):
        c = int(res.counts[row])
        got = res.items[row, :c]
        eligible = n_items - len(np.setdiff1d(ids, [0]))
        assert got.min(initial=1) >= 1 and got.max(initial=1) <= n_items  # no 0, no -1, in range
        assert not np.isin(got, ids).any()  # never a seen item
        assert len(np.unique(got)) == c  # no duplicates
        assert (res.items[row, c:] == 0).all() and np.isneginf(res.scores[row, c:]).all()
        assert np.all(np.diff(res.scores[row, :c]) <= 1e-6)  # best first
        if factory == "Flat":  # exact: complete whenever enough items are eligible, and the right ones
            assert c == min(k, eligible)
            ref_ids, ref_scores = reference_top_k(queries[row:row + 1], items, k, [ids])
            np.testing.assert_allclose(res.scores[row, :c], ref_scores[0, :c], rtol=1e-5, atol=1e-5)
        else:
            assert c <= min(k, eligible)


def test_refetch_completes_rows_with_many_seen_top_items(monkeypatch: pytest.MonkeyPatch) -> None:
    """One row whose 300 best items are all seen: the first pass (k + 90th-percentile exclusions) comes
    up short for it, and only that row is searched again, with a larger k."""
    items = random_items(2000, 16, seed=1)
    queries = np.random.default_rng(2).standard_normal((20, 16)).astype(np.float32)
    ref_ids, _ = reference_top_k(queries, items, 300)
    seen = [np.empty(0, np.int64)] * 19 + [ref_ids[19]]
    calls: list[tuple[int, int]] = []
    original = ItemIndex._raw_search

    def spy(self: ItemIndex, q: np.ndarray, k: int):  # noqa: ANN202
        calls.append((q.shape[0], k))
        return original(self, q, k)

    monkeypatch.setattr(ItemIndex, "_raw_search", spy)
    res = ItemIndex.from_embeddings(items).search(queries, 10, exclude=seen)
    assert calls == [(20, 10), (1, 310)]
    np.testing.assert_array_equal(res.items, reference_top_k(queries, items, 10, seen)[0])
    assert res.complete


def test_short_rows_are_counted_and_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    items = random_items(30, 8, seed=3)
    index = ItemIndex.from_embeddings(items)
    queries = np.random.default_rng(4).standard_normal((4, 8)).astype(np.float32)
    seen = [np.arange(1, 31), np.arange(1, 28), np.empty(0, np.int64), np.arange(1, 25)]
    with caplog.at_level(logging.WARNING, logger="recframe.retrieval"):
        res = index.search(queries, 5, exclude=seen)
    np.testing.assert_array_equal(res.counts, [0, 3, 5, 5])
    assert not res.complete
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "recframe.retrieval"]
    assert len(warnings) == 1
    assert "2 of 4 query rows have fewer than k=5 eligible items" in warnings[0].getMessage()
    assert set(res.items[1, :3]) == {28, 29, 30} and (res.items[1, 3:] == 0).all()
    valid_items, valid_scores = res.row(1)
    assert len(valid_items) == 3 and np.isfinite(valid_scores).all()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="recframe.retrieval"):
        index.search(queries, 5)
    assert not caplog.records


def test_k_larger_than_catalogue() -> None:
    items = random_items(6, 4)
    res = ItemIndex.from_embeddings(items).search(np.ones((2, 4), np.float32), 10)
    assert (res.counts == 6).all() and set(res.items[0, :6]) == set(range(1, 7))


def test_exclusion_formats_agree_and_bad_input_is_named() -> None:
    seen = [np.array([3, 1, 3]), np.array([], dtype=np.int64), np.array([0, 9])]
    sets = [as_exclusion_set(_as_format(seen, f, 10), 3, 10) for f in ("list", "csr", "scipy")]
    for s in sets[1:]:
        np.testing.assert_array_equal(s.keys, sets[0].keys)
    np.testing.assert_array_equal(sets[0].per_row, [2, 0, 1])  # duplicates and padding id 0 dropped
    with pytest.raises(ValueError, match="exclude lists 2 id arrays but there are 3 queries"):
        as_exclusion_set(seen[:2], 3, 10)
    with pytest.raises(ValueError, match="exclude holds item id 11, outside 0..n_items=10"):
        as_exclusion_set([[11], [], []], 3, 10)
    with pytest.raises(ValueError, match="exclude holds item id -1"):
        as_exclusion_set([[-1], [], []], 3, 10)
    with pytest.raises(ValueError, match=r"exclude\[0\] must be a 1-D array of integer item ids"):
        as_exclusion_set([[1.5], [], []], 3, 10)
    with pytest.raises(ValueError, match="exclude indptr has shape"):
        as_exclusion_set((np.array([0, 1]), np.array([1])), 3, 10)
    with pytest.raises(ValueError, match="must start at 0"):
        as_exclusion_set((np.array([0, 2, 1, 1]), np.array([1])), 3, 10)
    with pytest.raises(ValueError, match="sparse matrix with 2 rows"):
        as_exclusion_set(sp.csr_matrix((2, 11)), 3, 10)
    with pytest.raises(ValueError, match="exclude has type int"):
        as_exclusion_set(5, 3, 10)


def test_exhausted_ivf_rows_stop_after_one_refetch(monkeypatch: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """IVF with nprobe=1 can only return the items of one list; asking for more does not help, so
    the short rows are retried once, then reported short (with all the items the list holds)."""
    items = random_items(400, 8, seed=5)
    index = ItemIndex.from_embeddings(items, factory="IVF8,Flat", nprobe=1)
    queries = np.random.default_rng(6).standard_normal((5, 8)).astype(np.float32)
    ivf = faiss.extract_index_ivf(index._index)
    _, probed = ivf.quantizer.search(queries, 1)
    list_sizes = np.array([ivf.invlists.list_size(int(c)) for c in probed[:, 0]])
    assert (list_sizes < 150).all()
    calls: list[tuple[int, int]] = []
    original = ItemIndex._raw_search

    def spy(self: ItemIndex, q: np.ndarray, k: int):  # noqa: ANN202
        calls.append((q.shape[0], k))
        return original(self, q, k)

    monkeypatch.setattr(ItemIndex, "_raw_search", spy)
    with caplog.at_level(logging.WARNING, logger="recframe.retrieval"):
        res = index.search(queries, 150)
    assert calls == [(5, 150), (5, 300)]
    np.testing.assert_array_equal(res.counts, list_sizes)
    assert "5 of 5 query rows have fewer than k=150" in caplog.text
