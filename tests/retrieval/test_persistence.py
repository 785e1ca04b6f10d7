"""save/load next to a checkpoint: round trip, atomic writes, clear errors on bad files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from recframe.checkpoint_io import CheckpointError
from recframe.retrieval import ItemIndex, embedding_fingerprint, index_paths
from tests.retrieval.synthetic import clustered, random_items


def _queries(dim: int, n: int = 16) -> np.ndarray:
    return np.random.default_rng(1).standard_normal((n, dim)).astype(np.float32)


@pytest.mark.parametrize("factory,knobs,metric", [("Flat", {}, "ip"), ("Flat", {}, "cosine"),
                                                  ("IVF16,Flat", {"nprobe": 3}, "ip"),
                                                  ("HNSW8", {"ef_search": 40}, "cosine"),
                                                  ("IVF8,PQ8x4fs,RFlat", {"nprobe": 2, "k_factor": 3}, "ip")])
def test_round_trip_gives_identical_results(tmp_path: Path, factory: str, knobs: dict, metric: str) -> None:
    items = np.vstack([np.zeros((1, 16), np.float32), clustered(600, 16, 12, seed=2)])
    index = ItemIndex.from_embeddings(items, factory=factory, metric=metric, **knobs)
    written = index.save(tmp_path / "best.ckpt")
    assert written == tmp_path / "best.faiss"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.faiss", "best.faiss.json"]
    meta = json.loads((tmp_path / "best.faiss.json").read_text())
    assert meta["factory"] == factory and meta["metric"] == metric and meta["dim"] == 16
    assert meta["n_items"] == 600 and meta["fingerprint"] == embedding_fingerprint(items[1:])
    assert meta["search_params"] == index.search_params
    loaded = ItemIndex.load(tmp_path / "best.ckpt")
    assert (loaded.factory, loaded.metric, loaded.search_params, loaded.fingerprint) == \
        (factory, metric, index.search_params, index.fingerprint)
    q, seen = _queries(16), [np.arange(1, 40)] * 16
    a, b = index.search(q, 25, exclude=seen), loaded.search(q, 25, exclude=seen)
    np.testing.assert_array_equal(a.items, b.items)
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(ItemIndex.load(written).search(q, 5).items, index.search(q, 5).items)


def test_index_paths() -> None:
    assert index_paths("runs/x/best.ckpt") == (Path("runs/x/best.faiss"), Path("runs/x/best.faiss.json"))
    assert index_paths("runs/x/items.faiss") == (Path("runs/x/items.faiss"), Path("runs/x/items.faiss.json"))


def test_failed_write_leaves_previous_files_and_no_partial_file(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    old = ItemIndex.from_embeddings(random_items(100, 8, seed=1))
    old.save(tmp_path / "best.ckpt")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    new = ItemIndex.from_embeddings(random_items(100, 8, seed=2))

    def crash(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("recframe.checkpoint_io.os.fsync", crash)
    with pytest.raises(OSError, match="disk full"):
        new.save(tmp_path / "best.ckpt")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # untouched, no temp files
    monkeypatch.undo()
    q = _queries(8)
    np.testing.assert_array_equal(ItemIndex.load(tmp_path / "best.ckpt").search(q, 5).items,
                                  old.search(q, 5).items)


def test_index_and_metadata_from_different_saves_are_refused(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash between the two writes leaves a new .faiss beside the old .json: caught on load."""
    ItemIndex.from_embeddings(random_items(100, 8, seed=1)).save(tmp_path / "best.ckpt")
    monkeypatch.setattr("recframe.retrieval.persistence.json.dumps",
                        lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        ItemIndex.from_embeddings(random_items(100, 8, seed=2)).save(tmp_path / "best.ckpt")
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.faiss", "best.faiss.json"]
    with pytest.raises(CheckpointError, match=r"best\.faiss is truncated or corrupted"):
        ItemIndex.load(tmp_path / "best.ckpt")


def test_missing_and_corrupt_files_raise_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=r"nothing\.faiss does not exist"):
        ItemIndex.load(tmp_path / "nothing.ckpt")
    index = ItemIndex.from_embeddings(random_items(100, 8))
    faiss_file = index.save(tmp_path / "best.ckpt")
    meta_file = tmp_path / "best.faiss.json"
    data, meta_text = faiss_file.read_bytes(), meta_file.read_text()

    faiss_file.write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(CheckpointError, match=rf"{faiss_file.name} is truncated or corrupted"):
        ItemIndex.load(tmp_path / "best.ckpt")

    garbage = b"not a faiss index at all"  # bytes FAISS cannot parse, with a matching checksum
    faiss_file.write_bytes(garbage)
    meta = json.loads(meta_text)
    meta["index_sha256"] = hashlib.sha256(garbage).hexdigest()
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=rf"{faiss_file.name} cannot be read by FAISS"):
        ItemIndex.load(tmp_path / "best.ckpt")

    faiss_file.write_bytes(data)
    meta_file.write_text(meta_text[:20])
    with pytest.raises(CheckpointError, match=r"best\.faiss\.json is unreadable"):
        ItemIndex.load(tmp_path / "best.ckpt")
    meta_file.write_text(json.dumps({"factory": "Flat"}))
    with pytest.raises(CheckpointError, match=r"best\.faiss\.json lacks"):
        ItemIndex.load(tmp_path / "best.ckpt")
    meta = json.loads(meta_text)
    meta["n_items"] = 99
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="metadata says 99"):
        ItemIndex.load(tmp_path / "best.ckpt")
    meta_file.unlink()
    with pytest.raises(CheckpointError, match=r"best\.faiss\.json does not exist"):
        ItemIndex.load(tmp_path / "best.ckpt")
