"""The S3-Rec sequence format (Amazon Beauty/Sports/Toys): conversion, catalog source, errors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from recframe.data import catalog
from recframe.data.interactions import DataError
from recframe.data.s3rec_format import ENV_MIRROR, convert_s3rec
from recframe.data.splits import leave_one_out

SEQ = b"1 10 20 30\n2 20 40\n3 30 10 20 50\n"
ATTR = json.dumps({"10": [3, 1], "20": [2], "30": [], "40": [1, 1], "50": [7]}).encode()


def _convert(seq: bytes = SEQ, attr: bytes = ATTR) -> dict[str, bytes]:
    return convert_s3rec(seq, attr, name="toy", labels=("Toy.txt", "Toy_item2attributes.json"))


def _catalog(tmp_path: Path, mirror: Path, *, seq_sum: str | None = None) -> Path:
    files = _convert()
    entry = {
        "toy": {
            "columns": {"user": "user_id", "item": "item_id", "rating": None, "timestamp": "timestamp"},
            "files": {f: {"sha256": hashlib.sha256(b).hexdigest()} for f, b in files.items()},
            "sources": [
                {
                    "kind": "s3rec_txt",
                    "label": "mirror",
                    "mirror": [str(mirror)],
                    "files": {"sequences": "Toy.txt", "attributes": "Toy_item2attributes.json"},
                    "sha256": {
                        "Toy.txt": seq_sum or hashlib.sha256(SEQ).hexdigest(),
                        "Toy_item2attributes.json": hashlib.sha256(ATTR).hexdigest(),
                    },
                }
            ],
        }
    }
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(entry))
    return path


def _mirror(tmp_path: Path, seq: bytes = SEQ) -> Path:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "Toy.txt").write_bytes(seq)
    (mirror / "Toy_item2attributes.json").write_bytes(ATTR)
    return mirror


def test_convert_keeps_order_and_attributes():
    files = _convert()
    inter = files["toy.inter"].decode().splitlines()
    assert inter[0] == "user_id:token\titem_id:token\ttimestamp:float"
    assert inter[1:5] == ["1\t10\t0", "1\t20\t1", "1\t30\t2", "2\t20\t0"]
    assert len(inter) == 1 + 9
    items = files["toy.item"].decode().splitlines()
    assert items == ["item_id:token\tcategories:token_seq", "10\ta1 a3", "20\ta2", "30\t", "40\ta1", "50\ta7"]


def test_prepare_and_load_from_mirror(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_MIRROR, raising=False)
    path = _catalog(tmp_path, _mirror(tmp_path))
    catalog.prepare("toy", tmp_path / "data", catalog=path, verbose=False)
    inter = catalog.load("toy", tmp_path / "data", catalog=path)
    assert (inter.n_users, inter.n_items, len(inter)) == (3, 5, 9)
    # histories keep the line order exactly (position is the timestamp)
    user3 = inter.user_index("3")
    raw_items = [inter.item_ids[i] for i in inter.histories.of(user3)]
    assert raw_items == ["30", "10", "20", "50"]
    # leave-one-out holds out the last item of each line (user 2, with two items, has no training
    # item left and is not evaluated; the real files are 5-core)
    split = leave_one_out(inter)
    assert sorted(inter.item_ids[i] for i in split.test.item) == ["30", "50"]
    # attributes became item categories
    cats = inter.item_features.categories
    assert cats[inter.item_index("10")] == ["a1", "a3"]
    assert np.asarray(inter.timestamp).dtype.kind == "f"


def test_env_variable_mirror(tmp_path, monkeypatch):
    mirror = _mirror(tmp_path)
    path = _catalog(tmp_path, tmp_path / "nowhere")
    monkeypatch.setenv(ENV_MIRROR, str(mirror))
    catalog.prepare("toy", tmp_path / "data", catalog=path, verbose=False)
    assert catalog.is_prepared("toy", tmp_path / "data", catalog=path)


def test_checksum_failure_names_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_MIRROR, raising=False)
    path = _catalog(tmp_path, _mirror(tmp_path), seq_sum="0" * 64)
    with pytest.raises(DataError, match=r"Toy\.txt: sha256 mismatch \(expected 0{64}, got [0-9a-f]{64}\)"):
        catalog.prepare("toy", tmp_path / "data", catalog=path, verbose=False)
    assert not (tmp_path / "data" / "toy").exists()


def test_missing_file_names_the_places_looked(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_MIRROR, raising=False)
    path = _catalog(tmp_path, tmp_path / "empty")
    with pytest.raises(
        DataError, match=r"Toy\.txt and Toy_item2attributes\.json not found in a local mirror"
    ):
        catalog.prepare("toy", tmp_path / "data", catalog=path, verbose=False)


@pytest.mark.parametrize(
    ("seq", "message"),
    [
        (b"1 10 20\n2 x 40\n", r"Toy\.txt line 2: .*token 'x' is not a positive integer"),
        (b"1 10 20\n\n3\n", r"Toy\.txt line 3: .*no items after the user id"),
        (b"1 10 20\n1 30\n", r"Toy\.txt line 2: user 1 appears on an earlier line"),
        (b"1 10 0\n", r"Toy\.txt line 1: .*token '0' is not a positive integer"),
        (b"", r"Toy\.txt: no interactions"),
    ],
)
def test_malformed_line(seq, message):
    with pytest.raises(DataError, match=message):
        _convert(seq=seq)


@pytest.mark.parametrize(
    ("attr", "message"),
    [
        (b"{not json", r"Toy_item2attributes\.json: not valid JSON"),
        (b"[1, 2]", r"expected a JSON object"),
        (json.dumps({"10": ["brand"]}).encode(), r"key '10' must be an item id mapping to a list of integer"),
    ],
)
def test_malformed_attributes(attr, message):
    with pytest.raises(DataError, match=message):
        _convert(attr=attr)


def test_shipped_entries_are_consistent():
    data = catalog.read_catalog()
    for name, stats in {
        "amazon-beauty": (22363, 12101, 198502),
        "amazon-sports": (35598, 18357, 296337),
        "amazon-toys": (19412, 11924, 167597),
    }.items():
        entry = data[name]
        assert tuple(entry["stats"][k] for k in ("users", "items", "interactions")) == stats
        assert [s["kind"] for s in entry["sources"]] == ["s3rec_txt", "s3rec_txt"]
        assert "mirror" in entry["sources"][0] and "49a890dc" in entry["sources"][1]["base_url"]
        assert set(entry["files"]) == {f"{name}.inter", f"{name}.item"}
        assert entry["licence"] and entry["citation"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["amazon-beauty", "amazon-sports", "amazon-toys"])
def test_real_mirror_prepares(name, tmp_path):
    entry = catalog.get_entry(name)
    try:
        catalog.prepare(name, tmp_path, verbose=False)
    except DataError as exc:  # no mirror and no network on this machine
        pytest.skip(str(exc).splitlines()[0])
    inter = catalog.load(name, tmp_path)
    assert (inter.n_users, inter.n_items, len(inter)) == tuple(
        entry["stats"][k] for k in ("users", "items", "interactions")
    )
