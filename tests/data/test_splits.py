"""Splits never leak held-out interactions into training and never mutate their input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recframe.data.interactions import DataError, Interactions
from recframe.data.splits import chronological_ratio, leave_one_out, time_stages


def _random_interactions(seed: int, n_users: int = 30, n_items: int = 40, n: int = 400) -> Interactions:
    rng = np.random.default_rng(seed)
    users = rng.integers(0, n_users, n)
    items = rng.integers(0, n_items, n)
    ts = rng.integers(0, 50, n)  # many ties on purpose
    ratings = rng.integers(1, 6, n)
    return Interactions.from_raw(users, items, ts, ratings, labels=np.sign(ratings - 3))


def _row_keys(inter: Interactions) -> set[tuple]:
    return set(zip(inter.user.tolist(), inter.item.tolist(), inter.timestamp.tolist()))


def _check_no_leak(train: Interactions, held: Interactions) -> None:
    # per user, every held-out interaction is at or after the latest training one
    last_train = np.full(train.n_users + 1, -np.inf)
    np.maximum.at(last_train, train.user, train.timestamp)
    assert (held.timestamp >= last_train[held.user]).all()


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_leave_one_out_partitions_rows_and_never_leaks(seed: int) -> None:
    inter = _random_interactions(seed)
    sp = leave_one_out(inter)
    assert len(sp.train) + len(sp.valid) + len(sp.test) == len(inter)
    assert np.bincount(sp.test.user).max() == 1 and np.bincount(sp.valid.user).max() == 1
    _check_no_leak(sp.train, sp.valid)
    _check_no_leak(sp.train.concat(sp.valid), sp.test)
    # the test row of each user is that user's last row in the stable time order
    hist = inter.histories
    for u in np.unique(sp.test.user):
        assert sp.test.histories.of(u)[0] == hist.of(u)[-1]
        assert sp.valid.histories.of(u)[0] == hist.of(u)[-2]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.5, 0.8), st.floats(0.05, 0.15))
def test_chronological_ratio_never_leaks(seed: int, train: float, valid: float) -> None:
    inter = _random_interactions(seed)
    sp = chronological_ratio(inter, train=train, valid=valid)
    assert len(sp.train) + len(sp.valid) + len(sp.test) == len(inter)
    _check_no_leak(sp.train, sp.valid)
    _check_no_leak(sp.train.concat(sp.valid), sp.test)
    # liked and disliked alike are held out
    assert set(np.unique(sp.test.label)) <= {-1, 0, 1}


def test_ratio_split_holds_out_all_last_interactions_by_hand() -> None:
    inter = Interactions.from_raw(["u"] * 10, [f"i{k}" for k in range(10)], np.arange(10.0),
                                  ratings=[5, 1, 5, 1, 5, 1, 5, 1, 5, 1], labels=[1, -1] * 5)
    sp = chronological_ratio(inter, train=0.6, valid=0.2)
    assert sp.train.item_ids[sp.train.item].tolist() == [f"i{k}" for k in range(6)]
    assert sp.valid.item_ids[sp.valid.item].tolist() == ["i6", "i7"]
    assert sp.test.item_ids[sp.test.item].tolist() == ["i8", "i9"]
    assert sp.test.label.tolist() == [1, -1]


def test_time_ties_keep_file_order() -> None:
    inter = Interactions.from_raw(["u", "u", "u", "u"], ["a", "b", "c", "d"], [5, 5, 5, 5])
    sp = leave_one_out(inter)
    assert inter.item_ids[sp.test.item].tolist() == ["d"]
    assert inter.item_ids[sp.valid.item].tolist() == ["c"]


def test_splits_do_not_mutate_input() -> None:
    inter = _random_interactions(3)
    before = (inter.user.copy(), inter.item.copy(), inter.timestamp.copy())
    leave_one_out(inter)
    chronological_ratio(inter)
    time_stages(inter, 3)
    assert all(np.array_equal(a, b) for a, b in zip(before, (inter.user, inter.item, inter.timestamp)))


def test_time_stages_are_consecutive_and_cover_everything() -> None:
    inter = _random_interactions(5)
    stages = time_stages(inter, 4)
    assert sum(len(s) for s in stages) == len(inter)
    for a, b in zip(stages, stages[1:]):
        assert a.timestamp.max() <= b.timestamp.min()
    assert all(_row_keys(s) for s in stages)


def test_empty_split_part_is_a_clear_error() -> None:
    inter = Interactions.from_raw(["a", "b"], ["x", "y"], [1, 2])
    with pytest.raises(DataError, match="part of the leave-one-out split is empty"):
        leave_one_out(inter)


def test_bad_ratio_is_a_clear_error() -> None:
    with pytest.raises(DataError, match="train\\+valid<1"):
        chronological_ratio(_random_interactions(1), train=0.9, valid=0.2)
