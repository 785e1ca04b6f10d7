"""Layers shared by recframe's transformer models (one copy, not one per model).

``CausalSelfAttention`` exposes its heads to the head probe (:mod:`recframe.heads`):
its internal hook point ``head_hook`` (``hook(module, heads) -> heads`` on the per-head
outputs ``[B, H, L, d_h]`` before they are merged) is set only by the probe, which is
how any code reads, scales or patches one head. ``n_kv_heads`` (optional) turns it into
grouped-query attention; the default keeps ordinary multi-head attention with the
same parameters as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def sequence_attention_mask(items: Tensor, causal: bool = True) -> Tensor:
    """Boolean ``[B, 1, L, L]`` mask: causal (by default), padding keys hidden, self always visible.

    Keeping the diagonal visible means a padded query still has one key, so no
    softmax row is empty (no NaN), while real tokens never attend to padding.
    ``causal=False`` is the bidirectional mask of BERT-style encoders (BERT4Rec).
    """
    L = items.shape[1]
    real_key = (items > 0)[:, None, None, :]
    eye = torch.eye(L, dtype=torch.bool, device=items.device)
    if not causal:
        return real_key | eye
    lower = torch.ones(L, L, dtype=torch.bool, device=items.device).tril()
    return (lower & real_key) | eye


def encode_sequence(x: Tensor, items: Tensor, pos_emb: nn.Embedding, drop: nn.Module,
                    blocks: Iterable[nn.Module], norm: nn.Module, causal: bool = True,
                    packed: bool | None = None) -> Tensor:
    """The sequence encoder of SASRec-style models: ``norm(blocks(drop(x + positions)))``.

    ``x`` ``[B, W, d]`` are the inputs of the left-padded ``items`` ``[B, W]``; positions count from the end
    of ``pos_emb``'s window (the latest item always has the last position), so ``W`` may be shorter than
    the window. Padding keys are hidden by :func:`sequence_attention_mask`; ``causal=False`` lets every
    position attend to the whole sequence (BERT4Rec). A mostly padded batch runs packed
    (``packed=None``, see :func:`packed_tokens`; :meth:`TransformerBlock.forward_packed`): the same function
    on the real tokens and the last position, zeros at the other padding (which no loss or score reads).
    """
    n_pos, W = pos_emb.num_embeddings, items.shape[1]
    pos = torch.arange(n_pos - W, n_pos, device=items.device)
    x = x + pos_emb(pos)[None]
    mask = sequence_attention_mask(items, causal)
    keep = packed_tokens(items > 0, packed)
    if keep is None:
        x = drop(x)
        for block in blocks:
            x = block(x, mask)
        return norm(x)
    real = drop(x[keep])
    for block in blocks:
        real = block.forward_packed(real, keep, mask)
    return x.new_zeros(x.shape).index_put((keep,), norm(real))


_PINNED_PACKING: list[bool | None] = [None]


@contextmanager
def pinned_packing(packed: bool | None) -> Iterator[None]:
    """Inside the block, every encoder that is not told its layout (``packed=None``) runs packed (True) or
    dense (False); ``None`` keeps the automatic rule of :func:`packed_tokens`. For benchmarks that time both
    layouts (``benchmarks/generative_train_step.py``) and tests; models never set it."""
    before = _PINNED_PACKING[0]
    _PINNED_PACKING[0] = packed
    try:
        yield
    finally:
        _PINNED_PACKING[0] = before


def packed_tokens(valid: Tensor, packed: bool | None = None) -> Tensor | None:
    """The tokens a packed encoder runs (``valid`` ``[B, L]``, real tokens, plus every row's last position),
    or ``None`` for the dense layout.

    ``packed=None`` (default) takes the layout :func:`pinned_packing` pins, and otherwise packs when at least
    half of the tokens are padding (Amazon's 5-core histories fill ~13 % of a 50-item window; ML-100K's fill
    70-83 % of theirs and stay dense). The last position is always kept so that a row with no real token
    still gets the dense encoder's output there (its padding token attending to itself), which is what a
    model reads as the sequence's state. Every other padding token is dropped: no kept token attends to it
    (:func:`sequence_attention_mask`), and its output is zero instead of a value nothing reads.
    """
    if packed is None:
        packed = _PINNED_PACKING[0]
    if packed is None:
        packed = 2 * int(valid.sum()) <= valid.numel()
    if not packed:
        return None
    keep = valid.clone()
    keep[:, -1] = True
    return keep


def trailing_windows(keep: Tensor, max_groups: int = 3) -> list[tuple[Tensor, int]] | None:
    """Rows of a packed ``[B, S]`` layout (``keep``: the kept tokens) grouped so that each group's attention
    can run on its trailing positions ``[start:]`` only, or ``None`` when the full width is as cheap.

    A row's kept tokens are its real items (at the end of a left-padded window) and its last position, so
    every position before its first kept token is padding that no kept token sees. Rows are sorted by that
    span and cut into at most ``max_groups`` groups minimising ``sum(rows x span^2)`` (the score matrix's
    size) plus a fixed cost per group; each group is ``(row indices, start)`` with ``start`` at most every
    one of its rows' first kept position. On Amazon's short histories (median 6 items in a 50-item window)
    most rows fall into a group a few positions wide. The kept tokens' attention is the same function (the
    dropped keys were masked), so callers use it only where the mask hides the padding.
    """
    B, S = keep.shape
    if B < 2 or S < 8:
        return None
    first = torch.where(keep.any(1), keep.to(torch.int8).argmax(1), torch.full_like(keep[:, 0], S - 1,
                                                                                      dtype=torch.long))
    span = S - first
    order = torch.argsort(span, stable=True)
    sq = span[order].double() ** 2  # ascending
    overhead = float(S * S * 4)  # about four full-width rows: the cost of one more group's kernels
    ends = torch.arange(B + 1, dtype=torch.float64)
    # groups [0, i), [i, j), [j, B) of the sorted rows; an empty group costs nothing
    last = torch.cat([sq.new_zeros(1), sq])  # last[k]: the widest span of the first k rows
    c1 = ends * last + overhead * (ends > 0)
    width = last[None, :].expand(B + 1, B + 1)
    c2 = (ends[None, :] - ends[:, None]).clamp(min=0) * width + overhead * (ends[None, :] > ends[:, None])
    c3 = (B - ends) * sq[-1] + overhead * (ends < B)
    total = c1[:, None] + c2 + c3[None, :]
    total = total.masked_fill(ends[None, :] < ends[:, None], float("inf"))
    if max_groups < 3:
        total[1:, :] = float("inf")  # only [0, 0): one cut
    if max_groups < 2:
        total[:, :-1] = float("inf")
    best = int(total.argmin())
    i, j = divmod(best, B + 1)
    groups = []
    for lo, hi in ((0, i), (i, j), (j, B)):
        if hi > lo:
            groups.append((order[lo:hi], S - int(span[order[hi - 1]])))
    if len(groups) == 1 and groups[0][1] == 0:
        return None
    return groups


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention over a sequence with a boolean mask; optionally grouped-query.

    Args:
        dim: model width (``head_dim = dim // n_heads``).
        n_heads: query heads.
        dropout: dropout on the attention probabilities (training only).
        n_kv_heads: key/value heads for grouped-query attention (GQA, Ainslie et al. 2023); it must divide
            ``n_heads``, and query head ``h`` reads key/value head ``h // (n_heads // n_kv_heads)`` (the
            grouping of Llama-style GQA). ``None`` (default) means ``n_heads``: ordinary multi-head attention;
            ``1`` is multi-query attention.

    The fused ``qkv`` projection has ``dim + 2 * n_kv_heads * head_dim`` outputs laid out
    ``[queries | keys | values]``, each block split into heads in order. With ``n_kv_heads == n_heads`` that
    is the ``3 * dim`` layer this class always had, so parameter names, shapes and old checkpoints are
    unchanged. The head probe (:mod:`recframe.heads`) sees the ``n_heads`` per-query-head outputs
    ``[B, H, L, d_h]`` in both cases.
    """

    def __init__(self, dim: int, n_heads: int, dropout: float, n_kv_heads: int | None = None) -> None:
        super().__init__()
        if dim % n_heads:
            raise ValueError(f"hidden size {dim} is not divisible by n_heads={n_heads}")
        n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        if isinstance(n_kv_heads, bool) or not isinstance(n_kv_heads, int) or n_kv_heads < 1 \
                or n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads!r} must be a positive integer dividing "
                             f"n_heads={n_heads} (or None for ordinary multi-head attention)")
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, dim // n_heads
        self.qkv = nn.Linear(dim, dim + 2 * n_kv_heads * self.head_dim)
        self.out = nn.Linear(dim, dim)
        self.dropout = dropout
        self.head_hook: Callable[[nn.Module, Tensor], Tensor] | None = None  # set only by recframe.heads

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        B, L, D = x.shape
        return self.out(self._heads(self.qkv(x), mask).transpose(1, 2).reshape(B, L, D))

    def forward_packed(self, x: Tensor, keep: Tensor, mask: Tensor) -> Tensor:
        """:meth:`forward` of the tokens ``keep`` (bool ``[B, L]``) marks, given packed as ``x`` ``[P, D]``;
        returns ``[P, D]``. The projections run on those tokens only; the attention runs in the ``[B, L]``
        layout, where the other tokens have zero queries, keys and values, which ``mask`` must hide from every
        kept token (padding). For the kept tokens it is :meth:`forward`'s function."""
        B, L = keep.shape
        qkv = self.qkv(x)
        dense = qkv.new_zeros(B, L, qkv.shape[-1]).index_put((keep,), qkv)
        return self.out(self._heads(dense, mask).transpose(1, 2)[keep].reshape(-1, x.shape[-1]))

    def _heads(self, qkv: Tensor, mask: Tensor) -> Tensor:
        """Per-head outputs ``[B, H, L, d_h]`` (after the head probe's hook) of projections ``[B, L, .]``."""
        B, L, _ = qkv.shape
        kv = self.n_kv_heads * self.head_dim
        q, k, v = qkv.split([self.n_heads * self.head_dim, kv, kv], dim=-1)
        q = q.view(B, L, self.n_heads, self.head_dim).transpose(1, 2)
        k, v = (t.view(B, L, self.n_kv_heads, self.head_dim).transpose(1, 2) for t in (k, v))
        if self.n_kv_heads != self.n_heads:  # each key/value head serves a group of consecutive query heads
            group = self.n_heads // self.n_kv_heads
            k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                               dropout_p=self.dropout if self.training else 0.0)
        if self.head_hook is not None:
            heads = self.head_hook(self, heads)
        return heads


class TransformerBlock(nn.Module):
    """Pre-norm block: x + Attn(LN(x)), then x + FFN(LN(x)), with dropout on each branch.

    ``n_kv_heads`` (optional) makes the attention grouped-query; see :class:`CausalSelfAttention`.
    """

    def __init__(self, dim: int, n_heads: int, inner: int, dropout: float, attn_dropout: float,
                 n_kv_heads: int | None = None) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, n_heads, attn_dropout, n_kv_heads=n_kv_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, inner), nn.GELU(), nn.Dropout(dropout), nn.Linear(inner, dim))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = x + self.drop(self.attn(self.norm1(x), mask))
        return x + self.drop(self.ffn(self.norm2(x)))

    def forward_packed(self, x: Tensor, keep: Tensor, mask: Tensor) -> Tensor:
        """:meth:`forward` on packed tokens: ``x`` ``[P, D]`` are the tokens ``keep`` (bool ``[B, L]``) marks,
        and ``mask`` must hide the others from them. Every token-wise layer (norms, projections, FFN,
        dropout) runs on the ``P`` tokens only; the kept tokens get :meth:`forward`'s function, while dropout
        draws fewer masks (a training run's random stream differs from the dense one)."""
        x = x + self.drop(self.attn.forward_packed(self.norm1(x), keep, mask))
        return x + self.drop(self.ffn(self.norm2(x)))


class CrossAttention(nn.Module):
    """Multi-head attention of a few query vectors over a padded key/value sequence.

    ``softmax(Q K^T / sqrt(d_h) + mask) V`` per head, then an output projection; ``Q = W_q q``,
    ``K = W_k x``, ``V = W_v x``. Used where a fixed set of queries reads a sequence, e.g. RecMem's
    memory slots reading a history segment. Keys with ``key_valid == False`` are hidden; a query whose
    keys are all hidden gets a zero output (not NaN).

    Args:
        dim: model width (``head_dim = dim // n_heads``).
        n_heads: attention heads.
        dropout: dropout on the attention probabilities (training only).
    """

    def __init__(self, dim: int, n_heads: int, dropout: float) -> None:
        super().__init__()
        if dim % n_heads:
            raise ValueError(f"hidden size {dim} is not divisible by n_heads={n_heads}")
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(dim, dim)
        self.dropout = dropout

    def forward(self, queries: Tensor, keys: Tensor, key_valid: Tensor) -> Tensor:
        """``queries [B, M, d]`` read ``keys [B, L, d]`` (``key_valid [B, L]`` bool) -> ``[B, M, d]``."""
        B, M, D = queries.shape
        L = keys.shape[1]
        q = self.q(queries).view(B, M, self.n_heads, self.head_dim).transpose(1, 2)
        k, v = (t.view(B, L, self.n_heads, self.head_dim).transpose(1, 2) for t in self.kv(keys).chunk(2, -1))
        any_key = key_valid.any(dim=1)
        mask = (key_valid | ~any_key[:, None])[:, None, None, :]  # empty rows: attend anywhere, zeroed below
        heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                               dropout_p=self.dropout if self.training else 0.0)
        out = self.out(heads.transpose(1, 2).reshape(B, M, D))
        return out * any_key[:, None, None].to(out.dtype)


def init_transformer_weights(module: nn.Module) -> None:
    """RecBole's/SASRec's init, applied with ``model.apply``: every ``Linear`` and ``Embedding`` weight
    N(0, 0.02), ``Linear`` biases 0, and an ``Embedding``'s padding row 0."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()
