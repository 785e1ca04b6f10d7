"""Attention for semantic-ID backbones: many short query rows per user against one shared context.

Generative scoring asks the same question for many code prefixes of one user
(every trie node of a level, or every beam): "given this user's history and this
prefix, what is the next code?". The tensors are therefore shaped
``[B, N, q, D]``: ``B`` users, ``N`` rows (prefixes / targets) per user, ``q``
tokens per row. Each row attends causally to its own tokens and, optionally, to
a per-user context (the encoder memory, or the cached history of a decoder-only
model) that is shared by the user's ``N`` rows and never copied ``N`` times:
the context scores are one matmul of the user's rows, side by side, against its ``[B, K, D]`` keys.

Heads are reached through the head probe (:mod:`recframe.heads`), which presents the
per-head outputs ``[B, N, H, q, d_h]`` as ``[B * N, H, q, d_h]``; its internal hook point
``head_hook`` (``hook(module, heads) -> heads``) is set only by the probe.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from recframe.models.layers import trailing_windows


class RowAttention(nn.Module):
    """Multi-head attention of ``[B, N, q]`` query rows over their own tokens plus a shared context.

    Args:
        dim: model width.
        n_heads: attention heads.
        dropout: dropout on attention probabilities (training only).
        attend_self: whether rows attend to their own tokens (self-attention).
        attend_context: whether rows may attend to a per-user context (cross-attention, or a
            decoder-only model's cached history; optional when ``attend_self``).
    """

    def __init__(
        self,
        dim: int,
        n_heads: int,
        dropout: float,
        *,
        attend_self: bool = True,
        attend_context: bool = False,
    ) -> None:
        super().__init__()
        if dim % n_heads:
            raise ValueError(f"hidden size {dim} is not divisible by n_heads={n_heads}")
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.attend_self, self.attend_context = attend_self, attend_context
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(dim, dim)
        self.dropout = dropout
        self.head_hook: Callable[[nn.Module, Tensor], Tensor] | None = None  # set only by recframe.heads

    def context_kv(self, context: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values ``[B, K, H, d_h]`` of a context ``[B, K, D]`` (cache them across calls)."""
        B, K, _ = context.shape
        kv = self.kv(context).view(B, K, 2, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4).contiguous()
        k, v = kv.transpose(2, 3).unbind(0)  # stored heads-first ([B, H, K, d_h]), as the matmuls read it
        return k, v

    def forward(
        self,
        x: Tensor,
        *,
        self_mask: Tensor | None = None,
        self_bias: Tensor | None = None,
        context_kv: tuple[Tensor, Tensor] | None = None,
        context_mask: Tensor | None = None,
        context_bias: Tensor | None = None,
    ) -> Tensor:
        """Attend and project back.

        Args:
            x: ``[B, N, q, D]`` query rows.
            self_mask: bool, broadcastable to ``[B, N, 1, q, q]`` (True = visible).
            self_bias: float, broadcastable to ``[B, N, H, q, q]``.
            context_kv: from :meth:`context_kv`.
            context_mask: bool, broadcastable to ``[B, N, 1, q, K]``.
            context_bias: float, broadcastable to ``[B, N, H, q, K]``.
        """
        B, N, q, D = x.shape
        merged = self._attend(self.q(x), self.kv(x) if self.attend_self else None, self_mask=self_mask,
                              self_bias=self_bias, context_kv=context_kv, context_mask=context_mask,
                              context_bias=context_bias)
        return self.out(merged)

    def forward_packed(self, x: Tensor, keep: Tensor, *, self_mask: Tensor | None = None,
                       self_bias: Tensor | None = None) -> Tensor:
        """Self-attention of the tokens ``keep`` marks, given packed: ``x`` is ``[P, D]``, the rows of a
        ``[B, N, q]`` layout where ``keep`` (bool ``[B, N, q]``, ``P`` of them True) holds. Returns
        ``[P, D]``.

        The projections run on the ``P`` tokens only; the scores run in the ``[B, N, q]`` layout, where the
        other tokens have zero queries, keys and values. For every kept token this is :meth:`forward`'s
        function as long as ``self_mask`` hides the other tokens from it (they are padding): its keys and
        values are the same, and the dropped tokens' outputs are not returned.
        """
        B, N, q = keep.shape
        D = x.shape[-1]
        Q = x.new_zeros(B, N, q, D).index_put((keep,), self.q(x))
        kv = x.new_zeros(B, N, q, 2 * D).index_put((keep,), self.kv(x))
        # one row per user (an encoder's stream): each group of rows attends over its trailing window only
        groups = trailing_windows(keep[:, 0]) if N == 1 and self.head_hook is None else None
        if groups is None:
            return self.out(self._attend(Q, kv, self_mask=self_mask, self_bias=self_bias)[keep])
        heads = Q.new_zeros(B, N, q, D)
        for rows, start in groups:
            heads[rows, :, start:] = self._attend(Q[rows, :, start:], kv[rows, :, start:],
                                                  self_mask=_window(self_mask, rows, start),
                                                  self_bias=_window(self_bias, rows, start))
        return self.out(heads[keep])

    def _attend(self, queries: Tensor, self_kv: Tensor | None, *, self_mask: Tensor | None = None,
                self_bias: Tensor | None = None, context_kv: tuple[Tensor, Tensor] | None = None,
                context_mask: Tensor | None = None, context_bias: Tensor | None = None) -> Tensor:
        """Heads merged back to ``[B, N, q, D]`` (before the output projection) from projected queries
        ``[B, N, q, D]`` and, when the rows attend to themselves, their projected keys/values
        ``[B, N, q, 2D]``."""
        B, N, q, D = queries.shape
        H, dh = self.n_heads, self.head_dim
        Q = (queries.view(B, N, q, H, dh) / dh**0.5).transpose(2, 3)  # [B, N, H, q, dh]
        logits, values = [], []
        if self_kv is not None:
            k, v = self_kv.view(B, N, q, 2, H, dh).unbind(3)
            s = Q @ k.permute(0, 1, 3, 4, 2)  # [B, N, H, q, q]
            if self_bias is not None:
                s = s + self_bias
            if self_mask is not None:
                s = s.masked_fill(~self_mask, float("-inf"))
            logits.append(s)
            values.append(v.transpose(2, 3))  # [B, N, H, q, dh]
        if self.attend_context and context_kv is None and not self.attend_self:
            raise ValueError("a cross-attention needs context_kv (the encoder memory)")
        if self.attend_context and context_kv is not None:
            ck, cv = context_kv  # [B, K, H, dh]: one per user, shared by its N rows (never copied N times)
            s = _rows_of(_folded(Q) @ ck.permute(0, 2, 3, 1), N)  # [B, N, H, q, K]
            if context_bias is not None:
                s = s + context_bias
            if context_mask is not None:
                s = s.masked_fill(~context_mask, float("-inf"))
            logits.append(s)
            values.append(cv.transpose(1, 2))  # [B, H, K, dh]
        probs = torch.softmax(torch.cat(logits, -1), dim=-1).nan_to_num(0.0)
        if self.dropout > 0:
            probs = F.dropout(probs, self.dropout, self.training)
        heads, start = 0, 0
        for v, s in zip(values, logits):
            width = s.shape[-1]
            p = probs[..., start : start + width]
            start += width
            heads = heads + (p @ v if v.dim() == 5 else _rows_of(_folded(p) @ v, N))  # [B, N, H, q, dh]
        if self.head_hook is not None:
            heads = self.head_hook(self, heads)
        return heads.permute(0, 1, 3, 2, 4).reshape(B, N, q, D)


def _window(pairs: Tensor | None, rows: Tensor, start: int) -> Tensor | None:
    """``[B or 1, ..., q, q]`` masks or biases of ``rows``, on their trailing window ``[start:]``."""
    if pairs is None:
        return None
    if pairs.shape[0] > 1:
        pairs = pairs[rows]
    return pairs[..., start:, start:]


def _folded(rows: Tensor) -> Tensor:
    """``[B, N, H, q, X]`` → ``[B, H, N * q, X]``: a user's rows side by side, for one matmul against its
    shared context (``[B, H, ., .]``); :func:`_rows_of` undoes it."""
    B, N, H, q, X = rows.shape
    return rows.transpose(1, 2).reshape(B, H, N * q, X)


def _rows_of(folded: Tensor, n_rows: int) -> Tensor:
    """``[B, H, N * q, X]`` → ``[B, N, H, q, X]`` (the inverse of :func:`_folded`)."""
    B, H, Nq, X = folded.shape
    return folded.view(B, H, n_rows, Nq // n_rows, X).transpose(1, 2)


class RowBlock(nn.Module):
    """Pre-norm transformer block on ``[B, N, q, D]`` rows: self-attention, optional cross-attention, FFN."""

    def __init__(
        self,
        dim: int,
        n_heads: int,
        inner: int,
        dropout: float,
        *,
        cross: bool = False,
        self_sees_context: bool = False,
        attn_dropout: float | None = None,
    ) -> None:
        super().__init__()
        attn_dropout = dropout if attn_dropout is None else attn_dropout
        self.norm1 = nn.LayerNorm(dim)
        self.attn = RowAttention(dim, n_heads, attn_dropout, attend_self=True,
                                 attend_context=self_sees_context)
        self.cross = None
        if cross:
            self.norm_c = nn.LayerNorm(dim)
            self.cross = RowAttention(dim, n_heads, attn_dropout, attend_self=False, attend_context=True)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, inner), nn.GELU(), nn.Dropout(dropout), nn.Linear(inner, dim))
        self.drop = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        *,
        self_mask: Tensor | None = None,
        self_bias: Tensor | None = None,
        past_kv: tuple[Tensor, Tensor] | None = None,
        past_mask: Tensor | None = None,
        past_bias: Tensor | None = None,
        memory_kv: tuple[Tensor, Tensor] | None = None,
        memory_mask: Tensor | None = None,
    ) -> Tensor:
        """``past_*``: cached history the self-attention also sees (decoder-only continuation);
        ``memory_*``: encoder memory for the cross-attention (encoder–decoder)."""
        x = x + self.drop(
            self.attn(
                self.norm1(x),
                self_mask=self_mask,
                self_bias=self_bias,
                context_kv=past_kv,
                context_mask=past_mask,
                context_bias=past_bias,
            )
        )
        if self.cross is not None:
            x = x + self.drop(self.cross(self.norm_c(x), context_kv=memory_kv, context_mask=memory_mask))
        return x + self.drop(self.ffn(self.norm2(x)))

    def forward_packed(self, x: Tensor, keep: Tensor, *, self_mask: Tensor | None = None,
                       self_bias: Tensor | None = None) -> Tensor:
        """:meth:`forward` of a self-attention-only block on packed tokens: ``x`` ``[P, D]`` are the tokens
        ``keep`` (bool ``[B, N, q]``) marks, and ``self_mask`` must hide the others from them (padding).

        Every token-wise layer (norms, projections, FFN, dropout) runs on the ``P`` tokens only, so a batch
        that is mostly padding (Amazon's 5-core histories fill ~13 % of a 50-item window) costs in proportion
        to its real tokens. The kept tokens get :meth:`forward`'s function; dropout draws fewer masks, so a
        training run's random stream differs from the unpacked one.
        """
        if self.cross is not None:
            raise ValueError("forward_packed runs blocks without cross-attention (an encoder's, or a "
                             "decoder-only stream's)")
        x = x + self.drop(self.attn.forward_packed(self.norm1(x), keep, self_mask=self_mask,
                                                   self_bias=self_bias))
        return x + self.drop(self.ffn(self.norm2(x)))
