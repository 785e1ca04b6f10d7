"""Semantic-ID backbones: a TIGER-style encoder–decoder and a decoder-only (GPT-style) stack.

Both read histories of item ids, turn every item into its L SID tokens, and
answer the one question generative scoring asks (:meth:`SIDBackbone.step`):
the next-code logits ``[B, N, V_m]`` for ``N`` code prefixes of length ``m``
per user, given that user's history (a context built once by
:meth:`SIDBackbone.context`). Training is teacher forcing on sliding windows
with every position a target (:meth:`SIDBackbone.loss`).

Shared choices (documented once here):

* token ids: ``1 + offset[l] + code`` with one embedding table over all levels
  (0 = padding, the last id = decoder start token); output logits of level
  ``l`` are tied to that level's rows of the table;
* positions: a learned embedding of the item's index in the left-padded window
  (as SASRec; the latest item is always at the same index) plus a learned
  level embedding; TrieRec (``trierec=True``) adds its trie-derived absolute
  encoding and its relative attention bias on top
  (:mod:`recframe.models.generative.trierec`);
* **TIGER encoder–decoder.** TIGER's encoder is bidirectional and it trains
  one (history, next item) pair per encoder pass. To train on every target of
  a window in one pass (the "all targets" protocol every model here uses) the
  encoder is *item-causal*: a token of history item ``i`` sees the tokens of
  items ``≤ i``, and the decoder row for target ``t`` cross-attends to the
  memory of items ``≤ t``. Inference uses the same masks, so training and
  serving see the same function; at the last position the encoder sees the
  whole history, as TIGER's does;
* **decoder-only.** One causal stream of the window's item tokens, next-token
  loss on the tokens of every target item. Scoring caches each layer's
  history keys/values once per user and runs only the prefix tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from recframe.models.generative.attention import RowBlock
from recframe.models.generative.structure import (
    TokenNodes,
    item_token_nodes,
    prefix_token_nodes,
    subtree_sizes,
)
from recframe.models.generative.trierec import TrieAbsoluteEncoding, TrieRelativeBias, ancestor_mean


@dataclass
class Context:
    """Per-user state for :meth:`SIDBackbone.step`: encoder memory or cached history, and their nodes."""

    kv: list[
        tuple[Tensor, Tensor]
    ]  # per layer (memory for TIGER's cross-attention, history for decoder-only)
    mask: Tensor  # [B, 1, 1, 1, K] visible context tokens
    nodes: TokenNodes | None  # context token nodes (TrieRec bias against history, decoder-only)
    last: Tensor | None  # [B, D] final hidden state of the latest history token (decoder-only)


class PrefixSizes(nn.Module):
    """Subtree size of any valid code prefix, by binary search over mixed-radix prefix keys."""

    def __init__(self, codes: np.ndarray, codebook_sizes: tuple[int, ...]) -> None:
        super().__init__()
        self.radix = [int(v) for v in codebook_sizes]
        real = np.asarray(codes, dtype=np.int64)[1:]
        for level in range(len(self.radix)):
            keys = _prefix_keys(torch.tensor(real[:, : level + 1]), self.radix)
            uniq, counts = torch.unique(keys, return_counts=True)
            self.register_buffer(f"keys{level}", uniq, persistent=False)
            self.register_buffer(f"counts{level}", counts, persistent=False)

    def forward(self, prefix: Tensor) -> Tensor:
        """``[..., m]`` prefixes → ``[..., m]`` subtree sizes of the nodes ``prefix[..., :j+1]``."""
        out = torch.zeros_like(prefix)
        for j in range(prefix.shape[-1]):
            keys = _prefix_keys(prefix[..., : j + 1], self.radix)
            table, counts = getattr(self, f"keys{j}"), getattr(self, f"counts{j}")
            pos = torch.searchsorted(table, keys).clamp(max=len(table) - 1)
            out[..., j] = torch.where(table[pos] == keys, counts[pos], torch.zeros_like(keys))
        return out


def _prefix_keys(prefix: Tensor, radix: list[int]) -> Tensor:
    key = torch.zeros(prefix.shape[:-1], dtype=torch.long, device=prefix.device)
    for j in range(prefix.shape[-1]):
        key = key * radix[j] + prefix[..., j]
    return key


class SIDBackbone(nn.Module):
    """Token embeddings, positions, TrieRec encodings and the tied per-level output of both backbones.

    Args:
        codes: ``[n_items + 1, L]`` SID table (row 0 padding).
        codebook_sizes: vocabulary size per level.
        dim, n_layers, n_heads, inner, dropout: transformer sizes.
        window: history items per window (``max_len``).
        trierec: add TrieRec's absolute and relative encodings.
    """

    def __init__(
        self,
        codes: np.ndarray,
        codebook_sizes: tuple[int, ...],
        dim: int,
        n_layers: int,
        n_heads: int,
        inner: int,
        dropout: float,
        window: int,
        trierec: bool,
    ) -> None:
        super().__init__()
        codes = np.asarray(codes, dtype=np.int64)
        self.L = codes.shape[1]
        self.n_items = codes.shape[0] - 1
        self.window = window
        self.trierec = trierec
        self.codebook_sizes = tuple(int(v) for v in codebook_sizes)
        offsets = np.concatenate([[0], np.cumsum(self.codebook_sizes)[:-1]])
        self.register_buffer("codes", torch.tensor(codes))
        self.register_buffer("offsets", torch.from_numpy(offsets.astype(np.int64)))
        self.register_buffer("sizes", torch.from_numpy(subtree_sizes(codes)))
        self.prefix_sizes = PrefixSizes(codes, self.codebook_sizes)
        self.bos = 1 + int(sum(self.codebook_sizes))
        self.tok = nn.Embedding(self.bos + 1, dim, padding_idx=0)
        nn.init.normal_(self.tok.weight, std=0.02)
        self.pos = nn.Embedding(window + 1, dim)
        self.level = nn.Embedding(self.L + 1, dim)
        self.drop = nn.Dropout(dropout)
        self.final_norm = nn.LayerNorm(dim)
        self.n_heads = n_heads
        if trierec:
            self.abs_enc = TrieAbsoluteEncoding(self.L, dim, self.n_items)
            self.rel_bias = TrieRelativeBias(self.L, n_heads)

    # ------------------------------------------------------------ tokens
    def token_ids(self, codes: Tensor) -> Tensor:
        """``[..., l]`` codes of levels ``0..l-1`` → token ids."""
        return 1 + self.offsets[: codes.shape[-1]] + codes

    def embed_items(self, items: Tensor, positions: Tensor) -> tuple[Tensor, TokenNodes]:
        """``[B, W]`` items at window ``positions`` → ``[B, W*L, D]`` token inputs and their nodes."""
        B, W = items.shape
        ids = self.token_ids(self.codes[items]) * (items > 0)[..., None]  # [B, W, L]
        emb = self.tok(ids)
        x = emb + self.pos(positions)[:, :, None, :] + self.level.weight[1:][None, None]
        nodes = item_token_nodes(items, self.codes, self.sizes)
        if self.trierec:
            x = x + self.abs_enc(_unflatten(nodes, B, W, self.L), ancestor_mean(emb))
        return x.reshape(B, W * self.L, -1), nodes

    def embed_prefix(self, prefix: Tensor, *, start: bool, position: int | None) -> tuple[Tensor, TokenNodes]:
        """Decoder tokens for code prefixes ``[B, N, m]``: ``[start, c_1..c_m]`` or ``[c_1..c_m]``.

        Returns ``[B, N, q, D]`` inputs and nodes flattened to ``[B * N, q]``.
        """
        B, N, m = prefix.shape
        flat = prefix.reshape(B * N, m)
        emb = self.tok(self.token_ids(flat))  # [BN, m, D]
        depth = torch.arange(1, m + 1, device=prefix.device)
        x = emb + self.level(depth)[None]
        nodes = prefix_token_nodes(flat, self.n_items, self.prefix_sizes(flat), occurrence=self.window + 1)
        if self.trierec:
            tail = nodes.tokens(slice(1, None))
            x = x + self.abs_enc(tail, ancestor_mean(emb[:, None])[:, 0])
        if position is not None:
            x = x + self.pos.weight[position]
        if start:
            first = self.tok.weight[self.bos] + self.level.weight[0]
            if self.trierec:
                root = nodes.tokens(slice(None, 1))
                first = first + self.abs_enc(root, emb.new_zeros(B * N, 1, emb.shape[-1]))
            else:
                first = first.expand(B * N, 1, -1)
            x = torch.cat([first, x], 1)
        else:
            nodes = nodes.tokens(slice(1, None))
        return x.reshape(B, N, x.shape[1], -1), nodes

    def level_logits(self, h: Tensor, level: int) -> Tensor:
        """Tied output: ``[..., D]`` hidden → ``[..., V_level]`` logits for codes of ``level``."""
        start = 1 + int(self.offsets[level])
        table = self.tok.weight[start : start + self.codebook_sizes[level]]
        return self.final_norm(h) @ table.T

    def self_bias(self, query: TokenNodes, key: TokenNodes, B: int, N: int) -> Tensor | None:
        """TrieRec bias ``[B, N, H, q, k]`` between token sets flattened as ``[B * N, .]`` (or None)."""
        if not self.trierec:
            return None
        bias = self.rel_bias(query, key)  # [BN, H, q, k]
        return bias.reshape(B, N, *bias.shape[1:])

    def pad_window(self, history: Tensor) -> Tensor:
        """Left-pad (or cut) a history ``[B, w]`` to exactly ``window`` items."""
        w = history.shape[1]
        if w >= self.window:
            return history[:, w - self.window :]
        return F.pad(history, (self.window - w, 0))


def _unflatten(nodes: TokenNodes, B: int, W: int, L: int) -> TokenNodes:
    return TokenNodes(
        nodes.path.view(B, W, L, -1),
        nodes.depth.view(B, W, L),
        nodes.occurrence.view(B, W, L),
        nodes.subtree.view(B, W, L),
        nodes.valid.view(B, W, L),
    )


def _causal(q: int, device: torch.device) -> Tensor:
    return torch.ones(q, q, dtype=torch.bool, device=device).tril()


class TigerBackbone(SIDBackbone):
    """TIGER-style encoder–decoder (item-causal encoder, see module docstring)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        dim, n_heads = self.tok.embedding_dim, self.n_heads
        inner, dropout, n_layers = kwargs["inner"], kwargs["dropout"], kwargs["n_layers"]
        self.encoder = nn.ModuleList(RowBlock(dim, n_heads, inner, dropout) for _ in range(n_layers))
        self.decoder = nn.ModuleList(
            RowBlock(dim, n_heads, inner, dropout, cross=True) for _ in range(n_layers)
        )
        self.enc_norm = nn.LayerNorm(dim)

    def _encode(self, items: Tensor) -> tuple[Tensor, Tensor, TokenNodes]:
        B, W = items.shape
        positions = torch.arange(W, device=items.device)[None].expand(B, W)
        x, nodes = self.embed_items(items, positions)
        item_of = torch.arange(W * self.L, device=items.device) // self.L
        valid = nodes.valid
        mask = (item_of[None, :] <= item_of[:, None])[None] & valid[:, None, :]
        mask = mask | torch.eye(W * self.L, dtype=torch.bool, device=items.device)[None]
        x = self.drop(x)[:, None]
        bias = self.self_bias(nodes, nodes, B, 1)
        for block in self.encoder:
            x = block(x, self_mask=mask[:, None, None], self_bias=bias)
        return self.enc_norm(x[:, 0]), valid, nodes

    def context(self, history: Tensor) -> Context:
        memory, valid, _ = self._encode(self.pad_window(history))
        kv = [block.cross.context_kv(memory) for block in self.decoder]
        return Context(kv=kv, mask=valid[:, None, None, None, :], nodes=None, last=None)

    def _decode(self, x: Tensor, nodes: TokenNodes, ctx: Context, mask: Tensor) -> Tensor:
        B, N, q, _ = x.shape
        bias = self.self_bias(nodes, nodes, B, N)
        self_mask = _causal(q, x.device)
        x = self.drop(x)
        for block, kv in zip(self.decoder, ctx.kv):
            x = block(x, self_mask=self_mask, self_bias=bias, memory_kv=kv, memory_mask=mask)
        return x

    def step(self, ctx: Context, prefix: Tensor) -> Tensor:
        """Next-code logits ``[B, N, V_m]`` for prefixes ``[B, N, m]``."""
        x, nodes = self.embed_prefix(prefix, start=True, position=None)
        h = self._decode(x, nodes, ctx, ctx.mask)
        return self.level_logits(h[:, :, -1], prefix.shape[-1])

    def loss(self, inputs: Tensor, targets: Tensor) -> Tensor:
        """Teacher-forced CE over every code of every target of windows ``inputs``/``targets`` ``[B, W]``."""
        memory, valid, _ = self._encode(inputs)
        B, W = inputs.shape
        kv = [block.cross.context_kv(memory) for block in self.decoder]
        item_of = torch.arange(W * self.L, device=inputs.device) // self.L
        sees = item_of[None, :] <= torch.arange(W, device=inputs.device)[:, None]  # [W(target), K]
        mask = (sees[None] & valid[:, None, :])[:, :, None, None, :]  # [B, W, 1, 1, K]
        codes = self.codes[targets]  # [B, W, L]
        x, nodes = self.embed_prefix(codes[..., :-1], start=True, position=None)
        ctx = Context(kv=kv, mask=mask, nodes=None, last=None)
        h = self._decode(x, nodes, ctx, mask)  # [B, W, L, D]
        keep = targets > 0
        return _level_ce(self, h[keep], codes[keep])


class DecoderBackbone(SIDBackbone):
    """Decoder-only (GPT-style) stack over the window's SID token stream."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        dim, n_heads = self.tok.embedding_dim, self.n_heads
        inner, dropout, n_layers = kwargs["inner"], kwargs["dropout"], kwargs["n_layers"]
        self.blocks = nn.ModuleList(
            RowBlock(dim, n_heads, inner, dropout, self_sees_context=True) for _ in range(n_layers)
        )

    def _stream(self, items: Tensor) -> tuple[Tensor, TokenNodes, Tensor, list[Tensor]]:
        B, W = items.shape
        positions = torch.arange(W, device=items.device)[None].expand(B, W)
        x, nodes = self.embed_items(items, positions)
        S = x.shape[1]
        mask = (_causal(S, items.device)[None] & nodes.valid[:, None, :]) | torch.eye(
            S, dtype=torch.bool, device=items.device
        )[None]
        bias = self.self_bias(nodes, nodes, B, 1)
        x = self.drop(x)[:, None]
        inputs = []
        for block in self.blocks:
            inputs.append(x[:, 0])
            x = block(x, self_mask=mask[:, None, None], self_bias=bias)
        return x[:, 0], nodes, mask, inputs

    def context(self, history: Tensor) -> Context:
        items = self.pad_window(history)
        h, nodes, _, inputs = self._stream(items)
        kv = [block.attn.context_kv(block.norm1(x)) for block, x in zip(self.blocks, inputs)]
        return Context(kv=kv, mask=nodes.valid[:, None, None, None, :], nodes=nodes, last=h[:, -1])

    def step(self, ctx: Context, prefix: Tensor) -> Tensor:
        B, N, m = prefix.shape
        if m == 0:
            return self.level_logits(ctx.last, 0)[:, None].expand(B, N, -1)
        x, nodes = self.embed_prefix(prefix, start=False, position=self.window)
        self_bias = self.self_bias(nodes, nodes, B, N)
        past_bias = None
        if self.trierec:
            flat = TokenNodes(
                nodes.path.reshape(B, N * m, -1),
                nodes.depth.reshape(B, N * m),
                nodes.occurrence.reshape(B, N * m),
                nodes.subtree.reshape(B, N * m),
                nodes.valid.reshape(B, N * m),
            )
            past_bias = self.rel_bias(flat, ctx.nodes).reshape(B, -1, N, m, ctx.nodes.depth.shape[1])
            past_bias = past_bias.permute(0, 2, 1, 3, 4)
        x = self.drop(x)
        causal = _causal(m, x.device)
        for block, kv in zip(self.blocks, ctx.kv):
            x = block(
                x, self_mask=causal, self_bias=self_bias, past_kv=kv, past_mask=ctx.mask, past_bias=past_bias
            )
        return self.level_logits(x[:, :, -1], m)

    def loss(self, inputs: Tensor, targets: Tensor) -> Tensor:
        """Next-token CE on the tokens of every target item of the window."""
        window = torch.cat([inputs, targets[:, -1:]], 1)  # the W + 1 items of the window
        h, _, _, _ = self._stream(window)
        B = window.shape[0]
        h = h.view(B, window.shape[1], self.L, -1)
        # predictor of target item w (window position w + 1): the last token of item w for level 0,
        # then the item's own tokens for levels 1..L-1
        pred = torch.cat([h[:, :-1, -1:], h[:, 1:, :-1]], 2)  # [B, W, L, D]
        keep = targets > 0
        return _level_ce(self, pred[keep], self.codes[targets][keep])


def _level_ce(backbone: SIDBackbone, h: Tensor, codes: Tensor) -> Tensor:
    """Mean CE over levels and targets: ``h`` ``[R, L, D]`` predicts ``codes`` ``[R, L]``."""
    losses = [
        F.cross_entropy(backbone.level_logits(h[:, level], level), codes[:, level], reduction="sum")
        for level in range(backbone.L)
    ]
    return torch.stack(losses).sum() / max(codes.numel(), 1)
