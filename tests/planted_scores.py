"""A recommender with known scores, shared by callback tests that need a known answer."""

from __future__ import annotations

import numpy as np
import torch

from recframe.models.base import RecModel


class PlantedScores(RecModel):
    """The same fixed item scores for every user (row 0 padding): a known answer."""

    def __init__(self, scores: np.ndarray) -> None:
        super().__init__(len(scores) - 1)
        self.register_buffer("scores", torch.as_tensor(scores, dtype=torch.float32))

    def loss(self, batch):
        return None

    def score(self, batch):
        return self.scores[None, :].expand(batch["users"].shape[0], -1)
