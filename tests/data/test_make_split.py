"""``make_split`` is the one split dispatcher, and the datamodule splits through it."""

from __future__ import annotations

import numpy as np
import pytest

from recframe.data.datamodule import RecDataModule
from recframe.data.interactions import DataError, Interactions
from recframe.data.splits import Split, chronological_ratio, leave_one_out, make_split

SYNTH = {"n_users": 40, "n_items": 30, "n_clusters": 3, "mean_length": 12, "seed": 0}


def _interactions(seed: int = 0, n: int = 300) -> Interactions:
    rng = np.random.default_rng(seed)
    ratings = rng.integers(1, 6, n)
    users, items, times = rng.integers(0, 20, n), rng.integers(0, 30, n), rng.integers(0, 40, n)
    return Interactions.from_raw(users, items, times, ratings, labels=np.sign(ratings - 3))


def _prints(split: Split) -> tuple[str, str, str, str]:
    return split.protocol, split.train.fingerprint, split.valid.fingerprint, split.test.fingerprint


def test_make_split_dispatches_by_name_with_settings() -> None:
    inter = _interactions()
    assert _prints(make_split(inter, "loo")) == _prints(leave_one_out(inter))
    assert _prints(make_split(inter, "leave_one_out", min_train=3)) == _prints(leave_one_out(inter, 3))
    assert _prints(make_split(inter, "loo", ratio=(0.5, 0.2))) == _prints(leave_one_out(inter))  # no shares
    expected = _prints(chronological_ratio(inter, train=0.6, valid=0.2))
    assert _prints(make_split(inter, "ratio", ratio=(0.6, 0.2))) == expected
    assert _prints(make_split(inter, "ratio", train=0.6, valid=0.2)) == expected


def test_make_split_refuses_unknown_names_and_settings() -> None:
    inter = _interactions()
    with pytest.raises(DataError, match=r"unknown split 'bogus'; choose one of \['leave_one_out', 'loo'"):
        make_split(inter, "bogus")
    with pytest.raises(DataError, match=r"split 'loo' has no setting 'train'; its settings: \['min_train'\]"):
        make_split(inter, "loo", train=0.5)
    with pytest.raises(DataError, match=r"ratio=\(0.8,\); give \(train, valid\)"):
        make_split(inter, "ratio", ratio=(0.8,))


def test_the_datamodule_splits_through_make_split() -> None:
    loo = RecDataModule(dataset="synthetic", synthetic=SYNTH, split="loo").split
    assert loo.protocol == "leave-one-out"
    # every protocol name make_split knows works (today "leave_one_out" silently gave the ratio split)
    named = RecDataModule(dataset="synthetic", synthetic=SYNTH, split="leave_one_out").split
    assert _prints(named) == _prints(loo)
    full = loo.train.concat(loo.valid).concat(loo.test)
    ratio = RecDataModule(dataset="synthetic", synthetic=SYNTH, split="ratio", ratio=(0.6, 0.2)).split
    assert ratio.protocol == "chronological-ratio"
    assert len(ratio.test) == len(make_split(full, "ratio", ratio=(0.6, 0.2)).test)
    with pytest.raises(DataError, match="unknown split 'bogus'"):  # today: silently the ratio split
        _ = RecDataModule(dataset="synthetic", synthetic=SYNTH, split="bogus").split  # type: ignore[arg-type]
