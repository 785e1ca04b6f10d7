"""Item features without a text encoder: hashed title words + genre multi-hot + normalised year.

The fallback of :func:`recframe.features.item_content_features` when the ``text`` extra is not
installed (or with ``encoder="none"``). Row ``i`` (item ``i``; row 0 = padding, all zeros) is the
concatenation of three blocks, each present when the :class:`ItemFeatures` has the field:

* **title** (``title_dim`` columns): signed feature hashing of the lower-cased title words
  (``[a-z0-9]+``; Weinberger et al., 2009): word ``w`` adds ``+-1`` to column
  ``h(w) mod title_dim`` with the sign from the top bit of ``h(w)``, where ``h`` is the first 8
  bytes of BLAKE2b (stable across processes, unlike Python's ``hash``); the block is then L2
  normalised. This is a fixed random projection of the bag of words to ``title_dim`` dimensions.
* **genres** (one column per category, sorted by name): multi-hot divided by ``sqrt(#genres)``
  so the block has unit norm.
* **year** (2 columns): ``(year - min) / (max - min)`` over the known years (0 when all equal),
  and an "unknown year" flag (year 0) so that unknown is not confused with the oldest year.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from recframe.data.interactions import ItemFeatures

WORD = re.compile(r"[a-z0-9]+")


def hashed_words(texts: list[str], dim: int) -> np.ndarray:
    """Signed hashed bag of words ``[len(texts), dim]``, each non-empty row L2-normalised."""
    if dim < 1:
        raise ValueError(f"title_dim must be >= 1; got {dim}.")
    out = np.zeros((len(texts), dim), dtype=np.float64)
    for row, text in enumerate(texts):
        for word in WORD.findall(str(text or "").lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            out[row, h % dim] += 1.0 if h >> 63 else -1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)


def genre_multi_hot(categories: list[list[str]]) -> tuple[np.ndarray, list[str]]:
    """``(matrix [n, n_genres], genre names)``; rows scaled to unit norm."""
    names = sorted({c for cats in categories for c in (cats or [])})
    col = {c: j for j, c in enumerate(names)}
    out = np.zeros((len(categories), len(names)), dtype=np.float64)
    for row, cats in enumerate(categories):
        for c in cats or []:
            out[row, col[c]] = 1.0
    counts = out.sum(1, keepdims=True)
    return np.divide(out, np.sqrt(counts), out=np.zeros_like(out), where=counts > 0), names


def year_features(year: np.ndarray) -> np.ndarray:
    """``[n, 2]``: min-max normalised known year, and an unknown-year (0) flag."""
    year = np.asarray(year, dtype=np.float64)
    known = year > 0
    out = np.zeros((len(year), 2), dtype=np.float64)
    if known.any():
        lo, hi = year[known].min(), year[known].max()
        out[known, 0] = (year[known] - lo) / (hi - lo) if hi > lo else 0.0
    out[~known, 1] = 1.0
    return out


def metadata_features(features: ItemFeatures, *, title_dim: int = 64) -> np.ndarray:
    """Non-text item features ``[n_items + 1, d]`` float32 (module docstring); row 0 zeros.

    Raises:
        ValueError: ``features`` has none of title, categories, year.
    """
    n = features._length()
    blocks = []
    if features.title is not None:
        blocks.append(hashed_words([str(t) for t in features.title], title_dim))
    if features.categories is not None:
        blocks.append(genre_multi_hot(features.categories)[0])
    if features.year is not None:
        blocks.append(year_features(features.year))
    if not blocks or n < 2:
        raise ValueError("metadata item features need ItemFeatures with title, categories or year for at "
                         "least one item; pass an item feature matrix instead (as_feature_matrix).")
    out = np.concatenate(blocks, axis=1).astype(np.float32)
    out[0] = 0.0
    return out
