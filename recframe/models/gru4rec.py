"""GRU4Rec (Hidasi et al., ICLR 2016): a recurrent next-item recommender.

Item embedding -> dropout -> GRU -> linear projection back to the embedding width -> inner product with the
(tied) item embeddings, i.e. a score for every item of the catalogue.

Choices, stated:

* **The modern recipe, not the 2016 training loop.** As RecBole's GRU4Rec (and the re-evaluations that find
  a well-trained GRU4Rec competitive with transformers), it is trained on windows of each user's history
  with cross-entropy over the **full catalogue** at **every position** (``loss_type="ce"``), the same
  objective as :class:`~recframe.models.SASRec`. The paper's session-parallel mini-batches, TOP1/BPR losses
  and in-batch negatives are not used. For large catalogues the scalable losses shared with SASRec apply
  (:class:`recframe.models.losses.NextItemLoss`): ``chunked`` (the same cross-entropy in item chunks),
  ``sampled_logq`` (sampled softmax over in-batch plus uniform or popularity negatives, logQ-corrected) and
  ``sampled`` (uncorrected, uniform negatives).
* **Output layer tied to the input embeddings.** A linear layer maps the GRU state (``hidden``) to the
  embedding width (``dim``) and items are scored by inner product with their input embeddings (RecBole's
  GRU4Rec). This makes it an :class:`~recframe.models.base.EmbeddingModel`: FAISS can serve it.
* **Padding never enters the recurrence.** Batches are left-padded; each row is right-aligned and packed
  (``pack_padded_sequence``), so the state after the latest item does not depend on how much padding a
  batch adds (a GRU fed zero vectors would still move its state through its biases).
* **Initialisation** as RecBole: Xavier-normal item embeddings (padding row zero), Xavier-uniform GRU
  input and recurrent weights.
* Histories longer than ``max_len`` are cut to their latest ``max_len`` items, as for SASRec, so every
  sequential model of a table reads the same window.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from recframe.models.losses import NextItemLoss
from recframe.models.sequential import NextItemModel


class GRU4Rec(NextItemModel):
    """Recurrent sequential recommender trained with full-catalogue cross-entropy.

    Args:
        n_items: catalogue size (linked from data).
        n_users: number of users (linked from data; unused by the model).
        max_len: longest history the model reads (`recframe fit` links it from ``data.max_len``).
        dim: item embedding width (input and output, tied).
        hidden: GRU state width.
        n_layers: stacked GRU layers.
        dropout: dropout on the item embeddings fed to the GRU (and between GRU layers when ``n_layers > 1``).
        loss_type: ``ce`` (full softmax), ``chunked`` (the same, in item chunks), ``sampled``
            (uncorrected sampled softmax) or ``sampled_logq`` (sampled softmax with logQ correction).
        n_negatives: sampled negatives of ``sampled`` and ``sampled_logq``.
        lr: learning rate.
        weight_decay: weight decay (L2 with Adam, decoupled with AdamW).
        optimizer: ``adam`` or ``adamw``.
        chunk_size: items per chunk of ``chunked``.
        sampler: ``uniform`` or ``popularity`` negatives of ``sampled_logq``.
    """

    def __init__(self, n_items: int, n_users: int = 0, max_len: int = 50, dim: int = 64, hidden: int = 128,
                 n_layers: int = 1, dropout: float = 0.3,
                 loss_type: Literal["ce", "chunked", "sampled", "sampled_logq"] = "ce",
                 n_negatives: int = 256, lr: float = 1e-3, weight_decay: float = 0.0,
                 optimizer: Literal["adam", "adamw"] = "adam", chunk_size: int = 8192,
                 sampler: Literal["uniform", "popularity"] = "uniform") -> None:
        super().__init__(n_items, n_users, lr, weight_decay, optimizer)
        self.next_item = NextItemLoss(n_items, loss_type, n_negatives, chunk_size, sampler)
        self.save_hyperparameters()
        self.max_len = max_len
        self.loss_type = loss_type
        self.n_negatives = n_negatives
        self.item_emb = nn.Embedding(n_items + 1, dim, padding_idx=0)
        self.emb_drop = nn.Dropout(dropout)
        self.gru = nn.GRU(dim, hidden, num_layers=n_layers, batch_first=True,
                          dropout=dropout if n_layers > 1 else 0.0)
        self.proj = nn.Linear(hidden, dim)
        self._init_weights()

    def _init_weights(self) -> None:
        nn.init.xavier_normal_(self.item_emb.weight)
        with torch.no_grad():
            self.item_emb.weight[0].zero_()
        for name, param in self.gru.named_parameters():
            if name.startswith("weight_"):
                nn.init.xavier_uniform_(param)

    def encode(self, items: Tensor) -> Tensor:
        """Hidden states ``[B, L, dim]`` for left-padded item sequences ``[B, L]`` (zeros at padding)."""
        items = items[:, -self.max_len:]
        x = self.emb_drop(self.item_emb(items))
        B, W, _ = x.shape
        lengths = (items > 0).sum(dim=1)
        pad = W - lengths  # left padding of each row
        cols = torch.arange(W, device=items.device)[None, :]
        to_right = ((cols + pad[:, None]) % W)[..., None]  # row j of the right-aligned copy is row j + pad
        x = x.gather(1, to_right.expand(B, W, x.shape[-1]))
        packed = pack_padded_sequence(x, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.gru(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=W)
        to_left = ((cols - pad[:, None]) % W)[..., None]  # back to left padding
        out = out.gather(1, to_left.expand(B, W, out.shape[-1]))
        return self.proj(out) * (items > 0)[..., None].to(out.dtype)
