"""k-core (property-checked against a naive reference), signed labels, duplicate removal."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recframe.data.filters import drop_duplicates, k_core, signed_labels
from recframe.data.interactions import DataError, Interactions


def _reference_core(pairs: list[tuple[int, int]], user_k: int, item_k: int) -> list[tuple[int, int]]:
    """Naive k-core: drop offending rows until none is left to drop."""
    rows = list(pairs)
    while True:
        uc = Counter(u for u, _ in rows)
        ic = Counter(i for _, i in rows)
        kept = [(u, i) for u, i in rows if uc[u] >= user_k and ic[i] >= item_k]
        if len(kept) == len(rows):
            return kept
        rows = kept


pair_lists = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(pairs=pair_lists, user_k=st.integers(0, 4), item_k=st.integers(0, 4))
def test_k_core_property(pairs, user_k, item_k):
    inter = Interactions.from_raw(
        [f"u{u}" for u, _ in pairs], [f"i{i}" for _, i in pairs], timestamps=np.arange(len(pairs))
    )
    expected = _reference_core(pairs, user_k, item_k)
    if not expected:
        with pytest.raises(
            DataError, match=rf"empty after .*user_k={user_k}, item_k={item_k}.*lower user_k/item_k"
        ):
            k_core(inter, user_k, item_k)
        return
    core = k_core(inter, user_k, item_k)
    users = np.bincount(core.user)[1:]
    items = np.bincount(core.item)[1:]
    assert (users >= user_k).all() and (items >= item_k).all()
    # compact: every remaining id is used
    assert len(users) == core.n_users and (users > 0).all() and (items > 0).all()
    got = sorted((core.user_ids[u], core.item_ids[i]) for u, i in zip(core.user, core.item))
    assert got == sorted((f"u{u}", f"i{i}") for u, i in expected)  # the maximal core, not a smaller one


def test_k_core_cascades_and_keeps_features():
    # item c has 1 row -> dropped; then user z has 1 row -> dropped; then item b has 1 row ...
    users = ["x", "x", "y", "y", "z", "z", "w", "w"]
    items = ["a", "b", "a", "d", "b", "c", "a", "d"]
    feats = {i: {"title": f"T{i}"} for i in "abcd"}
    inter = Interactions.from_raw(users, items, item_features=feats, name="toy")
    core = k_core(inter, user_k=2, item_k=2)
    assert sorted(core.user_ids[1:]) == ["w", "y"]
    assert sorted(core.item_ids[1:]) == ["a", "d"]
    assert [core.item_features.title[core.item_index(i)] for i in "ad"] == ["Ta", "Td"]
    assert len(k_core(inter, 0, 0)) == len(inter)


def test_k_core_empty_message():
    inter = Interactions.from_raw(["a", "b"], ["x", "y"])
    with pytest.raises(DataError, match=r"interactions: empty after 5-core filtering .*lower user_k/item_k"):
        k_core(inter)
    with pytest.raises(DataError, match=r"integers >= 0"):
        k_core(inter, -1, 2)


def test_signed_label_rule():
    ratings = [1, 2, 2.5, 3, 3.9, 4, 5, np.nan]
    inter = Interactions.from_raw(["u"] * 8, [f"i{k}" for k in range(8)], ratings=ratings)
    assert signed_labels(inter).label.tolist() == [-1, -1, 0, 0, 0, 1, 1, 0]
    assert signed_labels(inter, like_threshold=5, dislike_threshold=1).label.tolist() == [
        -1,
        0,
        0,
        0,
        0,
        0,
        1,
        0,
    ]
    assert signed_labels(inter).rating is inter.rating  # only the label changes
    for like, dislike in ((4, 4), (3, 4)):
        with pytest.raises(DataError, match=r"dislike_threshold < like_threshold"):
            signed_labels(inter, like_threshold=like, dislike_threshold=dislike)


def test_drop_duplicates():
    inter = Interactions.from_raw(
        ["u", "u", "u", "v"], ["a", "b", "a", "a"], timestamps=[1, 2, 3, 4], ratings=[1, 2, 3, 4]
    )
    last = drop_duplicates(inter)
    assert last.rating.tolist() == [2, 3, 4] and last.timestamp.tolist() == [2, 3, 4]
    first = drop_duplicates(inter, keep="first")
    assert first.rating.tolist() == [1, 2, 4]
    assert drop_duplicates(last) is last
    with pytest.raises(DataError, match=r"keep must be 'first' or 'last'"):
        drop_duplicates(inter, keep="any")
