"""SASRec (Kang & McAuley, ICDM 2018): self-attentive sequential recommendation.

Choices, stated:

* Trained on **all positions** of each window with a causal mask (as the
  paper), and by default with cross-entropy over the **full catalogue**
  (``loss_type="ce"``, as RecBole's ``CE``). For large catalogues,
  ``loss_type="chunked"`` computes the same cross-entropy in item chunks of
  ``chunk_size`` (memory positions x chunk, not positions x items) and
  ``loss_type="sampled_logq"`` a sampled softmax with logQ correction over
  in-batch plus ``n_negatives`` uniform or popularity negatives (``sampler``).
  ``loss_type="sampled"`` is the uncorrected sampled softmax over
  ``n_negatives`` uniform negatives shared by the batch, accidental hits masked.
  All four are :func:`recframe.models.losses.next_item_loss`.
* Pre-norm transformer blocks with GELU, learned absolute positions, item
  embeddings tied between input and output, weights ~ N(0, 0.02).
* Padding keys are masked in attention (the original code lets real tokens
  attend to zero padding vectors; masking them is strictly cleaner).
"""

from __future__ import annotations

from typing import Literal

from torch import Tensor, nn

from recframe.models.addons import EmbeddingAddon
from recframe.models.layers import TransformerBlock, encode_sequence, init_transformer_weights
from recframe.models.losses import NextItemLoss
from recframe.models.sequential import NextItemModel


class SASRec(NextItemModel):
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
        loss_type: ``ce`` (full softmax), ``chunked`` (the same, in item chunks), ``sampled``
            (uncorrected sampled softmax) or ``sampled_logq`` (sampled softmax with logQ correction).
        n_negatives: sampled negatives of ``sampled`` and ``sampled_logq``.
        chunk_size: items per chunk of ``chunked``.
        sampler: ``uniform`` or ``popularity`` negatives of ``sampled_logq``.
        n_kv_heads: key/value heads for grouped-query attention (``None``: one per query head, the
            original SASRec); must divide ``n_heads``.
        addons: embedding add-ons (:class:`~recframe.models.addons.EmbeddingAddon`, e.g.
            :class:`~recframe.models.signed.ValenceMargin`); their specs are stored in the hyperparameters.
    """

    def __init__(self, n_items: int, n_users: int = 0, max_len: int = 50, hidden: int = 64,
                 n_layers: int = 2, n_heads: int = 2, inner: int = 256, dropout: float = 0.2,
                 attn_dropout: float = 0.2,
                 loss_type: Literal["ce", "chunked", "sampled", "sampled_logq"] = "ce",
                 n_negatives: int = 256, lr: float = 1e-3, weight_decay: float = 0.0,
                 optimizer: Literal["adam", "adamw"] = "adam", n_kv_heads: int | None = None,
                 addons: list[EmbeddingAddon] | None = None, chunk_size: int = 8192,
                 sampler: Literal["uniform", "popularity"] = "uniform") -> None:
        super().__init__(n_items, n_users, lr, weight_decay, optimizer)
        self.save_hyperparameters(ignore=["addons"])
        self.attach_addons(addons)
        self.max_len = max_len
        self.loss_type = loss_type
        self.n_negatives = n_negatives
        self.next_item = NextItemLoss(n_items, loss_type, n_negatives, chunk_size, sampler)
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
