"""Decoder-only (GPT-style) backbone over semantic-ID token streams: its whole forward pass, on the shared
layers of :mod:`.attention` and the shared embeddings of :mod:`.backbones`.

* **Stream.** One causal stream of the window's item tokens (``L`` per item), with the add-ons' biases in
  every self-attention; next-token loss on the tokens of every target item.
* **Context.** Scoring runs the history once per user and caches each layer's history keys/values
  (:meth:`DecoderBackbone.context`); level 0 is predicted by the last history token.
* **Step.** A prefix ``c_1..c_m`` continues the stream at position ``window``: its tokens attend causally to
  each other and to the cached history.
* **Cached exact scoring** (:meth:`DecoderBackbone.score_nodes`): one new token per trie node, on top of the
  cached history and of its ancestors' cached keys/values (:mod:`.kv_cache`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from recframe.models.generative.backbones import Context, SIDBackbone, causal_mask
from recframe.models.generative.kv_cache import BeamKV, NodeKV, cached_block
from recframe.models.generative.structure import TokenNodes
from recframe.models.generative.trie import SIDTrie


class DecoderBackbone(SIDBackbone):
    """Decoder-only stack (module docstring); arguments as :class:`SIDBackbone`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.blocks = nn.ModuleList(self.block(self_sees_context=True) for _ in range(self.n_layers))

    # ------------------------------------------------------------------ history
    def _stream(self, items: Tensor, *,
                packed: bool | None = None) -> tuple[Tensor, TokenNodes, Tensor, list[Tensor]]:
        """Hidden states ``[B, S, D]`` of windows ``items`` ``[B, W]``, their nodes, the stream's mask and
        each layer's input (``packed``: :meth:`SIDBackbone.run_stream`; padding rows are zero when packed,
        and no real token attends to them)."""
        B, W = items.shape
        positions = torch.arange(W, device=items.device)[None].expand(B, W)
        x, nodes = self.embed_items(items, positions)
        S = x.shape[1]
        mask = (causal_mask(S, items.device)[None] & nodes.valid[:, None, :]) | torch.eye(
            S, dtype=torch.bool, device=items.device
        )[None]
        bias = self.self_bias(nodes, nodes, B, 1)
        h, inputs = self.run_stream(self.blocks, x, nodes.valid, mask, bias, packed=packed, with_inputs=True)
        return h, nodes, mask, inputs

    def context(self, history: Tensor) -> Context:
        """Each layer's history keys/values, the history's nodes and its last hidden state."""
        items = self.pad_window(history)
        h, nodes, _, inputs = self._stream(items)
        kv = [block.attn.context_kv(block.norm1(x)) for block, x in zip(self.blocks, inputs)]
        return Context(kv=kv, mask=nodes.valid[:, None, None, None, :], nodes=nodes, last=h[:, -1])

    def _history_bias(self, ctx: Context, query: TokenNodes, B: int, N: int, m: int) -> Tensor | None:
        """Add-on bias ``[B, N, H, m, K]`` of prefix tokens (``query`` fields ``[B, N * m, ...]``) on the
        cached history tokens."""
        if not self._biases:
            return None
        bias = self.attention_bias(query, ctx.nodes)  # [B, H, N * m, K]
        if bias is None:
            return None
        return bias.reshape(B, -1, N, m, ctx.nodes.depth.shape[1]).permute(0, 2, 1, 3, 4)

    # ------------------------------------------------------------------ prefixes
    def step(self, ctx: Context, prefix: Tensor) -> Tensor:
        """Next-code logits ``[B, N, V_m]`` for prefixes ``[B, N, m]`` (the whole prefix is run)."""
        B, N, m = prefix.shape
        if m == 0:
            return self.level_logits(ctx.last, 0, prefix[:, 0])[:, None].expand(B, N, -1)
        x, nodes = self.embed_prefix(prefix, start=False, position=self.window)
        self_bias = self.self_bias(nodes, nodes, B, N)
        flat = TokenNodes(
            nodes.path.reshape(B, N * m, -1),
            nodes.depth.reshape(B, N * m),
            nodes.occurrence.reshape(B, N * m),
            nodes.subtree.reshape(B, N * m),
            nodes.valid.reshape(B, N * m),
        )
        past_bias = self._history_bias(ctx, flat, B, N, m)
        x = self.drop(x)
        causal = causal_mask(m, x.device)
        for block, kv in zip(self.blocks, ctx.kv):
            x = block(
                x, self_mask=causal, self_bias=self_bias, past_kv=kv, past_mask=ctx.mask, past_bias=past_bias
            )
        return self.level_logits(x[:, :, -1], m, prefix)

    def score_nodes(self, state: tuple[Context, NodeKV], level: int, nodes: Tensor) -> Tensor:
        """Next-code logits ``[B, n, V_level]`` of trie ``nodes`` (ids) at depth ``level``: the root from
        the last history token, deeper nodes by running only their own token against the cached history and
        their ancestors' cached keys/values."""
        ctx, cache = state
        prefix = cache.trie.prefixes(level)[nodes][None]  # [1, n, level]: the same for every user
        return self._newest_token_logits(ctx, cache, prefix, node_ids=nodes)

    def beam_step(self, state: tuple[Context, BeamKV], prefix: Tensor) -> Tensor:
        """:meth:`step` for a beam search that calls ``state[1].select`` after each level
        (:func:`~recframe.models.generative.decoding.beam_search`'s ``on_select``): only each prefix's
        newest token runs, against the cached history and its path's cached keys/values. The same logits as
        :meth:`step`."""
        ctx, cache = state
        return self._newest_token_logits(ctx, cache, prefix, node_ids=None)

    def _newest_token_logits(self, ctx: Context, cache: NodeKV | BeamKV, prefix: Tensor,
                             node_ids: Tensor | None) -> Tensor:
        """Next-code logits ``[B, N, V_level]`` for prefixes ``[1 or B, N, level]``: from the last history
        token at level 0, else by running the prefixes' last token on the cached keys/values before it."""
        b, n, level = prefix.shape
        B = ctx.kv[0][0].shape[0]
        if level == 0:
            return self.level_logits(ctx.last, 0, prefix[:, 0].expand(B, 0))[:, None].expand(B, n, -1)
        x, nodes = self.embed_prefix(prefix, start=False, position=self.window)
        last = nodes.tokens(slice(level - 1, level))  # [b * n, 1]: the new token of each prefix
        self_bias = self.self_bias(last, nodes, b, n)
        query = TokenNodes(*(t.reshape(b, n, *t.shape[2:]).expand(B, n, *t.shape[2:])  # [B, n(*1), ...]
                             for t in (last.path, last.depth, last.occurrence, last.subtree, last.valid)))
        past_bias = self._history_bias(ctx, query, B, n, 1)
        x = self.drop(x[:, :, -1:])  # [b, n, 1, D]: user-independent (b = 1) until the history attention
        for layer, (block, kv) in enumerate(zip(self.blocks, ctx.kv)):
            x = cached_block(block, x, cache=cache, depth=level, nodes=node_ids, layer=layer,
                             self_bias=self_bias, context_kv=kv, context_mask=ctx.mask,
                             context_bias=past_bias)
        return self.level_logits(x[:, :, -1], level, prefix.expand(B, -1, -1))

    def node_cache(self, trie: SIDTrie) -> NodeKV:
        """An empty cache for :meth:`score_nodes` (prefix tokens start at depth 1: no start token)."""
        return NodeKV(trie, len(self.blocks), first=1)

    # ------------------------------------------------------------------ training
    def loss(self, inputs: Tensor, targets: Tensor, *, compact: bool | None = None) -> Tensor:
        """Next-token CE on the tokens of every target item of the window (``compact``: see
        :meth:`_pooled_loss`; a stream of code tokens always runs the whole window)."""
        if self.per_item == 1:
            return self._pooled_loss(inputs, targets, compact)
        window = torch.cat([inputs, targets[:, -1:]], 1)  # the W + 1 items of the window
        h, _, _, _ = self._stream(window)
        B = window.shape[0]
        h = h.view(B, window.shape[1], self.L, -1)
        # predictor of target item w (window position w + 1): the last token of item w for level 0,
        # then the item's own tokens for levels 1..L-1
        pred = torch.cat([h[:, :-1, -1:], h[:, 1:, :-1]], 2)  # [B, W, L, D]
        keep = targets > 0
        return self.level_ce(pred[keep], self.codes[targets][keep], targets[keep])

    def _pooled_loss(self, inputs: Tensor, targets: Tensor, compact: bool | None = None) -> Tensor:
        """``history_tokens="items"``: the window's items are one token each, so a target's own codes are not
        in the stream. Level 0 of target ``t`` is predicted by history item ``t``'s last hidden state (as at
        inference by ``ctx.last``); levels ``1..L-1`` by prefix rows ``[c_1..c_{L-1}]`` at position ``t + 1``
        that see, in every layer, the cached keys/values of history items ``<= t`` -- the computation
        :meth:`step` runs at inference, for every target of the window at once.

        The prefix rows are ``[B', N']``: every window position (``[B, W]``, padded targets dropped after
        decoding) or, with ``compact``, only the ``R`` real targets (``[R, 1]``, each with its user's history
        keys/values gathered). Both compute the same function; ``None`` compacts when at least half of the
        positions are padding (as ``TigerBackbone.loss`` does).
        """
        B, W = inputs.shape
        h, nodes, _, layer_inputs = self._stream(inputs)  # h [B, W, D]
        keep = targets > 0
        if compact is None:
            compact = 2 * int(keep.sum()) <= keep.numel()
        if compact:
            row, position = keep.nonzero(as_tuple=True)  # [R] each

            def per_row(t: Tensor) -> Tensor:
                return t[row]

            rows_target, positions = targets[keep][:, None], position[:, None]  # [R, 1]
        else:

            def per_row(t: Tensor) -> Tensor:
                return t

            rows_target, positions = targets, torch.arange(W, device=inputs.device)[None].expand(B, W)
        codes = self.codes[rows_target]  # [B', N', L]
        h = per_row(h)
        pred = h.gather(1, positions[..., None].expand(-1, -1, h.shape[-1]))[:, :, None]  # [B', N', 1, D]
        if self.L > 1:
            Bp, Np = rows_target.shape
            kv = [tuple(per_row(t) for t in block.attn.context_kv(block.norm1(x)))
                  for block, x in zip(self.blocks, layer_inputs)]
            fields = (nodes.path, nodes.depth, nodes.occurrence, nodes.subtree, nodes.valid)
            history = TokenNodes(*(per_row(t) for t in fields))
            ctx = Context(kv=kv, mask=None, nodes=history, last=None)
            x, pnodes = self.embed_prefix(codes[..., :-1], start=False, position=None)  # [B', N', L-1, D]
            x = self.drop(x + self.pos(positions + 1)[:, :, None])
            m = self.L - 1
            self_bias = self.self_bias(pnodes, pnodes, Bp, Np)
            flat = TokenNodes(*(t.reshape(Bp, Np * m, *t.shape[2:]) for t in (
                pnodes.path, pnodes.depth, pnodes.occurrence, pnodes.subtree, pnodes.valid)))
            past_bias = self._history_bias(ctx, flat, Bp, Np, m)
            item = torch.arange(W, device=inputs.device)
            sees = (item[None, None, :] <= positions[..., None]) & history.valid[:, None, :]  # [B', N', W]
            past_mask = sees[:, :, None, None, :]
            causal = causal_mask(m, x.device)
            for block, layer_kv in zip(self.blocks, kv):
                x = block(x, self_mask=causal, self_bias=self_bias, past_kv=layer_kv, past_mask=past_mask,
                          past_bias=past_bias)
            pred = torch.cat([pred, x], 2)  # [B', N', L, D]
        real = rows_target > 0
        return self.level_ce(pred[real], codes[real], rows_target[real])
