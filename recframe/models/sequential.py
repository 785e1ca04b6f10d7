"""The next-item training and serving shared by the autoregressive sequential models (SASRec, GRU4Rec,
RecMem).

A subclass encodes left-padded item sequences into hidden states (``encode``), keeps its tied item table in
``item_emb`` and its objective in ``next_item`` (:class:`~recframe.models.losses.NextItemLoss`). Training
predicts the next item at every real position of a ``sequence`` batch; the query of a user is the hidden
state after the latest item; items are scored by inner product with the same table that feeds the
encoder (so FAISS can serve the model). A model that does not encode whole sequences at once (RecMem folds
segments into a memory) overrides :meth:`~NextItemModel.position_states` and ``query_embedding`` instead of
``encode``. BERT4Rec trains on masked positions instead and keeps its own loss.
"""

from __future__ import annotations

from typing import ClassVar

from torch import Tensor, nn

from recframe.data.interactions import Interactions
from recframe.models.base import EmbeddingModel
from recframe.models.losses import NextItemLoss


class NextItemModel(EmbeddingModel):
    """An embedding model trained to predict the next item at every position of its training windows.

    Subclasses set ``item_emb`` (``nn.Embedding(n_items + 1, d)``, row 0 padding) and ``next_item``, and
    implement :meth:`encode` (or override both :meth:`position_states` and ``query_embedding``).
    """

    train_batch: ClassVar[str] = "sequence"
    uses_history: ClassVar[bool] = True
    item_emb: nn.Embedding
    next_item: NextItemLoss

    def encode(self, items: Tensor) -> Tensor:
        """Hidden states ``[B, L, d]`` for left-padded item sequences ``[B, L]``."""
        raise NotImplementedError(
            f"{type(self).__name__} implements neither encode nor position_states/query_embedding"
        )

    def position_states(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """Hidden states ``[..., d]`` and their next-item targets ``[...]`` (0 = padding, not counted) of a
        ``sequence`` batch; by default ``encode(batch["input"])`` against ``batch["target"]``."""
        return self.encode(batch["input"]), batch["target"]

    def loss(self, batch: dict[str, Tensor]) -> Tensor:
        """The next-item loss over every position whose target is a real item."""
        h, target = self.position_states(batch)
        keep = target > 0
        return self.next_item(h[keep], target[keep], self.item_emb.weight)

    def bind_data(self, train: Interactions) -> None:
        """Give the loss the training split's item counts (used by ``sampled_logq`` only)."""
        self.next_item.bind_counts(train.item_popularity())

    def loss_terms(self, batch: dict[str, Tensor]) -> int:
        return int((batch["target"] > 0).sum())

    def query_embedding(self, batch: dict[str, Tensor]) -> Tensor:
        return self.encode(batch["history"])[:, -1]

    def item_embeddings(self) -> Tensor:
        return self.item_emb.weight
