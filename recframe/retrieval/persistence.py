"""Index files next to a checkpoint: ``best.ckpt`` -> ``best.faiss`` + ``best.faiss.json``.

The ``.faiss`` file holds ``faiss.serialize_index`` bytes of the CPU index; the JSON holds what
is needed to use and trust it: factory, metric, dim, n_items, search knobs, the sha256
fingerprint of the item embeddings it was built from (so a caller can tell that the model has
changed since), and the sha256 of the index bytes (so a truncated file, or a ``.faiss`` and
``.json`` from different saves, is caught on load). Both are written atomically (temp file +
rename), the index first.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from recframe.checkpoint_io import CheckpointError, atomic_write

FORMAT_VERSION = 1
REQUIRED_KEYS = ("format", "factory", "metric", "dim", "n_items", "search_params", "fingerprint",
                 "index_sha256")


def index_paths(path: str | Path) -> tuple[Path, Path]:
    """``(index_file, metadata_file)`` for a checkpoint path or a ``.faiss`` path."""
    path = Path(path)
    index_file = path if path.suffix == ".faiss" else path.with_suffix(".faiss")
    return index_file, index_file.with_name(index_file.name + ".json")


def embedding_fingerprint(vectors: np.ndarray) -> str:
    """sha256 of the real item rows ``[n_items, d]`` as float32 (shape included)."""
    arr = np.ascontiguousarray(vectors, dtype=np.float32)
    digest = hashlib.sha256(f"{arr.shape[0]}x{arr.shape[1]}:float32:".encode())
    digest.update(arr.tobytes())
    return digest.hexdigest()


def write_index_files(path: str | Path, index_bytes: bytes, meta: dict[str, Any]) -> Path:
    """Atomically write the index bytes and their metadata; returns the ``.faiss`` path."""
    index_file, meta_file = index_paths(path)
    meta = {"format": FORMAT_VERSION, **meta, "index_sha256": hashlib.sha256(index_bytes).hexdigest(),
            "index_bytes": len(index_bytes)}
    atomic_write(index_file, lambda fh: fh.write(index_bytes))
    atomic_write(meta_file, lambda fh: fh.write(json.dumps(meta, indent=2).encode()))
    return index_file


def read_index_files(path: str | Path) -> tuple[bytes, dict[str, Any]]:
    """Read and verify the index bytes and metadata; any problem is a :class:`CheckpointError`."""
    index_file, meta_file = index_paths(path)
    for f in (index_file, meta_file):
        if not f.is_file():
            raise CheckpointError(f"FAISS index file {f} does not exist; build and save the index with "
                                  "ItemIndex.from_model(model, ...).save(checkpoint_path).")
    try:
        meta = json.loads(meta_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"FAISS index metadata {meta_file} is unreadable "
                              f"({type(exc).__name__}: {exc}); rebuild the index and save it "
                              "again.") from None
    missing = [k for k in REQUIRED_KEYS if not isinstance(meta, dict) or k not in meta]
    if missing:
        raise CheckpointError(f"FAISS index metadata {meta_file} lacks {missing}; it was not written by "
                              "ItemIndex.save. Rebuild the index and save it again.")
    if meta["format"] != FORMAT_VERSION:
        raise CheckpointError(f"FAISS index metadata {meta_file} has format {meta['format']}, this recframe "
                              f"reads format {FORMAT_VERSION}; rebuild the index.")
    data = index_file.read_bytes()
    if hashlib.sha256(data).hexdigest() != meta["index_sha256"]:
        raise CheckpointError(f"FAISS index {index_file} is truncated or corrupted (its sha256 differs from "
                              f"the one recorded in {meta_file.name}); rebuild the index and save it again.")
    return data, meta
