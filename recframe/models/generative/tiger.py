"""TIGER-style encoder–decoder backbone (Rajput et al., 2023, "Recommender Systems with Generative
Retrieval"): its whole forward pass, on the shared layers of :mod:`.attention` and the shared embeddings of
:mod:`.backbones`.

* **Encoder, item-causal.** (Over ``L`` code tokens per history item, or one pooled token per item with
  ``history_tokens="items"``; see :mod:`.backbones`.) TIGER's encoder is bidirectional and it trains one
  (history, next item) pair per encoder pass. To train on every target of a window in one pass (the "all
  targets" protocol every model here uses) the encoder is *item-causal*: a token of history item ``i`` sees
  the tokens of items ``≤ i``, and the decoder row for target ``t`` cross-attends to the memory of items
  ``≤ t``. Inference uses the same masks, so training and serving see the same function; at the last
  position the encoder sees the whole history, as TIGER's does.
* **Decoder.** Rows ``[start, c_1..c_m]``, causal self-attention (with the add-ons' biases) and
  cross-attention to the memory; the hidden state of the last token gives the next code's logits.
* **Cached exact scoring** (:meth:`TigerBackbone.score_nodes`): one new decoder token per trie node, on top of
  its ancestors' cached keys/values (:mod:`.kv_cache`); beam search the same way per kept hypothesis
  (:meth:`TigerBackbone.beam_step`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from recframe.models.generative.backbones import Context, SIDBackbone, causal_mask
from recframe.models.generative.kv_cache import BeamKV, NodeKV, cached_block
from recframe.models.generative.structure import TokenNodes
from recframe.models.generative.trie import SIDTrie


class TigerBackbone(SIDBackbone):
    """TIGER-style encoder–decoder (module docstring); arguments as :class:`SIDBackbone`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.encoder = nn.ModuleList(self.block() for _ in range(self.n_layers))
        self.decoder = nn.ModuleList(self.block(cross=True) for _ in range(self.n_layers))
        self.enc_norm = nn.LayerNorm(self.dim)

    # ------------------------------------------------------------------ encoder
    def _encode(self, items: Tensor, *, packed: bool | None = None) -> tuple[Tensor, Tensor, TokenNodes]:
        """Encoder memory ``[B, W * per_item, D]`` of windows ``items`` ``[B, W]``, its real tokens and nodes
        (``packed``: :meth:`SIDBackbone.run_stream`; padding rows of the memory are never attended to)."""
        B, W = items.shape
        positions = torch.arange(W, device=items.device)[None].expand(B, W)
        x, nodes = self.embed_items(items, positions)
        item_of = torch.arange(W * self.per_item, device=items.device) // self.per_item
        valid = nodes.valid
        mask = (item_of[None, :] <= item_of[:, None])[None] & valid[:, None, :]
        mask = mask | torch.eye(W * self.per_item, dtype=torch.bool, device=items.device)[None]
        bias = self.self_bias(nodes, nodes, B, 1)
        h, _ = self.run_stream(self.encoder, x, valid, mask, bias, packed=packed)
        return self.enc_norm(h), valid, nodes

    def context(self, history: Tensor) -> Context:
        """Encoder memory of histories ``[B, w]`` as each decoder layer's cross-attention keys/values."""
        memory, valid, _ = self._encode(self.pad_window(history))
        kv = [block.cross.context_kv(memory) for block in self.decoder]
        return Context(kv=kv, mask=valid[:, None, None, None, :], nodes=None, last=None)

    # ------------------------------------------------------------------ decoder
    def _decode(self, x: Tensor, nodes: TokenNodes, ctx: Context, mask: Tensor) -> Tensor:
        B, N, q, _ = x.shape
        bias = self.self_bias(nodes, nodes, B, N)
        self_mask = causal_mask(q, x.device)
        x = self.drop(x)
        for block, kv in zip(self.decoder, ctx.kv):
            x = block(x, self_mask=self_mask, self_bias=bias, memory_kv=kv, memory_mask=mask)
        return x

    def step(self, ctx: Context, prefix: Tensor) -> Tensor:
        """Next-code logits ``[B, N, V_m]`` for prefixes ``[B, N, m]`` (the whole prefix is run)."""
        x, nodes = self.embed_prefix(prefix, start=True, position=None)
        h = self._decode(x, nodes, ctx, ctx.mask)
        return self.level_logits(h[:, :, -1], prefix.shape[-1], prefix)

    def score_nodes(self, state: tuple[Context, NodeKV], level: int, nodes: Tensor) -> Tensor:
        """Next-code logits ``[B, n, V_level]`` of trie ``nodes`` (ids) at depth ``level``, running only
        their own decoder token (the start token at depth 0) against their ancestors' cached keys/values."""
        ctx, cache = state
        prefix = cache.trie.prefixes(level)[nodes][None]  # [1, n, level]: the same for every user
        return self._newest_token_logits(ctx, cache, prefix, node_ids=nodes)

    def beam_step(self, state: tuple[Context, BeamKV], prefix: Tensor) -> Tensor:
        """:meth:`step` for a beam search that calls ``state[1].select`` after each level
        (:func:`~recframe.models.generative.decoding.beam_search`'s ``on_select``): only each prefix's
        newest token runs, against its path's cached keys/values. The same logits as :meth:`step`."""
        ctx, cache = state
        return self._newest_token_logits(ctx, cache, prefix, node_ids=None)

    def _newest_token_logits(self, ctx: Context, cache: NodeKV | BeamKV, prefix: Tensor,
                             node_ids: Tensor | None) -> Tensor:
        """Next-code logits ``[B, N, V_level]`` for prefixes ``[1 or B, N, level]``, running their last
        decoder token (the start token when ``level`` is 0) on the cached keys/values of the tokens before
        it."""
        level = prefix.shape[-1]
        x, nodes = self.embed_prefix(prefix, start=True, position=None)
        x = self.drop(x[:, :, -1:])
        bias = self.self_bias(nodes.tokens(slice(level, level + 1)), nodes, *prefix.shape[:2])
        B = ctx.kv[0][0].shape[0]  # x stays [1, n, 1, D] (user-independent) until the first cross-attention
        for layer, (block, kv) in enumerate(zip(self.decoder, ctx.kv)):
            x = cached_block(block, x, cache=cache, depth=level, nodes=node_ids, layer=layer,
                             self_bias=bias, memory_kv=kv, memory_mask=ctx.mask)
        return self.level_logits(x[:, :, -1], level, prefix.expand(B, -1, -1))

    def node_cache(self, trie: SIDTrie) -> NodeKV:
        """An empty cache for :meth:`score_nodes` (the start token is the root, depth 0)."""
        return NodeKV(trie, len(self.decoder), first=0)

    # ------------------------------------------------------------------ training
    def loss(self, inputs: Tensor, targets: Tensor, *, compact: bool | None = None) -> Tensor:
        """Teacher-forced CE over every code of every target of windows ``inputs``/``targets`` ``[B, W]``.

        The decoder runs one row per target. ``compact=True`` decodes only the real targets (rows gathered
        with their user's memory keys/values); ``False`` decodes every window position and drops the padded
        ones afterwards. Both compute the same function (a test checks values and gradients); they differ in
        cost and in how dropout draws its masks. ``None`` (default) compacts when at least half of the
        positions are padding: on short-history data (Amazon's 5-core files, ~12 % real targets in a window
        of 50) that is about 3x faster per step; ML-100K's batches (~80 % real) keep the broadcast path.
        """
        memory, valid, _ = self._encode(inputs)
        B, W = inputs.shape
        keep = targets > 0
        if compact is None:
            compact = 2 * int(keep.sum()) <= keep.numel()
        kv = [block.cross.context_kv(memory) for block in self.decoder]
        item_of = torch.arange(W * self.per_item, device=inputs.device) // self.per_item
        if compact:
            row, position = keep.nonzero(as_tuple=True)  # [R] each
            kv = [(k[row], v[row]) for k, v in kv]  # [R, K, H, d_h]
            sees = item_of[None, :] <= position[:, None]  # [R, K]
            mask = (sees & valid[row])[:, None, None, None, :]  # [R, 1, 1, 1, K]
            codes = self.codes[targets[keep]][:, None]  # [R, 1, L]
        else:
            sees = item_of[None, :] <= torch.arange(W, device=inputs.device)[:, None]  # [W(target), K]
            mask = (sees[None] & valid[:, None, :])[:, :, None, None, :]  # [B, W, 1, 1, K]
            codes = self.codes[targets]  # [B, W, L]
        x, nodes = self.embed_prefix(codes[..., :-1], start=True, position=None)
        ctx = Context(kv=kv, mask=mask, nodes=None, last=None)
        h = self._decode(x, nodes, ctx, mask)  # [R, 1, L, D] or [B, W, L, D]
        if compact:
            return self.level_ce(h[:, 0], codes[:, 0], targets[keep])
        return self.level_ce(h[keep], codes[keep], targets[keep])
