"""BERT4Rec (Sun et al., CIKM 2019): a bidirectional transformer trained by cloze (masked item prediction).

Training masks items of each training window and predicts them from both sides; to recommend, a ``[MASK]``
token is appended after the history and the model predicts what fills it.

Choices, stated (the field's practice, and why):

* **The mask token is one extra embedding row**, id ``n_items + 1`` (row 0 is padding). It is never a
  catalogue item: it has no output score, and :meth:`BERT4Rec.item_embeddings` stops before it.
* **Cloze masking** (the paper, RecBole): every real item of a window is replaced by ``[MASK]`` independently
  with probability ``mask_prob`` (0.2 by default, the paper's value for MovieLens; it reports 0.6 as best on
  Beauty, so the Amazon configs may raise it). A window that drew no mask gets one at a random real position,
  as the original code masks at least one item per sequence. A masked item is always replaced by
  ``[MASK]`` (no BERT 80/10/10 random or kept tokens, as the BERT4Rec code and RecBole).
* **The paper's "mask the last item" samples** (Sun et al. §3.6): with probability ``last_mask_rate`` a window
  is masked at its latest item only, which matches the inference task (predict what follows the history).
* **Loss**: cross-entropy over the **full catalogue** at the masked positions only (``loss_type="ce"``, as
  RecBole's CE); the scalable losses shared with SASRec and GRU4Rec apply too
  (:class:`recframe.models.losses.NextItemLoss`: ``chunked``, ``sampled_logq``, ``sampled``).
* **Output head** as BERT's masked-LM head and the BERT4Rec code: a dense layer, GELU and LayerNorm, then an
  inner product with the (tied) input item embeddings plus a per-item output bias. The bias is folded into
  the embeddings (query ``[t, 1]``, item ``[e_i, b_i]``), so the model is an
  :class:`~recframe.models.base.EmbeddingModel` whose inner product is exactly its score and FAISS can
  serve it.
* **Encoder**: the shared pre-norm :class:`~recframe.models.layers.TransformerBlock` (as SASRec) with a
  bidirectional mask that hides padding keys (:func:`~recframe.models.layers.encode_sequence` with
  ``causal=False``), rather than BERT's post-norm blocks: one transformer in the code base, and pre-norm
  trains stably without warm-up. Learned positions count from the right end, so the latest item (or the
  appended ``[MASK]``) always sits at the last position; weights ~ N(0, 0.02) as RecBole.
* **Windows**: training reads the ``sequence`` batches of SASRec. A window is up to ``max_len + 1`` items
  (its inputs and its latest target), and at inference the model reads the latest ``max_len`` items plus
  the ``[MASK]``: the same ``max_len + 1`` positions, so the position table has ``max_len + 1`` rows.
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
from torch import Tensor, nn

from recframe.data.interactions import Interactions
from recframe.models.base import EmbeddingModel
from recframe.models.layers import TransformerBlock, encode_sequence, init_transformer_weights
from recframe.models.losses import NextItemLoss


class BERT4Rec(EmbeddingModel):
    """Bidirectional transformer recommender trained by cloze.

    Args:
        n_items: catalogue size (linked from data).
        n_users: number of users (linked from data; unused by the model).
        max_len: longest history the model reads (`recframe fit` links it from ``data.max_len``); the model
            has ``max_len + 1`` positions (history plus the appended ``[MASK]``).
        hidden: embedding and model width.
        n_layers: transformer blocks.
        n_heads: attention heads per block.
        inner: feed-forward width.
        dropout: dropout on embeddings and residual branches.
        attn_dropout: dropout on attention weights.
        mask_prob: probability that each item of a training window is masked.
        last_mask_rate: share of training windows masked at their latest item only (Sun et al. §3.6).
        loss_type: ``ce`` (full softmax over the catalogue), ``chunked`` (the same, in item chunks),
            ``sampled`` (uncorrected sampled softmax) or ``sampled_logq`` (sampled softmax, logQ-corrected).
        n_negatives: sampled negatives of ``sampled`` and ``sampled_logq``.
        lr: learning rate.
        weight_decay: weight decay (L2 with Adam, decoupled with AdamW).
        optimizer: ``adam`` or ``adamw``.
        n_kv_heads: key/value heads for grouped-query attention (``None``: one per query head).
        chunk_size: items per chunk of ``chunked``.
        sampler: ``uniform`` or ``popularity`` negatives of ``sampled_logq``.
    """

    train_batch: ClassVar[str] = "sequence"
    uses_history: ClassVar[bool] = True

    def __init__(self, n_items: int, n_users: int = 0, max_len: int = 50, hidden: int = 64,
                 n_layers: int = 2, n_heads: int = 2, inner: int = 256, dropout: float = 0.2,
                 attn_dropout: float = 0.2, mask_prob: float = 0.2, last_mask_rate: float = 0.0,
                 loss_type: Literal["ce", "chunked", "sampled", "sampled_logq"] = "ce",
                 n_negatives: int = 256, lr: float = 1e-3,
                 weight_decay: float = 0.0, optimizer: Literal["adam", "adamw"] = "adam",
                 n_kv_heads: int | None = None, chunk_size: int = 8192,
                 sampler: Literal["uniform", "popularity"] = "uniform") -> None:
        super().__init__(n_items, n_users, lr, weight_decay, optimizer)
        if not 0.0 < mask_prob <= 1.0:
            raise ValueError(f"BERT4Rec: mask_prob={mask_prob}; it must be in (0, 1] (the paper uses 0.2).")
        if not 0.0 <= last_mask_rate <= 1.0:
            raise ValueError(f"BERT4Rec: last_mask_rate={last_mask_rate}; it must be in [0, 1].")
        self.save_hyperparameters()
        self.max_len = max_len
        self.mask_prob = mask_prob
        self.last_mask_rate = last_mask_rate
        self.loss_type = loss_type
        self.n_negatives = n_negatives
        self.next_item = NextItemLoss(n_items, loss_type, n_negatives, chunk_size, sampler)
        self.mask_token = n_items + 1
        self.item_emb = nn.Embedding(n_items + 2, hidden, padding_idx=0)
        self.pos_emb = nn.Embedding(max_len + 1, hidden)
        self.emb_drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(hidden, n_heads, inner, dropout, attn_dropout, n_kv_heads=n_kv_heads)
            for _ in range(n_layers))
        self.final_norm = nn.LayerNorm(hidden)
        self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.GELU(), nn.LayerNorm(hidden))
        self.out_bias = nn.Parameter(torch.zeros(n_items + 1))
        self.apply(init_transformer_weights)
        self._masked = 0  # masked positions of the last training batch (its loss terms, for DDP)

    # ----------------------------------------------------------- encoder
    def encode(self, items: Tensor) -> Tensor:
        """Hidden states ``[B, L, d]`` of left-padded sequences ``[B, L]`` that may hold ``[MASK]`` tokens."""
        items = items[:, -(self.max_len + 1):]
        return encode_sequence(self.item_emb(items), items, self.pos_emb, self.emb_drop, self.blocks,
                               self.final_norm, causal=False)

    def output_query(self, hidden: Tensor) -> Tensor:
        """Masked-LM head: hidden states ``[..., d]`` to queries ``[..., d + 1]`` (bias column 1)."""
        t = self.head(hidden)
        return torch.cat([t, torch.ones_like(t[..., :1])], dim=-1)

    # ----------------------------------------------------------- training
    @staticmethod
    def training_sequence(batch: dict[str, Tensor]) -> Tensor:
        """The items of each training window ``[B, L + 1]``, left-padded: its inputs and its latest target.

        A ``sequence`` batch holds ``input = items[s:e-1]`` and ``target = items[s+1:e]`` (targets of an
        overlapping window's context are 0), so the window ``items[s:e]`` is ``input`` plus the last target,
        which every window counts.
        """
        return torch.cat([batch["input"], batch["target"][:, -1:]], dim=1)

    def mask_items(self, seq: Tensor) -> tuple[Tensor, Tensor]:
        """Cloze masking of left-padded windows ``seq [B, L]``: ``(masked input, labels)``.

        ``labels`` holds the original item where the input is ``[MASK]`` and 0 elsewhere; padding is never
        masked. Draws from torch's global generator (seeded by ``seed_everything``).
        """
        real = seq > 0
        chosen = (torch.rand(seq.shape, device=seq.device) < self.mask_prob) & real
        missing = real.any(dim=1) & ~chosen.any(dim=1)
        if bool(missing.any()):  # at least one masked item per window, at a uniformly random real position
            pick = torch.rand(seq.shape, device=seq.device).masked_fill(~real, -1.0).argmax(dim=1)
            rows = missing.nonzero(as_tuple=True)[0]
            chosen[rows, pick[rows]] = True
        if self.last_mask_rate > 0:
            last_only = torch.rand(seq.shape[0], device=seq.device) < self.last_mask_rate
            chosen[last_only] = False
            chosen[last_only, -1] = real[last_only, -1]
        masked = seq.masked_fill(chosen, self.mask_token)
        labels = seq.masked_fill(~chosen, 0)
        return masked, labels

    def masked_loss(self, masked: Tensor, labels: Tensor) -> Tensor:
        """Cross-entropy over the catalogue at the positions where ``labels > 0``."""
        keep = labels > 0
        self._masked = int(keep.sum())
        query = self.output_query(self.encode(masked)[keep])
        return self.next_item(query, labels[keep], self.item_embeddings())

    def bind_data(self, train: Interactions) -> None:
        self.next_item.bind_counts(train.item_popularity())

    def loss(self, batch: dict[str, Tensor]) -> Tensor:
        masked, labels = self.mask_items(self.training_sequence(batch))
        return self.masked_loss(masked, labels)

    def loss_terms(self, batch: dict[str, Tensor]) -> int:
        """Masked positions of the batch :meth:`loss` just scored (the mask is drawn inside ``loss``)."""
        return self._masked

    # ---------------------------------------------------------- inference
    def query_embedding(self, batch: dict[str, Tensor]) -> Tensor:
        history = batch["history"][:, -self.max_len:]
        mask = torch.full_like(history[:, :1], self.mask_token)
        return self.output_query(self.encode(torch.cat([history, mask], dim=1))[:, -1])

    def item_embeddings(self) -> Tensor:
        """``[n_items + 1, d + 1]``: each item's input embedding and output bias (no ``[MASK]`` row)."""
        return torch.cat([self.item_emb.weight[: self.n_items + 1], self.out_bias[:, None]], dim=1)
