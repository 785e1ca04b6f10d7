"""SASRec (Kang & McAuley, ICDM 2018): self-attentive sequential recommendation.

Choices, stated:

* Trained on **all positions** of each window with a causal mask (as the
  paper), and by default with cross-entropy over the **full catalogue**
  (``loss_type="ce"``, as RecBole's ``CE``); ``loss_type="sampled"`` uses a
  sampled softmax over ``n_negatives`` uniform negatives shared by the batch,
  with accidental hits masked (uniform proposal, so no log-Q correction).
* Pre-norm transformer blocks with GELU, learned absolute positions, item
  embeddings tied between input and output, weights ~ N(0, 0.02).
* Padding keys are masked in attention (the original code lets real tokens
  attend to zero padding vectors; masking them is strictly cleaner).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from recframe.models.addons import EmbeddingAddon
from recframe.models.base import EmbeddingModel
from recframe.models.layers import TransformerBlock, encode_sequence, init_transformer_weights


class SASRec(EmbeddingModel):
    """Self-attentive sequential recommender.

    Args:
        n_items: catalogue size (linked from data).
        max_len: longest history the model reads (`recframe fit` links it from ``data.max_len``).
        hidden: embedding and model width.
        n_layers: transformer blocks.
        n_heads: attention heads per block.
        inner: feed-forward width.
        dropout: dropout on embeddings and residual branches.
        attn_dropout: dropout on attention weights.
        loss_type: ``ce`` (full softmax) or ``sampled`` (sampled softmax).
        n_negatives: negatives for the sampled softmax.
        n_kv_heads: key/value heads for grouped-query attention (``None``: one per query head, the
            original SASRec); must divide ``n_heads``.
        addons: embedding add-ons (:class:`~recframe.models.addons.EmbeddingAddon`, e.g.
            :class:`~recframe.models.signed.ValenceMargin`); their specs are stored in the hyperparameters.
    """

    train_batch: ClassVar[str] = "sequence"
    uses_history: ClassVar[bool] = True

    def __init__(self, n_items: int, n_users: int = 0, max_len: int = 50, hidden: int = 64,
                 n_layers: int = 2, n_heads: int = 2, inner: int = 256, dropout: float = 0.2,
                 attn_dropout: float = 0.2, loss_type: Literal["ce", "sampled"] = "ce",
                 n_negatives: int = 256, lr: float = 1e-3, weight_decay: float = 0.0,
                 optimizer: Literal["adam", "adamw"] = "adam", n_kv_heads: int | None = None,
                 addons: list[EmbeddingAddon] | None = None) -> None:
        super().__init__(n_items, n_users, lr, weight_decay, optimizer)
        self.save_hyperparameters(ignore=["addons"])
        self.attach_addons(addons)
        self.max_len = max_len
        self.loss_type = loss_type
        self.n_negatives = n_negatives
        self.item_emb = nn.Embedding(n_items + 1, hidden, padding_idx=0)
        self.pos_emb = nn.Embedding(max_len, hidden)
        self.emb_drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(hidden, n_heads, inner, dropout, attn_dropout, n_kv_heads=n_kv_heads)
            for _ in range(n_layers))
        self.final_norm = nn.LayerNorm(hidden)
        self.apply(self._init_weights)

    _init_weights = staticmethod(init_transformer_weights)

    def encode(self, items: Tensor) -> Tensor:
        """Hidden states ``[B, L, d]`` for left-padded item sequences ``[B, L]``."""
        items = items[:, -self.max_len:]
        return encode_sequence(self.item_emb(items), items, self.pos_emb, self.emb_drop, self.blocks,
                               self.final_norm)

    def loss(self, batch: dict[str, Tensor]) -> Tensor:
        h = self.encode(batch["input"])
        target = batch["target"]
        keep = target > 0
        h, target = h[keep], target[keep]
        if self.loss_type == "ce":
            logits = h @ self.item_emb.weight.T
            logits[:, 0] = float("-inf")
            return F.cross_entropy(logits, target)
        neg = torch.randint(1, self.n_items + 1, (self.n_negatives,), device=h.device)
        pos_logit = (h * self.item_emb(target)).sum(-1, keepdim=True)
        neg_logit = h @ self.item_emb(neg).T
        neg_logit = neg_logit.masked_fill(neg[None, :] == target[:, None], float("-inf"))
        logits = torch.cat([pos_logit, neg_logit], dim=1)
        return F.cross_entropy(logits, torch.zeros(len(target), dtype=torch.long, device=h.device))

    def loss_terms(self, batch: dict[str, Tensor]) -> int:
        return int((batch["target"] > 0).sum())

    def query_embedding(self, batch: dict[str, Tensor]) -> Tensor:
        return self.encode(batch["history"])[:, -1]

    def item_embeddings(self) -> Tensor:
        return self.item_emb.weight
