"""Atomic-file and table loaders: happy paths, the real ML-100K copy if cached, every error path."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recframe.data.interactions import DataError
from recframe.data.sources import load_atomic, load_table, load_user_table

FIXTURES = Path(__file__).parent / "fixtures"
TINY = FIXTURES / "tiny"
INTER_HEADER = "user_id:token\titem_id:token\trating:float\ttimestamp:float\n"


def _write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


# ------------------------------------------------------------------ atomic
def test_tiny_fixture_ids_order_and_values():
    inter = load_atomic(TINY)
    assert inter.name == "tiny"
    assert (inter.n_users, inter.n_items, len(inter)) == (3, 3, 6)
    # dense ids follow first appearance in file order
    assert inter.user_ids.tolist() == ["[PAD]", "u2", "u1", "u3"]
    assert inter.item_ids.tolist() == ["[PAD]", "a", "b", "c"]
    # sorted by (user, time); ties keep file order (u2: a@100 before c@100; u1: b@300 before c@300)
    rows = [
        (inter.user_ids[u], inter.item_ids[i], t) for u, i, t in zip(inter.user, inter.item, inter.timestamp)
    ]
    assert rows == [
        ("u2", "a", 100), ("u2", "c", 100),
        ("u1", "a", 200), ("u1", "b", 300), ("u1", "c", 300),
        ("u3", "b", 50),
    ]  # fmt: skip
    assert inter.rating[:5].tolist() == [5, 3, 4, 1, 2]
    assert np.isnan(inter.rating[5])  # empty rating -> NaN
    assert (inter.label == 0).all()


def test_tiny_item_features():
    inter = load_atomic(TINY)
    f = inter.item_features
    a, b, c = (inter.item_index(x) for x in "abc")
    assert f.title[a] == "Alpha Movie" and f.year[a] == 1999 and f.categories[a] == ["Action", "Comedy"]
    assert f.year[b] == 0  # "unknown" year -> 0
    assert f.categories[c] == []
    assert len(f.title) == inter.n_items + 1  # "d" has no interaction and is dropped


def test_inter_path_and_user_table():
    inter = load_atomic(TINY / "tiny.inter")
    assert inter.name == "tiny" and len(inter) == 6
    users = load_user_table(TINY)
    assert users.columns.tolist() == ["user_id", "age", "gender"] and len(users) == 3


def test_custom_columns_and_optional_fields(tmp_path):
    _write(tmp_path / "d" / "d.inter", "uid:token\tiid:token\tscore:float\nx\tp\t3\ny\tq\t5\nx\tq\t1\n")
    inter = load_atomic(tmp_path / "d", columns={"user": "uid", "item": "iid", "rating": "score"})
    assert inter.user_ids.tolist() == ["[PAD]", "x", "y"]
    assert inter.timestamp.tolist() == [0, 2, 1]  # no timestamp field: file row order
    assert inter.rating.tolist() == [3, 1, 5]
    # ratings absent entirely -> NaN
    _write(tmp_path / "e" / "e.inter", "user_id:token\titem_id:token\n1\t2\n")
    assert np.isnan(load_atomic(tmp_path / "e").rating).all()


def test_item_columns_override(tmp_path):
    shutil.copytree(TINY, tmp_path / "tiny")
    inter = load_atomic(tmp_path / "tiny", item_columns={"categories": None, "year": None})
    f = inter.item_features
    assert f.categories is None and f.year is None and f.title is not None


@pytest.mark.slow
def test_real_ml100k(ml100k_root):
    inter = load_atomic(ml100k_root / "ml-100k")
    assert (inter.n_users, inter.n_items, len(inter)) == (943, 1682, 100000)
    assert inter.user_ids[1] == "196" and inter.item_ids[1] == "242"  # first row of the file
    f = inter.item_features
    toy = inter.item_index("1")
    assert (f.title[toy], int(f.year[toy]), f.categories[toy]) == (
        "Toy Story",
        1995,
        ["Animation", "Children's", "Comedy"],
    )
    assert f.title[inter.item_index("11")] == "Seven (Se7en)"  # "(year)" suffix dropped
    assert set(np.unique(inter.rating).tolist()) == {1, 2, 3, 4, 5}
    assert np.all(np.diff(inter.timestamp)[np.diff(inter.user) == 0] >= 0)


# ------------------------------------------------------------ atomic errors
def test_missing_inter_file(tmp_path):
    (tmp_path / "x").mkdir()
    _write(tmp_path / "x" / "other.inter", INTER_HEADER + "1\t2\t3\t4\n")
    with pytest.raises(DataError) as err:
        load_atomic(tmp_path / "x")
    msg = str(err.value)
    assert "x.inter not found" in msg and "DIRECTORY/NAME.inter" in msg and "other.inter" in msg


def test_header_without_type(tmp_path):
    _write(tmp_path / "ml-100k" / "ml-100k.inter", "user_id:token\titem_id:token\trating\n1\t2\t3\n")
    with pytest.raises(DataError) as err:
        load_atomic(tmp_path / "ml-100k")
    assert str(err.value).startswith(
        "ml-100k.inter line 1: field 'rating' has no ':type' suffix; atomic headers look like 'rating:float'"
    )


def test_header_unknown_type_and_duplicate(tmp_path):
    _write(tmp_path / "a" / "a.inter", "user_id:token\titem_id:int\n1\t2\n")
    with pytest.raises(
        DataError, match=r"a.inter line 1: field 'item_id' has unknown type 'int'; use one of"
    ):
        load_atomic(tmp_path / "a")
    _write(tmp_path / "b" / "b.inter", "user_id:token\tuser_id:token\n1\t2\n")
    with pytest.raises(DataError, match=r"b.inter line 1: field 'user_id' appears twice"):
        load_atomic(tmp_path / "b")


def test_unknown_column_in_map(tmp_path):
    with pytest.raises(DataError) as err:
        load_atomic(TINY, columns={"user": "uid"})
    msg = str(err.value)
    assert "tiny.inter line 1" in msg and "'uid'" in msg and "columns['user']" in msg
    assert "user_id, item_id, rating, timestamp" in msg
    # an explicitly mapped optional field must exist too
    with pytest.raises(DataError, match=r"no field 'when' .*columns\['timestamp'\]"):
        load_atomic(TINY, columns={"timestamp": "when"})
    with pytest.raises(DataError, match=r"unknown key 'usr'.*user, item, rating, timestamp"):
        load_atomic(TINY, columns={"usr": "user_id"})


def test_non_numeric_rating_and_timestamp(tmp_path):
    _write(tmp_path / "r" / "r.inter", INTER_HEADER + "1\t2\t4\t10\n1\t3\tfive\t11\n")
    with pytest.raises(DataError) as err:
        load_atomic(tmp_path / "r")
    msg = str(err.value)
    assert "r.inter line 3" in msg and "'rating'" in msg and "'five'" in msg and "not a number" in msg
    _write(tmp_path / "t" / "t.inter", INTER_HEADER + "1\t2\t4\t10\n1\t3\t4\t\n1\t4\t4\t2020-01-01\n")
    with pytest.raises(DataError, match=r"t.inter line 3: field 'timestamp' .* value ''"):
        load_atomic(tmp_path / "t")


def test_empty_and_header_only_files(tmp_path):
    _write(tmp_path / "e" / "e.inter", "")
    with pytest.raises(DataError, match=r"e.inter: the file is empty .*header"):
        load_atomic(tmp_path / "e")
    _write(tmp_path / "h" / "h.inter", INTER_HEADER)
    with pytest.raises(DataError, match=r"h.inter: has a header but no data rows"):
        load_atomic(tmp_path / "h")


def test_wrong_field_count_and_empty_id(tmp_path):
    _write(tmp_path / "w" / "w.inter", INTER_HEADER + "1\t2\t3\t4\n1\t2\t3\t4\t9\n")
    with pytest.raises(DataError, match=r"w.inter line 3: 5 tab-separated values but the header has 4"):
        load_atomic(tmp_path / "w")
    _write(tmp_path / "m" / "m.inter", INTER_HEADER + "1\t2\t3\t4\n\n1\t\t3\t5\n")
    with pytest.raises(DataError, match=r"m.inter line 4: field 'item_id' is empty"):
        load_atomic(tmp_path / "m")


def test_blank_lines_and_crlf_are_tolerated(tmp_path):
    _write(
        tmp_path / "c" / "c.inter",
        INTER_HEADER.replace("\n", "\r\n") + "1\t2\t3\t4\r\n\r\n1\t3\t5\t6\r\n\r\n",
    )
    inter = load_atomic(tmp_path / "c")
    assert len(inter) == 2 and inter.item_ids.tolist() == ["[PAD]", "2", "3"]


def test_invalid_utf8(tmp_path):
    _write(tmp_path / "u" / "u.inter", INTER_HEADER + "1\tcaf\u00e9\t3\t4\n", encoding="latin-1")
    with pytest.raises(DataError, match=r"u.inter line 2: not valid utf-8 .*encoding="):
        load_atomic(tmp_path / "u")
    assert load_atomic(tmp_path / "u", encoding="latin-1").item_ids[1] == "caf\u00e9"


def test_item_file_without_item_field(tmp_path):
    _write(tmp_path / "i" / "i.inter", INTER_HEADER + "1\t2\t3\t4\n")
    _write(tmp_path / "i" / "i.item", "movie:token\ttitle:token_seq\n2\tX\n")
    with pytest.raises(DataError, match=r"i.item line 1: no field 'item_id'"):
        load_atomic(tmp_path / "i")


# ------------------------------------------------------------------ tables
def test_load_csv_tsv_parquet(tmp_path):
    df = pd.DataFrame({"u": ["a", "b", "a"], "i": [10, 20, 20], "r": [5.0, 2.0, 4.0], "t": [3, 1, 2]})
    cols = {"user": "u", "item": "i", "rating": "r", "timestamp": "t"}
    df.to_csv(tmp_path / "x.csv", index=False)
    df.to_csv(tmp_path / "x.tsv", index=False, sep="\t")
    df.to_parquet(tmp_path / "x.parquet")
    got = [load_table(tmp_path / f"x.{ext}", cols) for ext in ("csv", "tsv", "parquet")]
    for inter in got:
        assert inter.name == "x"
        assert inter.user_ids.tolist() == ["[PAD]", "a", "b"]
        assert inter.item_ids.tolist() == ["[PAD]", "10", "20"]
        assert inter.timestamp.tolist() == [2, 3, 1]  # user a sorted by time, then b
    assert got[0].fingerprint == got[1].fingerprint == got[2].fingerprint


def test_load_table_optional_columns_and_datetimes(tmp_path):
    df = pd.DataFrame({"u": [1, 1], "i": [1, 2], "when": pd.to_datetime(["2020-01-02", "2020-01-01"])})
    df.to_parquet(tmp_path / "d.parquet")
    inter = load_table(tmp_path / "d.parquet", {"user": "u", "item": "i", "timestamp": "when"})
    assert inter.item_ids[inter.item].tolist() == ["2", "1"]
    assert inter.timestamp[0] == pd.Timestamp("2020-01-01").timestamp()
    assert np.isnan(inter.rating).all()


def test_load_table_errors(tmp_path):
    with pytest.raises(DataError, match=r"nope.csv: file not found"):
        load_table(tmp_path / "nope.csv", {"user": "u", "item": "i"})
    _write(tmp_path / "x.csv", "u,i,r\na,1,4\nb,2,bad\n")
    with pytest.raises(DataError) as err:
        load_table(tmp_path / "x.csv", {"user": "u", "item": "i", "rating": "r"})
    assert "x.csv line 3" in str(err.value) and "'r'" in str(err.value) and "'bad'" in str(err.value)
    with pytest.raises(
        DataError,
        match=r"x.csv: column 'rating' \(columns\['rating'\]\) is not in the file; "
        r"its columns are u, i, r",
    ):
        load_table(tmp_path / "x.csv", {"user": "u", "item": "i", "rating": "rating"})
    with pytest.raises(DataError, match=r"columns needs a 'item' entry"):
        load_table(tmp_path / "x.csv", {"user": "u"})
    with pytest.raises(DataError, match=r"unknown key 'time'"):
        load_table(tmp_path / "x.csv", {"user": "u", "item": "i", "time": "r"})
    _write(tmp_path / "empty.csv", "")
    with pytest.raises(DataError, match=r"empty.csv: the file is empty"):
        load_table(tmp_path / "empty.csv", {"user": "u", "item": "i"})
    _write(tmp_path / "hdr.csv", "u,i\n")
    with pytest.raises(DataError, match=r"hdr.csv: has a header but no data rows"):
        load_table(tmp_path / "hdr.csv", {"user": "u", "item": "i"})
    _write(tmp_path / "gap.csv", "u,i\na,1\n,2\n")
    with pytest.raises(DataError, match=r"gap.csv line 3: column 'u' \(user id\) is empty"):
        load_table(tmp_path / "gap.csv", {"user": "u", "item": "i"})
    _write(tmp_path / "bad.parquet", "not parquet")
    with pytest.raises(DataError, match=r"bad.parquet: cannot read as Parquet"):
        load_table(tmp_path / "bad.parquet", {"user": "u", "item": "i"})
