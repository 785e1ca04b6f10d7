"""Popularity: every user gets the items most often interacted with in training.

The floor every results table shows. Scores are training interaction counts;
ties between equally popular items rank pessimistically in the evaluator.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor

from recframe.data.interactions import Interactions
from recframe.models.base import RecModel


class Popularity(RecModel):
    """Most-popular baseline (no parameters; counts are a buffer in the checkpoint)."""

    train_batch: ClassVar[str] = "history"

    def __init__(self, n_items: int, n_users: int = 0) -> None:
        super().__init__(n_items, n_users)
        self.save_hyperparameters()
        self.register_buffer("counts", torch.zeros(n_items + 1))

    def bind_data(self, train: Interactions) -> None:
        self.counts.copy_(torch.as_tensor(train.item_popularity(), dtype=torch.float32))

    def loss(self, batch: dict[str, Tensor]) -> None:
        return None

    def score(self, batch: dict[str, Tensor]) -> Tensor:
        return self.counts[None, :].expand(batch["users"].shape[0], -1)
