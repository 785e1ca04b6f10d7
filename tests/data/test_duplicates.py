"""Duplicate interactions and non-finite timestamps: no leak through a duplicate, one clear error for inf."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from recframe.data.datamodule import RecDataModule
from recframe.data.filters import drop_exact_duplicates, exact_duplicates
from recframe.data.interactions import DataError, Interactions
from recframe.data.sources import load_atomic, load_table

INTER_HEADER = "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"


def _rows_with_duplicates(n_users: int = 30, per_user: int = 10, seed: int = 0) -> list[tuple]:
    """Each user rates ``per_user`` distinct items at distinct times; every user's last event and a
    random earlier one are recorded twice (same user, item, timestamp, rating)."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(n_users):
        items = rng.choice(200, size=per_user, replace=False)
        user_rows = [(f"u{u}", f"i{it}", float(rng.integers(1, 6)), float(1000 * u + t))
                     for t, it in enumerate(items)]
        rows += user_rows
        rows.append(user_rows[-1])  # the held-out event of leave-one-out, twice
        rows.append(user_rows[int(rng.integers(0, per_user - 1))])
    order = rng.permutation(len(rows))  # file order does not matter
    return [rows[i] for i in order]


def _write_csv(path: Path, rows: list[tuple]) -> Path:
    path.write_text("user,item,rating,ts\n" + "".join(f"{u},{i},{r},{t}\n" for u, i, r, t in rows))
    return path


COLUMNS = {"user": "user", "item": "item", "rating": "rating", "timestamp": "ts"}


def _pairs(inter: Interactions) -> set[tuple[int, int]]:
    return set(zip(inter.user.tolist(), inter.item.tolist()))


def _leaks(dm: RecDataModule) -> int:
    """Held-out (user, item) pairs that also sit in the history the model sees for that stage."""
    sp = dm.split
    train, valid, test = _pairs(sp.train), _pairs(sp.valid), _pairs(sp.test)
    return len(valid & train) + len(test & (train | valid))


@pytest.mark.parametrize("split", ["loo", "ratio"])
def test_no_heldout_pair_leaks_into_training_through_a_duplicate(tmp_path: Path, split: str) -> None:
    csv = _write_csv(tmp_path / "dups.csv", _rows_with_duplicates())
    dm = RecDataModule(dataset=str(csv), columns=COLUMNS, split=split, ratio=(0.6, 0.2))
    assert len(dm.split.test) > 0 and _leaks(dm) == 0
    assert sum(len(v) for v in (dm.split.train, dm.split.valid, dm.split.test)) == 30 * 10  # copies gone


def test_keeping_duplicates_is_an_explicit_choice_and_it_leaks(tmp_path: Path, caplog) -> None:
    csv = _write_csv(tmp_path / "dups.csv", _rows_with_duplicates())
    dm = RecDataModule(dataset=str(csv), columns=COLUMNS, split="loo", duplicates="keep")
    with caplog.at_level(logging.WARNING, logger="recframe.data"):
        assert _leaks(dm) > 0  # the leak the default policy prevents: the test can see it
    assert "keeping 60 exact duplicate" in caplog.text
    with pytest.raises(DataError, match="data.duplicates must be 'drop' or 'keep'"):
        RecDataModule(dataset=str(csv), columns=COLUMNS, duplicates="maybe")


def test_drop_keeps_the_first_copy_and_repeat_consumptions(caplog) -> None:
    inter = Interactions.from_raw(
        users=["a", "a", "a", "a", "b"], items=["x", "x", "x", "y", "x"],
        timestamps=[1.0, 1.0, 2.0, 3.0, 1.0], ratings=[5, 1, 4, 3, 2])
    assert exact_duplicates(inter).sum() == 1
    with caplog.at_level(logging.INFO, logger="recframe.data"):
        out = drop_exact_duplicates(inter)
    assert "dropped 1 exact duplicate" in caplog.text
    rows = [(out.user_ids[u], out.item_ids[i], t, r) for u, i, t, r in
            zip(out.user, out.item, out.timestamp, out.rating)]
    # x at t=2 is a repeat consumption (a different time) and stays; the first copy's rating survives
    assert rows == [("a", "x", 1.0, 5.0), ("a", "x", 2.0, 4.0), ("a", "y", 3.0, 3.0), ("b", "x", 1.0, 2.0)]
    assert drop_exact_duplicates(out) is out


@pytest.mark.parametrize("value", ["inf", "-inf", "Infinity"])
def test_an_infinite_timestamp_is_refused_naming_file_column_and_row(tmp_path: Path, value: str) -> None:
    d = tmp_path / "shop"
    d.mkdir()
    (d / "shop.inter").write_text(INTER_HEADER + "u1\ta\t4\t100\nu1\tb\t5\t" + value + "\n")
    with pytest.raises(DataError, match=r"shop.inter line 3: field 'timestamp' has value .*not finite"):
        load_atomic(d)
    csv = tmp_path / "t.csv"
    csv.write_text(f"user,item,rating,ts\nu1,a,4,100\nu1,b,5,{value}\n")
    with pytest.raises(DataError, match=r"t.csv line 3: column 'ts' \(timestamp\) .* not finite"):
        load_table(csv, COLUMNS)
    with pytest.raises(DataError, match="timestamp of row 1 is"):
        Interactions.from_raw(["u1", "u1"], ["a", "b"], timestamps=[100.0, float(value)])
