"""LightGCN with a negative-aware pairwise loss: liked above unobserved, disliked below unobserved.

Architecture: LightGCN (He et al., SIGIR 2020) exactly, but propagated over the **liked** graph only
(training pairs labelled +1), so a disliked item never passes its embedding to the user who disliked it.

Loss, on the ``pairwise`` batch rows ``(u, i, j)`` (``i`` a training item of ``u``, ``j`` one uniform item
outside ``u``'s training items; :mod:`recframe.data.batches`), with ``s(u, x) = <z_u, z_x>`` the final
(propagated) embeddings' inner product and ``y_ui`` the pair's label::

    l_ui = -log sigmoid(s(u, i) - s(u, j))                  if y_ui = +1   (BPR: liked above unobserved)
    l_ui = -neg_weight * log sigmoid(s(u, j) - s(u, i))     if y_ui = -1   (disliked below unobserved)
    loss = sum_{rows with y != 0} l_ui / n_signed + reg_weight * sum ||e||^2 / (2 n_signed)

where the L2 penalty is LightGCN's, on the ego (layer-0) embeddings of ``u``, ``i`` and ``j`` of the signed
rows, and rows with label 0 (neutral, rating 3) are dropped (:mod:`recframe.models.signed.base`). The
disliked term is BPR with the roles of ``i`` and ``j`` swapped: the same scale as the liked term, and a
gradient that vanishes once the disliked item is well below the unobserved one, so the two terms pull the
score toward one ordering, liked > unobserved > disliked.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import LGConv

from recframe.models.addons import EmbeddingAddon
from recframe.models.signed.base import SignedGraphModel


class LightGCNNeg(SignedGraphModel):
    """LightGCN on the liked graph with a negative-aware BPR loss (module docstring).

    Args:
        dim: embedding size (64, LightGCN's and the ML-100K configs').
        n_layers: propagation layers K (3, as the LightGCN config).
        reg_weight: weight of the per-batch L2 penalty on ego embeddings (1e-4, LightGCN's).
        neg_weight: weight of the disliked-below-unobserved term relative to the liked term (1.0: the two
            signs count alike per row; disliked rows are about a fifth of ML-100K's signed rows, so this
            already lets the liked term dominate).
        lr, weight_decay, optimizer: optimiser.
        addons: embedding add-ons (e.g. :class:`~recframe.models.signed.ValenceMargin`).
    """

    train_batch: ClassVar[str] = "pairwise"

    def __init__(self, n_items: int, n_users: int, dim: int = 64, n_layers: int = 3, reg_weight: float = 1e-4,
                 neg_weight: float = 1.0, lr: float = 1e-3, weight_decay: float = 0.0,
                 optimizer: Literal["adam", "adamw"] = "adam",
                 addons: list[EmbeddingAddon] | None = None) -> None:
        super().__init__(n_items, n_users, lr, weight_decay, optimizer)
        if neg_weight < 0:
            raise ValueError(f"LightGCNNeg: model.init_args.neg_weight={neg_weight}; it must be >= 0 "
                             "(0 trains on liked pairs only).")
        self.save_hyperparameters(ignore=["addons"])
        self.attach_addons(addons)
        self.reg_weight, self.neg_weight = reg_weight, neg_weight
        self.emb = nn.Embedding(self.n_nodes, dim)
        nn.init.xavier_normal_(self.emb.weight)
        self.convs = nn.ModuleList(LGConv(normalize=False) for _ in range(n_layers))

    def propagate(self) -> tuple[Tensor, Tensor]:
        out = self.light_propagate(self.emb.weight, self.convs)
        return out[: self.item_offset], out[self.item_offset:]

    def loss(self, batch: dict[str, Tensor]) -> Tensor:
        uid, pid, nid = batch["users"], batch["pos"], batch["neg"]
        sign = self.row_signs(uid, pid)
        keep = sign != 0
        uid, pid, nid, sign = uid[keep], pid[keep], nid[keep], sign[keep]
        users, items = self.propagate()
        u = users[uid]
        s_pos, s_neg = (u * items[pid]).sum(-1), (u * items[nid]).sum(-1)
        liked = sign > 0
        terms = -F.logsigmoid(s_pos - s_neg) * liked - self.neg_weight * F.logsigmoid(s_neg - s_pos) * ~liked
        n = max(int(keep.sum()), 1)
        ego = self.emb(uid).pow(2).sum() + self.emb(pid + self.item_offset).pow(2).sum() \
            + self.emb(nid + self.item_offset).pow(2).sum()
        return terms.sum() / n + self.reg_weight * ego / (2 * n)


__all__ = ["LightGCNNeg"]
