"""LightGCN (He et al., SIGIR 2020) on torch_geometric's ``LGConv``.

The user–item bipartite graph of the training split is propagated ``n_layers``
times with symmetric normalisation (``D^-1/2 A D^-1/2``, computed once by
``gcn_norm`` and stored as buffers so checkpoints are self-contained); the
final embedding is the mean of the layer outputs (alpha_k = 1/(K+1), as the
paper). Trained with BPR and the per-batch L2 penalty on ego embeddings.
Node layout: users ``0..n_users`` then items ``0..n_items`` (both with padding).
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar, Literal

import torch
from torch import Tensor, nn
from torch_geometric.nn import LGConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from recframe.data.interactions import Interactions
from recframe.models.addons import EmbeddingAddon
from recframe.models.base import PropagatedEmbeddingModel
from recframe.models.losses import bpr_loss, embedding_l2


class LightGCN(PropagatedEmbeddingModel):
    """Light graph convolution recommender.

    Args:
        dim: embedding size.
        n_layers: propagation layers K.
        reg_weight: weight of the per-batch L2 penalty on ego embeddings.
        addons: embedding add-ons (:class:`~recframe.models.addons.EmbeddingAddon`, e.g.
            :class:`~recframe.models.signed.ValenceMargin`); their specs are stored in the hyperparameters.
    """

    train_batch: ClassVar[str] = "pairwise"

    def __init__(self, n_items: int, n_users: int, dim: int = 64, n_layers: int = 3,
                 reg_weight: float = 1e-4, lr: float = 1e-3, weight_decay: float = 0.0,
                 optimizer: Literal["adam", "adamw"] = "adam",
                 addons: list[EmbeddingAddon] | None = None) -> None:
        super().__init__(n_items, n_users, lr, weight_decay, optimizer)
        self.save_hyperparameters(ignore=["addons"])
        self.attach_addons(addons)
        self.reg_weight = reg_weight
        self.emb = nn.Embedding(n_users + 1 + n_items + 1, dim)
        nn.init.xavier_normal_(self.emb.weight)
        self.convs = nn.ModuleList(LGConv(normalize=False) for _ in range(n_layers))
        self.register_buffer("edge_index", torch.zeros(2, 0, dtype=torch.long))
        self.register_buffer("edge_weight", torch.zeros(0))

    def bind_data(self, train: Interactions) -> None:
        edge_index, weight = bipartite_graph(train.user, train.item, self.n_users, self.emb.num_embeddings)
        self.edge_index = edge_index.to(self.emb.weight.device)
        self.edge_weight = weight.to(self.emb.weight.device)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):  # type: ignore[override]
        # graph buffers change size after bind_data; adopt the checkpoint's shapes
        for key in ("edge_index", "edge_weight"):
            if key in state_dict:
                setattr(self, key, torch.empty_like(state_dict[key]))
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def adjacency(self) -> Tensor:
        """Normalised adjacency as a sparse CSR matrix (built from the buffers, cached).

        ``LGConv`` accepts a sparse adjacency and then aggregates with one sparse
        matrix product per layer, several times faster on CPU than the
        scatter-based message passing over an edge list.
        """
        key = (self.edge_index.data_ptr(), self.edge_index.device)
        if getattr(self, "_adj_key", None) != key:
            self._adj = csr_adjacency(self.edge_index, self.edge_weight, self.emb.num_embeddings)
            self._adj_key = key
        return self._adj

    def propagate(self) -> tuple[Tensor, Tensor]:
        """Final user and item embeddings (mean over layers 0..K)."""
        x = self.emb.weight
        out = x
        adj = self.adjacency()
        for conv in self.convs:
            x = conv(x, adj)
            out = out + x
        out = out / (len(self.convs) + 1)
        return out[: self.n_users + 1], out[self.n_users + 1:]

    def loss(self, batch: dict[str, Tensor]) -> Tensor:
        users, items = self.propagate()
        uid, pid, nid = batch["users"], batch["pos"], batch["neg"]
        u, p, n = users[uid], items[pid], items[nid]
        off = self.n_users + 1
        reg = embedding_l2(self.emb(uid), self.emb(pid + off), self.emb(nid + off))
        return bpr_loss((u * p).sum(-1), (u * n).sum(-1)) + self.reg_weight * reg



def bipartite_graph(users: Any, items: Any, n_users: int, n_nodes: int) -> tuple[Tensor, Tensor]:
    """The symmetric, normalised user–item graph of interaction rows ``(users[r], items[r])``.

    Node layout: users ``0..n_users`` then items at ``n_users + 1 + item`` (both with padding), ``n_nodes``
    in all. Repeated pairs become one edge; both directions are kept; weights are ``D^-1/2 A D^-1/2``
    (``gcn_norm`` without self-loops). Returns ``(edge_index [2, E], edge_weight [E])`` on the CPU.
    """
    u = torch.as_tensor(users, dtype=torch.long)
    i = torch.as_tensor(items, dtype=torch.long) + n_users + 1
    pairs = torch.unique(torch.stack([u, i]), dim=1)
    edge_index = torch.cat([pairs, pairs.flip(0)], dim=1)
    return gcn_norm(edge_index, None, num_nodes=n_nodes, add_self_loops=False)


def csr_adjacency(edge_index: Tensor, edge_weight: Tensor, n_nodes: int) -> Tensor:
    """A symmetric edge list as the sparse CSR matrix ``LGConv`` aggregates with (one sparse product)."""
    # LGConv multiplies adj_t @ x with adj_t[target, source]; the graph is symmetric
    coo = torch.sparse_coo_tensor(edge_index.flip(0), edge_weight, (n_nodes, n_nodes),
                                  check_invariants=True).coalesce()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return coo.to_sparse_csr()
