"""Time stages: quantile cut, training windows and test sets never read a later stage."""

from __future__ import annotations

import numpy as np
import pytest

from recframe.continual.stages import split_stages, stage_index
from recframe.continual.synthetic import make_shift_data
from recframe.data.interactions import DataError, Interactions


def _random_table(seed: int = 0, n: int = 3000) -> Interactions:
    rng = np.random.default_rng(seed)
    users = rng.integers(0, 80, n)
    items = rng.integers(0, 150, n)
    times = rng.random(n) * 1e6
    return Interactions.from_raw(users, items, times)


def test_stage_index_cuts_at_global_quantiles() -> None:
    ts = np.arange(100, dtype=float)
    stage = stage_index(ts, 5)
    assert np.array_equal(np.bincount(stage), [20, 20, 20, 20, 20])
    assert (np.diff(stage) >= 0).all()
    with pytest.raises(DataError, match="n_stages"):
        stage_index(ts, 1)


@pytest.mark.parametrize("seed", [0, 1])
def test_training_windows_never_read_a_later_stage(seed: int) -> None:
    data = split_stages(_random_table(seed), 5)
    items_stage = data.stage
    for t in range(data.n_stages):
        for cumulative in (False, True):
            w = data.stage_windows(t, max_len=7, stride=3, cumulative=cumulative)
            counted = []
            for s, e, c in zip(w.starts, w.ends, w.counted):
                assert e - s - 1 <= 7 and s < c < e
                assert (items_stage[s:e] <= t).all(), "a stage-t window reads a later row"
                counted.extend(range(c, e))
            counted = np.asarray(counted)
            # every eligible target counted exactly once: rows of stage t (<= t when cumulative) that are
            # not a user's first row
            first_of_user = data.histories.indptr[:-1]
            want = np.flatnonzero((items_stage <= t) if cumulative else (items_stage == t))
            want = want[~np.isin(want, first_of_user)]
            assert np.array_equal(np.sort(counted), want)


def test_test_set_holds_next_stage_of_returning_users_only() -> None:
    inter = _random_table(2)
    data = split_stages(inter, 4)
    for t in range(3):
        test = data.test_set(t)
        known, held = test.known, test.heldout
        for u in test.users:
            k = known.items[known.indptr[u]:known.indptr[u + 1]]
            h = held.items[held.indptr[u]:held.indptr[u + 1]]
            assert len(k) > 0 and len(h) > 0
            assert not set(k) & set(h)
        # known rows are exactly stages <= t, held-out ones come from stage t + 1
        assert known.timestamps.max() <= inter.timestamp[data.stage <= t].max()
        assert held.timestamps.min() >= inter.timestamp[data.stage == t + 1].min()
        assert len(known.items) == int((data.stage <= t).sum())
    with pytest.raises(DataError, match="t must be"):
        data.test_set(3)


def test_replay_windows_use_only_earlier_context() -> None:
    data = split_stages(_random_table(3), 4)
    rows = np.flatnonzero(data.stage == 0)
    rows = rows[~np.isin(rows, data.histories.indptr[:-1])][:50]
    w = data.target_windows(rows, max_len=5)
    assert np.array_equal(w.counted, rows) and np.array_equal(w.ends, rows + 1)
    ts = data.histories.timestamps
    for s, e in zip(w.starts, w.ends):
        assert (ts[s:e - 1] <= ts[e - 1]).all() and e - s - 1 <= 5


def test_shift_data_plants_its_structure() -> None:
    d = make_shift_data(n_users=60, n_items=240, n_stages=4, per_stage=8, seed=1)
    data = split_stages(d.interactions, 4)
    assert np.array_equal(np.bincount(data.stage), [60 * 8] * 4)  # every user active in every stage
    assert len(data.test_set(0).users) == 60
    assert set(np.unique(d.user_type[1:])) <= {0, 1, 2}
