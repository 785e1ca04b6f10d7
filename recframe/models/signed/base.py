"""``SignedGraphModel``: what the graph-based sign-aware recommenders share.

Both sign-aware models (:class:`~recframe.models.signed.SiReN`, :class:`~recframe.models.signed.LightGCNNeg`)
train on the ``pairwise`` batches every BPR model gets (``users``, ``pos`` a training item, ``neg`` one
uniform unobserved item; :mod:`recframe.data.batches`) and read each row's sign themselves, so no batch
format changes. What this base holds:

* **Signs of the training pairs** (:meth:`SignedGraphModel.bind_data`, training split only): every
  ``(user, item)`` pair with its latest label (:func:`~recframe.models.signed.pairs.signed_pairs`: +1 liked,
  rating >= 4; -1 disliked, rating <= 2; 0 neither, e.g. rating 3) as sorted keys, so
  :meth:`SignedGraphModel.row_signs` labels a batch with one ``searchsorted``. Pairs with label 0 carry
  no sign: they are in neither graph and add no loss term (SiReN has no such class: its offset 3.5 makes
  every rating a sign; our labels keep rating 3 unknown, the project's signed protocol). They are still
  never drawn as unobserved items (the sampler excludes every training item).
* **The positive graph**: the liked pairs as a symmetric, normalised user–item graph
  (:func:`recframe.models.lightgcn.bipartite_graph`, LightGCN's normalisation), in persistent buffers so a
  checkpoint is self-contained (inference propagates over it); :meth:`load_state_dict` adopts the stored
  shapes, as LightGCN's does. The negative pairs are kept as keys (non-persistent: training only).
* **LightGCN propagation** (:meth:`SignedGraphModel.light_propagate`) of a node table over that graph,
  through torch_geometric's ``LGConv`` on a cached sparse CSR adjacency.

Node layout (LightGCN's): users ``0..n_users`` then items at ``n_users + 1 + item`` (both with padding).
A subclass implements :meth:`SignedGraphModel.propagate` (final user and item tables) and ``loss``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import torch
from torch import Tensor, nn

from recframe.data.interactions import DataError
from recframe.models.base import PropagatedEmbeddingModel
from recframe.models.lightgcn import bipartite_graph, csr_adjacency
from recframe.models.signed.pairs import lookup, pair_keys, signed_pairs


class SignedGraphModel(PropagatedEmbeddingModel):
    """Base of the graph-based sign-aware models (module docstring).

    Args:
        n_items, n_users: catalogue and user counts (linked from the data by the CLI).
        lr, weight_decay, optimizer: optimiser (:class:`~recframe.models.base.RecModel`).
    """

    train_batch: ClassVar[str] = "pairwise"
    #: graph buffers whose shapes a checkpoint sets (they change size in bind_data)
    graph_buffers: ClassVar[tuple[str, ...]] = ("edge_index", "edge_weight")

    def __init__(self, n_items: int, n_users: int, lr: float = 1e-3, weight_decay: float = 0.0,
                 optimizer: Literal["adam", "adamw"] = "adam") -> None:
        super().__init__(n_items, n_users, lr, weight_decay, optimizer)
        self.n_nodes = n_users + 1 + n_items + 1
        self.item_offset = n_users + 1
        # the liked graph (persistent: inference propagates over it)
        self.register_buffer("edge_index", torch.zeros(2, 0, dtype=torch.long))
        self.register_buffer("edge_weight", torch.zeros(0))
        # every training pair's latest label, by sorted key (training only: rebuilt at each fit)
        self.register_buffer("pair_key", torch.zeros(0, dtype=torch.long), persistent=False)
        self.register_buffer("pair_label", torch.zeros(0, dtype=torch.int8), persistent=False)

    # ------------------------------------------------------------------ data
    def bind_data(self, train: Any) -> None:
        """The liked graph and the pair signs, from the training split only (``train.label``)."""
        users, items, labels = signed_pairs(train)
        if not (labels != 0).any():
            raise DataError(f"{type(self).__name__} trains on liked and disliked feedback, but the training "
                            f"split of {train.name!r} has no labelled interaction (all labels 0); use rated "
                            "data (data.like_threshold / data.dislike_threshold set the labels).")
        liked = labels == 1
        edge_index, weight = bipartite_graph(users[liked], items[liked], self.n_users, self.n_nodes)
        device = self.edge_index.device
        self.edge_index, self.edge_weight = edge_index.to(device), weight.to(device)
        keys = pair_keys(torch.as_tensor(users), torch.as_tensor(items), self.n_items)
        self.pair_key = keys.to(device)  # signed_pairs returns pairs sorted by key
        self.pair_label = torch.as_tensor(labels, dtype=torch.int8).to(device)

    def row_signs(self, users: Tensor, items: Tensor) -> Tensor:
        """int8 label (+1, -1, or 0 for neutral or unknown pairs) of each ``(users[r], items[r])``."""
        if self.pair_key.numel() == 0:
            raise RuntimeError(f"{type(self).__name__} has no training signs: fit it (bind_data runs at "
                               "each fit) before computing its loss.")
        return lookup(self.pair_key, self.pair_label, pair_keys(users, items, self.n_items))

    def loss_terms(self, batch: dict[str, Tensor]) -> int:
        """Signed rows in the batch (the rows the loss averages)."""
        return int((self.row_signs(batch["users"], batch["pos"]) != 0).sum())

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False):  # type: ignore[override]
        # graph buffers change size after bind_data; adopt the checkpoint's shapes
        for key in self.graph_buffers:
            if key in state_dict:
                setattr(self, key, torch.empty_like(state_dict[key]))
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    # ----------------------------------------------------------- propagation
    def adjacency(self) -> Tensor:
        """The liked graph's normalised adjacency as a sparse CSR matrix (cached per buffer)."""
        key = (self.edge_index.data_ptr(), self.edge_index.device)
        if getattr(self, "_adj_key", None) != key:
            self._adj = csr_adjacency(self.edge_index, self.edge_weight, self.n_nodes)
            self._adj_key = key
        return self._adj

    def light_propagate(self, x: Tensor, convs: nn.ModuleList) -> Tensor:
        """LightGCN over the liked graph: the mean of layers ``0..K`` (``alpha_k = 1 / (K + 1)``)."""
        adj = self.adjacency()
        out = x
        for conv in convs:
            x = conv(x, adj)
            out = out + x
        return out / (len(convs) + 1)


    # ------------------------------------------------------------ embeddings


__all__ = ["SignedGraphModel"]
