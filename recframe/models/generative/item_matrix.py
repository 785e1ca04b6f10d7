"""What a semantic-ID model's tokenizer quantises: the items' content, a collaborative item table, or both.

Shared by the TIGER-style models (:mod:`recframe.models.generative.models`) and FLASH
(:mod:`recframe.models.generative.flash`), so every semantic-ID model takes its IDs from the same sources
under the same names (``model.init_args.features``):

* ``text``: all-MiniLM-L6-v2 of the item's title, year and genres
  (:func:`recframe.features.item_content_features`);
* ``none``: the documented non-text metadata features (on the Amazon S3-Rec files, the attribute multi-hot);
* ``collaborative``: the item table of a trained collaborative model (``collaborative``: a recframe config,
  trained on the same split and cached by fingerprint, or a ``.npy`` table), see
  :func:`recframe.features.collaborative_item_embeddings`;
* ``hybrid``: text and collaborative blocks, each L2-normalised, concatenated with squared-norm shares
  ``1 - collab_weight`` : ``collab_weight`` (:func:`recframe.features.collaborative.hybrid_item_features`);
* ``regularised``: text codes pulled toward the collaborative table by a tokenizer that learns from both
  (TIGER-style models only; the tokenizer receives the collaborative table separately).

``model.init_args.hybrid_content`` names the content block of ``hybrid`` and ``regularised``: ``text``
(default, the MiniLM encoding above) or ``none`` (the metadata features: on Amazon's S3-Rec files, which have
no item text, the attribute multi-hot). The other kinds take no content setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

FEATURE_KINDS = ("text", "none", "collaborative", "hybrid", "regularised")
"""Every value of ``model.init_args.features`` a semantic-ID model may accept."""

NEEDS_COLLABORATIVE = ("collaborative", "hybrid", "regularised")
"""The kinds that need ``model.init_args.collaborative``."""

CONTENT_KINDS = ("text", "none")
"""Values of ``model.init_args.hybrid_content``: the content block of ``hybrid`` and ``regularised``."""


class ItemMatrixSource:
    """Mixin: where a semantic-ID model's item vectors come from (module docstring).

    The host calls :meth:`set_item_source` in ``__init__`` (validating the arguments) and
    :meth:`item_matrix` in ``bind_data``.
    """

    n_items: int
    features: str
    collaborative: str | None
    collaborative_seed: int
    collab_weight: float
    hybrid_content: str

    def set_item_source(self, features: str, collaborative: str | None, collaborative_seed: int,
                        collab_weight: float, allowed: Sequence[str] = FEATURE_KINDS,
                        hybrid_content: str = "text") -> None:
        """Check and keep the item source; one clear error naming the key for a bad combination."""
        if features not in allowed:
            raise ValueError(f"model.init_args.features must be one of {list(allowed)} for "
                             f"{type(self).__name__}; got {features!r}.")
        if features in NEEDS_COLLABORATIVE and not collaborative:
            raise ValueError(f"model.init_args.features={features!r} needs model.init_args.collaborative: "
                             "a recframe config of a collaborative model (e.g. configs/sasrec_ml100k.yaml) "
                             "or a .npy item table.")
        if not 0.0 <= collab_weight <= 1.0:
            raise ValueError(f"model.init_args.collab_weight must be in [0, 1]; got {collab_weight}.")
        if hybrid_content not in CONTENT_KINDS:
            raise ValueError(f"model.init_args.hybrid_content must be one of {list(CONTENT_KINDS)}; "
                             f"got {hybrid_content!r}.")
        if hybrid_content != "text" and features not in ("hybrid", "regularised"):
            raise ValueError(f"model.init_args.hybrid_content={hybrid_content!r} sets the content block of "
                             f"features: hybrid or regularised; with features: {features} leave it out (or "
                             f"use features: {hybrid_content} for content alone).")
        self.features = features
        self.collaborative = collaborative
        self.collaborative_seed = collaborative_seed
        self.collab_weight = collab_weight
        self.hybrid_content = hybrid_content

    def require_item_features(self, train: Any) -> None:
        """Raise when the source needs the items' content and the dataset has none."""
        if train.item_features is None and self.features != "collaborative":
            raise ValueError(
                f"{type(self).__name__} needs item content features (model.init_args.features="
                f"{self.features!r}), but dataset {train.name!r} has none (titles/genres); use a dataset "
                "with item features, or features: collaborative.")

    def item_matrix(self, train: Any) -> np.ndarray:
        """What the tokenizer quantises, ``[n_items + 1, d]`` (see ``features``)."""
        from recframe.features import item_content_features

        content = self.features if self.features in ("text", "none") else self.hybrid_content
        encoder = "none" if content == "none" else "all-MiniLM-L6-v2"
        if self.features in ("text", "none", "regularised"):
            return item_content_features(train.item_features, encoder=encoder)
        collab = self.collaborative_table(train)
        if self.features == "collaborative":
            return np.asarray(collab, dtype=np.float32)
        from recframe.features.collaborative import hybrid_item_features

        text = item_content_features(train.item_features, encoder=encoder)
        return hybrid_item_features(text, collab, collab_weight=self.collab_weight)

    def collaborative_table(self, train: Any) -> np.ndarray:
        """The collaborative item table ``[n_items + 1, d]`` named by ``collaborative`` (a config, run and
        cached, or a ``.npy`` file)."""
        if str(self.collaborative).endswith(".npy"):
            collab = np.load(self.collaborative)
        else:
            from recframe.features.collaborative import collaborative_item_embeddings

            collab = collaborative_item_embeddings(train, self.collaborative, seed=self.collaborative_seed)
        if collab.shape[0] != self.n_items + 1:
            raise ValueError(f"model.init_args.collaborative ({self.collaborative}) has "
                             f"{collab.shape[0] - 1} items but the data {self.n_items}.")
        return collab
