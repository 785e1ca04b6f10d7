"""What the semantic-ID backbones share: tokens, positions, add-on dispatch and the tied per-level output.

The backbones themselves, each with its whole forward pass in one file, are
:mod:`recframe.models.generative.tiger` (TIGER-style encoder–decoder) and
:mod:`recframe.models.generative.decoder` (decoder-only, GPT-style). Both read
histories of item ids, turn every item into its L SID tokens, and answer the one
question generative scoring asks (``step``): the next-code logits ``[B, N, V_m]``
for ``N`` code prefixes of length ``m`` per user, given that user's history (a
context built once by ``context``); ``score_nodes`` answers it for trie nodes,
reusing the ancestors' keys/values. Training is teacher forcing on sliding
windows with every position a target (``loss``).

Shared choices (documented once here):

* token ids: ``1 + offset[l] + code`` with one embedding table over all levels
  (0 = padding, the last id = decoder start token); output logits of level
  ``l`` are tied to that level's rows of the table;
* history tokens (``history_tokens``): ``"codes"`` puts the ``L`` SID tokens of
  every history item in the sequence (TIGER's layout: ``W * L`` tokens);
  ``"items"`` puts one token per history item, the sum of its ``L`` code tokens'
  inputs (token + level embeddings + add-on encodings), with the item's leaf
  node standing for it in the add-ons' relative biases. ``"items"`` makes the
  history ``L`` times shorter, so self-attention over it costs ``L**2`` times
  less and every decoder row attends to ``L`` times fewer keys. That is what
  lets a 50-item history train to convergence on a CPU (one TIGER training step
  of 128 windows of 50 items: 10-16 s with ``"codes"``, see
  ``benchmarks/results/ml100k_generative.md``); the codes being generated are
  unchanged, and sequential recommenders (SASRec, and the semantic-ID inputs of
  e.g. Singh et al. 2024, "Better Generalization with Semantic IDs") pool an
  item's IDs into one input vector in the same way;
* positions: a learned embedding of the item's index in the left-padded window
  (as SASRec; the latest item is always at the same index) plus a learned
  level embedding; add-ons (:mod:`recframe.models.generative.addons`, e.g.
  TrieRec's trie-derived absolute encoding and relative attention bias) add
  their encodings, attention biases and logit adjustments on top.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from recframe.models.generative.addons import AuxLoss, GenerativeAddon
from recframe.models.generative.attention import RowBlock
from recframe.models.generative.structure import (
    TokenNodes,
    item_token_nodes,
    prefix_token_nodes,
    subtree_sizes,
)
from recframe.models.layers import packed_tokens


@dataclass
class Context:
    """Per-user state for :meth:`SIDBackbone.step`: encoder memory or cached history, and their nodes."""

    kv: list[
        tuple[Tensor, Tensor]
    ]  # per layer (memory for TIGER's cross-attention, history for decoder-only)
    mask: Tensor  # [B, 1, 1, 1, K] visible context tokens
    nodes: TokenNodes | None  # context token nodes (add-on biases against history, decoder-only)
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
    """Token embeddings, positions, add-on hooks and the tied per-level output of both backbones.

    Args:
        codes: ``[n_items + 1, L]`` SID table (row 0 padding).
        codebook_sizes: vocabulary size per level.
        dim, n_layers, n_heads, inner, dropout: transformer sizes.
        window: history items per window (``max_len``).
        history_tokens: ``"codes"`` (``L`` tokens per history item) or ``"items"`` (one pooled token per
            item); see the module docstring.
        attn_dropout: dropout on attention probabilities (default: ``dropout``). On a CPU, drawing its masks
            (one per attention-logit element) took most of a training step's time, so the tuned configs
            search it separately.
        normalize: ``"codebook"`` (each level's softmax over its whole codebook, TIGER's training) or
            ``"valid"`` (over the codes that continue a real path from the prefix: the trie's children), in
            the training loss (:meth:`level_ce`); scoring and beam search use the same (the model's
            ``normalize``).
        embedding_std: standard deviation of the position and level embeddings' normal init (``None``:
            torch's N(0, 1), the former init, kept so that old seeds reproduce). Token embeddings start at
            N(0, 0.02); at N(0, 1) the position and level vectors are ~50x larger, so the items' identity is
            ~2 % of every input after the first LayerNorm and the models learn it slowly (ML-100K: NDCG@10
            below Popularity after 6 epochs); 0.02 (GPT-2's choice for both tables) is what the configs use.
        addons: :class:`~recframe.models.generative.addons.GenerativeAddon` objects, built here (after the
            shared embeddings, before the subclass's layers) and kept as ``self.addons``.
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
        addons: Sequence[GenerativeAddon] = (),
        history_tokens: str = "codes",
        attn_dropout: float | None = None,
        embedding_std: float | None = None,
        normalize: str = "codebook",
    ) -> None:
        super().__init__()
        if history_tokens not in ("codes", "items"):
            raise ValueError(f"history_tokens must be 'codes' or 'items', got {history_tokens!r}")
        codes = np.asarray(codes, dtype=np.int64)
        self.L = codes.shape[1]
        self.history_tokens = history_tokens
        #: sequence tokens per history item (``L`` for ``"codes"``, 1 for ``"items"``)
        self.per_item = self.L if history_tokens == "codes" else 1
        self.n_items = codes.shape[0] - 1
        self.window = window
        self.dim, self.n_layers, self.inner, self.dropout = dim, n_layers, inner, dropout
        self.attn_dropout = dropout if attn_dropout is None else attn_dropout
        self.codebook_sizes = tuple(int(v) for v in codebook_sizes)
        offsets = np.concatenate([[0], np.cumsum(self.codebook_sizes)[:-1]])
        self.register_buffer("codes", torch.tensor(codes))
        self.register_buffer("offsets", torch.from_numpy(offsets.astype(np.int64)))
        self.register_buffer("sizes", torch.from_numpy(subtree_sizes(codes)))
        self.prefix_sizes = PrefixSizes(codes, self.codebook_sizes)
        if normalize not in ("codebook", "valid"):
            raise ValueError(f"normalize must be 'codebook' or 'valid', got {normalize!r}")
        self.normalize = normalize
        if normalize == "valid":  # derived from the codes, so not saved with a checkpoint
            for level, mask in enumerate(sibling_code_masks(codes, self.codebook_sizes)):
                self.register_buffer(f"sibling_codes{level}", torch.from_numpy(mask), persistent=False)
        self.bos = 1 + int(sum(self.codebook_sizes))
        self.tok = nn.Embedding(self.bos + 1, dim, padding_idx=0)
        nn.init.normal_(self.tok.weight, std=0.02)
        self.pos = nn.Embedding(window + 1, dim)
        self.level = nn.Embedding(self.L + 1, dim)
        if embedding_std is not None:  # GPT-2's init: positions like tokens, so neither drowns the other
            nn.init.normal_(self.pos.weight, std=embedding_std)
            nn.init.normal_(self.level.weight, std=embedding_std)
        self.drop = nn.Dropout(dropout)
        self.final_norm = nn.LayerNorm(dim)
        self.n_heads = n_heads
        for addon in addons:  # here, so that the add-ons' parameters come at a fixed point of the init order
            addon.build(self)
        self.addons = nn.ModuleList(addons)
        self._encoders = [a for a in addons if type(a).encode is not GenerativeAddon.encode]
        self._biases = [a for a in addons if type(a).attention_bias is not GenerativeAddon.attention_bias]
        self._adjusters = [a for a in addons if type(a).adjust_logits is not GenerativeAddon.adjust_logits]

    def block(self, **kwargs: Any) -> RowBlock:
        """A transformer block of this backbone's sizes (``kwargs``: ``RowBlock``'s role flags)."""
        return RowBlock(self.dim, self.n_heads, self.inner, self.dropout, attn_dropout=self.attn_dropout,
                        **kwargs)

    def run_stream(self, blocks: Iterable[RowBlock], x: Tensor, valid: Tensor, mask: Tensor,
                   bias: Tensor | None, *, packed: bool | None = None,
                   with_inputs: bool = False) -> tuple[Tensor, list[Tensor]]:
        """Run self-attention ``blocks`` over a token stream ``x`` ``[B, S, D]`` (input dropout included).

        ``valid`` ``[B, S]`` marks the real tokens, ``mask`` ``[B, S, S]`` (True = visible) must hide the
        padding from every real token, ``bias`` is the add-ons' ``[B, 1, H, S, S]`` self-attention bias.
        Returns the output ``[B, S, D]`` and, with ``with_inputs``, each block's input ``[B, S, D]`` (the
        first is the dropped-out ``x``; a decoder-only model caches their keys/values), else an empty list.

        ``packed=True`` runs every token-wise layer on the real tokens (and the last position) only
        (:meth:`RowBlock.forward_packed`, :func:`recframe.models.layers.packed_tokens`) and returns zeros at
        the other padding; ``False`` runs the dense layout. Both are the same function on the real tokens (a
        test checks values and gradients); dropout draws fewer masks when packed, so a training run's random
        stream differs. ``None`` (default) follows :func:`~recframe.models.layers.packed_tokens` (a pinned
        layout, else packed when at least half of the tokens are padding): Amazon's 5-core windows are ~13 %
        real, where a training step is 1.4-1.5x faster (``benchmarks/generative_train_step.py``);
        ML-100K's windows stay dense.
        """
        keep = packed_tokens(valid, packed)
        inputs: list[Tensor] = []
        self_mask = mask[:, None, None]
        if keep is None:
            h = self.drop(x)[:, None]
            for block in blocks:
                if with_inputs:
                    inputs.append(h[:, 0])
                h = block(h, self_mask=self_mask, self_bias=bias)
            return h[:, 0], inputs

        def dense(tokens: Tensor) -> Tensor:
            return x.new_zeros(x.shape).index_put((keep,), tokens)

        real = self.drop(x[keep])  # [P, D]
        for block in blocks:
            if with_inputs:  # scattered back only when a caller reads them
                inputs.append(dense(real))
            real = block.forward_packed(real, keep[:, None], self_mask=self_mask, self_bias=bias)
        return dense(real), inputs

    # ------------------------------------------------------------ add-on hooks
    def addon_encoding(self, nodes: TokenNodes, token_emb: Tensor) -> Tensor | None:
        """Sum of the add-ons' input encodings (:meth:`GenerativeAddon.encode`), or ``None``."""
        return _summed(addon.encode(nodes, token_emb) for addon in self._encoders)

    def attention_bias(self, query: TokenNodes, key: TokenNodes) -> Tensor | None:
        """Sum of the add-ons' self-attention biases ``[R, H, q, k]``, or ``None``."""
        return _summed(addon.attention_bias(query, key) for addon in self._biases)

    def auxiliary_losses(self, inputs: Tensor, targets: Tensor) -> list[AuxLoss]:
        """The add-ons' auxiliary training terms for a window batch."""
        return [term for addon in self.addons for term in addon.auxiliary_losses(self, inputs, targets)]

    # ------------------------------------------------------------ tokens
    def token_ids(self, codes: Tensor) -> Tensor:
        """``[..., l]`` codes of levels ``0..l-1`` → token ids."""
        return 1 + self.offsets[: codes.shape[-1]] + codes

    def item_representation(self, items: Tensor) -> Tensor:
        """``[...]`` item ids → ``[..., D]``: each item's pooled SID input embedding,
        ``sum_l (tok[token_id(code_l)] + level[l + 1])``, without position or add-on encodings (0 for the
        padding item 0).

        The token table is the one both backbones read their inputs from and tie their output logits to, so
        an objective on this representation (R-GRec's) shapes what decoding uses.
        """
        ids = self.token_ids(self.codes[items])  # [..., L]
        rep = self.tok(ids).sum(-2) + self.level.weight[1:].sum(0)
        return rep * (items > 0)[..., None].to(rep.dtype)

    def embed_items(self, items: Tensor, positions: Tensor) -> tuple[Tensor, TokenNodes]:
        """``[B, W]`` items at window ``positions`` → ``[B, W * per_item, D]`` sequence inputs and their nodes
        (with ``history_tokens="items"``, each item's code-token inputs summed, and its leaf node)."""
        B, W = items.shape
        ids = self.token_ids(self.codes[items]) * (items > 0)[..., None]  # [B, W, L]
        emb = self.tok(ids)
        pooled = self.per_item == 1  # one token per item: its code tokens' inputs summed, its leaf node
        pos = 0.0 if pooled else self.pos(positions)[:, :, None, :]
        x = emb + pos + self.level.weight[1:][None, None]
        nodes = item_token_nodes(items, self.codes, self.sizes)
        if self._encoders:
            enc = self.addon_encoding(_unflatten(nodes, B, W, self.L), emb)
            if enc is not None:
                x = x + enc
        if pooled:
            x = x.sum(2) * (items > 0)[..., None] + self.pos(positions)
            return x, nodes.tokens(slice(self.L - 1, None, self.L))
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
        if self._encoders:
            enc = self.addon_encoding(nodes.tokens(slice(1, None)), emb)
            if enc is not None:
                x = x + enc
        if position is not None:
            x = x + self.pos.weight[position]
        if start:
            first = self.tok.weight[self.bos] + self.level.weight[0]
            enc = None
            if self._encoders:  # the start token is the root: a group of one, without ancestors
                enc = self.addon_encoding(nodes.tokens(slice(None, 1)), first.expand(B * N, 1, -1))
            first = first.expand(B * N, 1, -1) if enc is None else first + enc
            x = torch.cat([first, x], 1)
        else:
            nodes = nodes.tokens(slice(1, None))
        return x.reshape(B, N, x.shape[1], -1), nodes

    def level_logits(self, h: Tensor, level: int, prefix: Tensor | None = None) -> Tensor:
        """Tied output: ``[..., D]`` hidden → ``[..., V_level]`` logits for codes of ``level``.

        With add-ons that adjust logits, ``prefix`` ``[..., level]`` (the codes each row continues) is needed.
        """
        start = 1 + int(self.offsets[level])
        table = self.tok.weight[start : start + self.codebook_sizes[level]]
        logits = self.final_norm(h) @ table.T
        for addon in self._adjusters:
            if prefix is None:
                raise ValueError("level_logits: an add-on adjusts logits, so pass the prefix codes.")
            logits = addon.adjust_logits(logits, prefix, level)
        return logits

    def self_bias(self, query: TokenNodes, key: TokenNodes, B: int, N: int) -> Tensor | None:
        """Add-on bias ``[B, N, H, q, k]`` between token sets flattened as ``[B * N, .]`` (or None)."""
        if not self._biases:
            return None
        bias = self.attention_bias(query, key)  # [BN, H, q, k]
        return None if bias is None else bias.reshape(B, N, *bias.shape[1:])

    def pad_window(self, history: Tensor) -> Tensor:
        """Left-pad (or cut) a history ``[B, w]`` to exactly ``window`` items."""
        w = history.shape[1]
        if w >= self.window:
            return history[:, w - self.window :]
        return F.pad(history, (self.window - w, 0))

    def level_ce(self, h: Tensor, codes: Tensor, items: Tensor | None = None) -> Tensor:
        """Mean CE over levels and targets: ``h`` ``[R, L, D]`` predicts ``codes`` ``[R, L]`` (the paths of
        ``items`` ``[R]``). With ``normalize="valid"`` each level's softmax runs over the codes that continue
        a real item's path from the target's prefix (its trie siblings), as constrained decoding and
        ``valid``-normalised scoring do; ``items`` is then required."""
        if self.normalize == "valid" and items is None:
            raise ValueError("level_ce: normalize='valid' needs the target items.")
        losses = []
        for level in range(self.L):
            logits = self.level_logits(h[:, level], level, codes[:, :level])
            if self.normalize == "valid":
                logits = logits.masked_fill(~getattr(self, f"sibling_codes{level}")[items], float("-inf"))
            losses.append(F.cross_entropy(logits, codes[:, level], reduction="sum"))
        return torch.stack(losses).sum() / max(codes.numel(), 1)


def sibling_code_masks(codes: np.ndarray, codebook_sizes: Sequence[int]) -> list[np.ndarray]:
    """Per level ``l``, ``[n_items + 1, C_l]`` bool: the codes that continue a real item's path from item
    ``x``'s prefix ``codes[x, :l]`` (``x``'s own code among them; row 0 all False)."""
    codes = np.asarray(codes, dtype=np.int64)
    real = codes[1:]
    out = []
    for level, size in enumerate(codebook_sizes):
        if level:
            _, prefix = np.unique(real[:, :level], axis=0, return_inverse=True)
            prefix = prefix.reshape(-1)
        else:
            prefix = np.zeros(len(real), dtype=np.int64)
        allowed = np.zeros((int(prefix.max()) + 1 if len(real) else 0, int(size)), dtype=bool)
        allowed[prefix, real[:, level]] = True
        mask = np.zeros((len(codes), int(size)), dtype=bool)
        mask[1:] = allowed[prefix]
        out.append(mask)
    return out


def _summed(parts: Iterable[Tensor | None]) -> Tensor | None:
    """Sum of the given tensors in order (``None`` skipped; one tensor is returned as is), or ``None``."""
    total = None
    for part in parts:
        if part is not None:
            total = part if total is None else total + part
    return total


def _unflatten(nodes: TokenNodes, B: int, W: int, L: int) -> TokenNodes:
    return TokenNodes(
        nodes.path.view(B, W, L, -1),
        nodes.depth.view(B, W, L),
        nodes.occurrence.view(B, W, L),
        nodes.subtree.view(B, W, L),
        nodes.valid.view(B, W, L),
    )


def causal_mask(q: int, device: torch.device) -> Tensor:
    """``[q, q]`` bool lower-triangular mask (True = visible)."""
    return torch.ones(q, q, dtype=torch.bool, device=device).tril()
