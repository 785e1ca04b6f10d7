"""``SearchResult``: the top-k answer of :meth:`recframe.retrieval.ItemIndex.search`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)  # arrays: compare fields with numpy, not ==
class SearchResult:
    """Top-k items per query row, best first.

    Attributes:
        items: ``int64 [B, k]`` item ids (1..n_items). Entries past ``counts[i]`` are ``0``
            (the padding id), never a real item.
        scores: ``float32 [B, k]`` scores in the index's metric (inner product or cosine);
            ``-inf`` past ``counts[i]``.
        counts: ``int64 [B]`` number of valid entries in each row; ``counts[i] < k`` when fewer
            than ``k`` items were eligible (or, for an approximate index, found) after exclusion.
    """

    items: np.ndarray
    scores: np.ndarray
    counts: np.ndarray

    def __len__(self) -> int:
        return int(self.items.shape[0])

    @property
    def k(self) -> int:
        """The ``k`` that was asked for (columns of ``items``)."""
        return int(self.items.shape[1])

    @property
    def complete(self) -> bool:
        """True when every row holds ``k`` valid items."""
        return bool((self.counts == self.k).all())

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """The valid ``(items, scores)`` of row ``i`` (the first ``counts[i]`` entries)."""
        n = int(self.counts[i])
        return self.items[i, :n], self.scores[i, :n]
