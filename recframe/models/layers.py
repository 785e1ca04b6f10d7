"""Layers shared by recframe's transformer models (one copy, not one per model).

``CausalSelfAttention`` exposes its heads through ``head_hook``: a callable
``hook(module, heads) -> heads`` applied to the per-head outputs ``[B, H, L, d_h]``
before they are merged, which is how callbacks read, scale or patch one head
without touching model internals.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def sequence_attention_mask(items: Tensor) -> Tensor:
    """Boolean ``[B, 1, L, L]`` mask: causal, padding keys hidden, self always visible.

    Keeping the diagonal visible means a padded query still has one key, so no
    softmax row is empty (no NaN), while real tokens never attend to padding.
    """
    L = items.shape[1]
    causal = torch.ones(L, L, dtype=torch.bool, device=items.device).tril()
    real_key = (items > 0)[:, None, None, :]
    eye = torch.eye(L, dtype=torch.bool, device=items.device)
    return (causal & real_key) | eye


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention over a sequence with a boolean mask."""

    def __init__(self, dim: int, n_heads: int, dropout: float) -> None:
        super().__init__()
        if dim % n_heads:
            raise ValueError(f"hidden size {dim} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.dropout = dropout
        self.head_hook: Callable[[nn.Module, Tensor], Tensor] | None = None

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        B, L, D = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.n_heads, D // self.n_heads).permute(2, 0, 3, 1, 4)
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                               dropout_p=self.dropout if self.training else 0.0)
        if self.head_hook is not None:
            heads = self.head_hook(self, heads)
        return self.out(heads.transpose(1, 2).reshape(B, L, D))


class TransformerBlock(nn.Module):
    """Pre-norm block: x + Attn(LN(x)), then x + FFN(LN(x)), with dropout on each branch."""

    def __init__(self, dim: int, n_heads: int, inner: int, dropout: float, attn_dropout: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, n_heads, attn_dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, inner), nn.GELU(), nn.Dropout(dropout), nn.Linear(inner, dim))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = x + self.drop(self.attn(self.norm1(x), mask))
        return x + self.drop(self.ffn(self.norm2(x)))
