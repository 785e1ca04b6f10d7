"""Reference recommenders whose answer to the genre-histogram explanation is known by construction.

:class:`GenreScorer` scores every item by its genre's weight in the user's history, read either from the
whole genre histogram (``reads="histogram"``: the explanation "recommendations depend on the history only
through its genre histogram" is exactly true, so :class:`~causal_ext.abstraction.callback.GenreHistogramCAE`
must report 0) or from the last item only (``reads="last"``: the explanation is false, so the CAE is > 0).
They calibrate the callback on real data, beside a trained model (``benchmarks/cae_recommender.py``).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
from torch import Tensor

from recframe.models.base import RecModel


class GenreScorer(RecModel):
    """Scores an item by its genre's weight in the history: the whole histogram, or the last item only.

    Args:
        genre: genre index of items ``0..n_items`` (as :func:`~causal_ext.abstraction.callback.primary_genres`
            returns; item 0 is padding).
        reads: ``"histogram"`` (count of each genre in the history) or ``"last"`` (one-hot genre of the last
            item).

    Ties between items of one genre are broken by a fixed ``-1e-3 * item id``, so the ranking is a
    deterministic function of what the model reads. It has no parameters to train (``loss`` is ``None``).
    """

    uses_history = True

    def __init__(self, genre: np.ndarray, reads: Literal["histogram", "last"] = "histogram") -> None:
        if reads not in ("histogram", "last"):
            raise ValueError(f"GenreScorer: reads={reads!r}; use 'histogram' or 'last'.")
        super().__init__(len(genre) - 1)
        self.register_buffer("genre", torch.as_tensor(np.asarray(genre), dtype=torch.long))
        self.reads = reads

    def loss(self, batch: dict[str, Tensor]) -> None:
        """Nothing to train."""
        return None

    def score(self, batch: dict[str, Tensor]) -> Tensor:
        """``[B, n_items + 1]`` genre weights of each item given ``batch["history"]`` (left-padded)."""
        h = batch["history"]
        n_genres = int(self.genre.max()) + 1
        g = torch.where(h > 0, self.genre[h], torch.full_like(h, -1))
        if self.reads == "histogram":
            weight = torch.stack([(g == k).sum(1) for k in range(n_genres)], 1).float()
        else:
            weight = torch.nn.functional.one_hot(g[:, -1].clamp(min=0), n_genres).float()
        tie_break = -1e-3 * torch.arange(len(self.genre), dtype=torch.float32, device=h.device)
        return weight[:, self.genre] + tie_break[None, :]


__all__ = ["GenreScorer"]
