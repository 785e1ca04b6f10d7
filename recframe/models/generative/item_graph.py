"""The item–item co-occurrence graph of a training split, and the two queries R-GRec asks of it.

:func:`cooccurrence_graph` builds an undirected, weighted item graph from the users' time-ordered
*training* sequences (it is given the training :class:`~recframe.data.interactions.Interactions` only, so no
validation or test interaction can create or weight an edge):

* every ordered pair of positions at distance ``d`` in ``1..window`` of one user's sequence adds
  ``1 / d`` to the weight of the edge between their two items (nearer items are more related; the harmonic
  decay is the common choice of session-graph and item-co-occurrence methods, and it keeps the weight of a
  pair a count of co-occurrences at distance 1);
* pairs of the same item (a repeated interaction) are dropped: no self-loops;
* the graph is symmetric, ``w(i, j) = w(j, i)`` = the sum over both orders, and its edge list is coalesced
  (one entry per directed edge, sorted by source then target) with torch_geometric's ``to_undirected`` /
  ``coalesce``;
* ``top_k`` (default ``None``: every neighbour) keeps, per item, its ``top_k`` heaviest neighbours (ties:
  lower item id first) and then re-symmetrises by union, so an edge stays when either endpoint keeps it and
  an item may end up with more than ``top_k`` neighbours.

The graph comes as an edge list (``edge_index [2, E]``, ``edge_weight [E]``) and its CSR form (``indptr``,
the column ``edge_index[1]`` and the weights, plus cumulative weights), on which
:meth:`ItemGraph.sample_neighbours` draws one neighbour per item with probability proportional to edge weight
and :meth:`ItemGraph.has_edge` answers edge membership by a vectorised binary search within each row, both
without a Python loop over items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch_geometric.utils import to_undirected


@dataclass(frozen=True)
class ItemGraph:
    """An undirected weighted item graph over nodes ``0..n_items`` (node 0, padding, is isolated).

    Attributes:
        edge_index: ``[2, E]`` long, both directions of every edge, sorted by source then target.
        edge_weight: ``[E]`` float32, ``w(i, j)`` (equal for both directions).
        indptr: ``[n_items + 2]`` long, CSR row pointer: item ``i``'s neighbours are
            ``edge_index[1, indptr[i]:indptr[i + 1]]`` (ascending).
        cumweight: ``[E + 1]`` float64, ``0`` then the running sum of ``edge_weight`` (for sampling; float64
            so that the sum over a large graph still resolves a single small weight).
    """

    edge_index: Tensor
    edge_weight: Tensor
    indptr: Tensor
    cumweight: Tensor

    @property
    def n_items(self) -> int:
        """Number of real items (nodes ``1..n_items``)."""
        return self.indptr.numel() - 2

    @property
    def n_edges(self) -> int:
        """Number of undirected edges (half the directed entries)."""
        return self.edge_index.shape[1] // 2

    def csr(self) -> tuple[Tensor, Tensor, Tensor]:
        """``(indptr, column, weight)``: the CSR form of the adjacency."""
        return self.indptr, self.edge_index[1], self.edge_weight

    def degree(self, items: Tensor) -> Tensor:
        """Number of neighbours of each of ``items`` (any shape)."""
        return self.indptr[items + 1] - self.indptr[items]

    def to(self, device: torch.device | str) -> ItemGraph:
        """The same graph on ``device``."""
        return ItemGraph(*(t.to(device) for t in (self.edge_index, self.edge_weight, self.indptr,
                                                  self.cumweight)))

    def sample_neighbours(self, items: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """One neighbour of each of ``items`` ``[N]``, drawn with probability ``w(i, j) / sum_k w(i, k)``.

        Items without a neighbour get 0. One uniform draw per item, located by a binary search in the
        cumulative weights.
        """
        start, stop = self.indptr[items], self.indptr[items + 1]
        if self.edge_index.shape[1] == 0:
            return torch.zeros_like(items)
        low, high = self.cumweight[start], self.cumweight[stop]
        u = torch.rand(items.shape, generator=generator, device=items.device, dtype=torch.float64)
        # the first edge whose running weight sum exceeds the draw; clamped into the row against rounding
        edge = torch.searchsorted(self.cumweight[1:], low + u * (high - low), right=True)
        edge = torch.minimum(torch.maximum(edge, start), stop - 1).clamp(0, self.edge_index.shape[1] - 1)
        return torch.where(stop > start, self.edge_index[1][edge], torch.zeros_like(items))

    def has_edge(self, source: Tensor, target: Tensor) -> Tensor:
        """``[N]`` bool: whether ``(source[n], target[n])`` is an edge (a binary search within each row)."""
        col = self.edge_index[1]
        if col.numel() == 0:
            return torch.zeros(source.shape, dtype=torch.bool, device=source.device)
        low, high = self.indptr[source], self.indptr[source + 1]
        end = high
        while bool((low < high).any()):  # lower bound: the first position in the row with column >= target
            active = low < high
            mid = (low + high) // 2
            less = active & (col[mid.clamp(max=col.numel() - 1)] < target)
            low = torch.where(less, mid + 1, low)
            high = torch.where(active & ~less, mid, high)
        return (low < end) & (col[low.clamp(max=col.numel() - 1)] == target)


def cooccurrence_graph(train: Any, n_items: int | None = None, window: int = 3,
                       top_k: int | None = None) -> ItemGraph:
    """The item co-occurrence graph of the training ``Interactions`` (module docstring for the weights).

    Args:
        train: the training split (rows sorted by user, then time: the ``Interactions`` invariant).
        n_items: catalogue size (default ``train.n_items``; every split of a dataset shares it).
        window: largest position distance between two co-occurring interactions of one user (>= 1).
        top_k: keep each item's ``top_k`` heaviest neighbours (then re-symmetrise by union); ``None`` = all.
    """
    if window < 1:
        raise ValueError(f"cooccurrence_graph: window must be >= 1, got {window}.")
    if top_k is not None and top_k < 1:
        raise ValueError(f"cooccurrence_graph: top_k must be >= 1 or None, got {top_k}.")
    n_items = int(train.n_items if n_items is None else n_items)
    user, item = np.asarray(train.user), np.asarray(train.item)
    if item.size and int(item.max()) > n_items:
        raise ValueError(f"cooccurrence_graph: item id {int(item.max())} exceeds n_items={n_items}.")
    sources, targets, weights = [], [], []
    for distance in range(1, min(window, max(len(item) - 1, 0)) + 1):
        same_user = user[:-distance] == user[distance:]
        a, b = item[:-distance][same_user], item[distance:][same_user]
        keep = a != b  # a repeated item is no edge
        sources.append(a[keep])
        targets.append(b[keep])
        weights.append(np.full(int(keep.sum()), 1.0 / distance, dtype=np.float32))
    edge_index = torch.from_numpy(np.stack([_joined(sources, np.int64), _joined(targets, np.int64)]))
    edge_weight = torch.from_numpy(_joined(weights, np.float32))
    edge_index, edge_weight = to_undirected(edge_index, edge_weight, num_nodes=n_items + 1, reduce="sum")
    if top_k is not None:
        edge_index, edge_weight = _top_k(edge_index, edge_weight, n_items + 1, top_k)
    return _with_csr(edge_index, edge_weight, n_items)


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)


def _top_k(edge_index: Tensor, edge_weight: Tensor, n_nodes: int, k: int) -> tuple[Tensor, Tensor]:
    """Each row's ``k`` heaviest entries (ties: lower column), re-symmetrised by union."""
    row, col = edge_index.numpy()
    order = np.lexsort((col, -edge_weight.numpy(), row))  # by row, then heavier first, then lower column
    starts = np.searchsorted(row[order], np.arange(n_nodes))
    rank = np.arange(len(order)) - starts[row[order]]
    kept = order[rank < k]
    # weights are symmetric, so "max" merges the two directions of a kept edge without changing them
    return to_undirected(edge_index[:, kept], edge_weight[kept], num_nodes=n_nodes, reduce="max")


def _with_csr(edge_index: Tensor, edge_weight: Tensor, n_items: int) -> ItemGraph:
    counts = torch.bincount(edge_index[0], minlength=n_items + 1)
    indptr = torch.zeros(n_items + 2, dtype=torch.long)
    indptr[1:] = counts.cumsum(0)
    cumweight = torch.zeros(edge_weight.numel() + 1, dtype=torch.float64)
    cumweight[1:] = edge_weight.double().cumsum(0)
    return ItemGraph(edge_index.long(), edge_weight.float(), indptr, cumweight)
