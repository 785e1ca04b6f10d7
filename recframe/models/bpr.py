"""BPR-MF (Rendle et al., UAI 2009): matrix factorisation trained with the BPR loss.

Uniform negatives not in the user's training items (see
:class:`recframe.data.batches.NegativeSampler`) and a per-batch L2 penalty on
the embeddings used in the batch, as RecBole and LightGCN's reference code do.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from torch import Tensor, nn

from recframe.models.addons import EmbeddingAddon
from recframe.models.base import EmbeddingModel
from recframe.models.losses import bpr_loss, embedding_l2


class BPRMF(EmbeddingModel):
    """Matrix factorisation with BPR.

    Args:
        dim: embedding size.
        reg_weight: weight of the per-batch embedding L2 penalty.
        addons: embedding add-ons (:class:`~recframe.models.addons.EmbeddingAddon`, e.g.
            :class:`~recframe.models.signed.ValenceMargin`); their specs are stored in the hyperparameters.
    """

    train_batch: ClassVar[str] = "pairwise"

    def __init__(self, n_items: int, n_users: int, dim: int = 64, reg_weight: float = 1e-4,
                 lr: float = 1e-3, weight_decay: float = 0.0,
                 optimizer: Literal["adam", "adamw"] = "adam",
                 addons: list[EmbeddingAddon] | None = None) -> None:
        super().__init__(n_items, n_users, lr, weight_decay, optimizer)
        self.save_hyperparameters(ignore=["addons"])
        self.attach_addons(addons)
        self.reg_weight = reg_weight
        self.user_emb = nn.Embedding(n_users + 1, dim)
        self.item_emb = nn.Embedding(n_items + 1, dim, padding_idx=0)
        nn.init.xavier_normal_(self.user_emb.weight)
        nn.init.xavier_normal_(self.item_emb.weight)

    def loss(self, batch: dict[str, Tensor]) -> Tensor:
        u = self.user_emb(batch["users"])
        p, n = self.item_emb(batch["pos"]), self.item_emb(batch["neg"])
        return bpr_loss((u * p).sum(-1), (u * n).sum(-1)) + self.reg_weight * embedding_l2(u, p, n)

    def query_embedding(self, batch: dict[str, Tensor]) -> Tensor:
        return self.user_emb(batch["users"])

    def item_embeddings(self) -> Tensor:
        return self.item_emb.weight
