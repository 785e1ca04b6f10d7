"""Keys and values reused across trie levels, for exact full-catalogue scoring and for beam search.

Exact scoring (:func:`~recframe.models.generative.decoding.exact_scores_cached`) visits the trie depth by
depth. The decoder token of a depth-``d`` node (its code ``c_d``; the start token at the root) attends, in
its self-attention, to the tokens of its ancestors and to itself. The attention is causal, so an ancestor
token's keys and values are the same in every prefix that contains it: they are computed once, when their
own node is scored, stored here per depth and layer (:class:`NodeKV`), and gathered for the descendants.
Each level then runs only one new token per node, instead of re-running the whole prefix: ``sum_d n_nodes[d]``
tokens instead of ``sum_d (d + 1) n_nodes[d]`` (TIGER; the decoder-only model has no start token).

:class:`BeamKV` is the same idea for trie-constrained beam search: a hypothesis at depth ``d`` is a trie
node too, but each user keeps its own ``W`` of them, so its cache holds, per layer, the keys/values of
the tokens on each kept hypothesis's path ``[B, W, d, H, d_h]``; after each level's selection the rows
follow their parents (:meth:`BeamKV.select`). Each level then runs one new token per hypothesis instead of
its whole prefix:
``L`` decoder tokens per hypothesis instead of ``L (L + 1) / 2`` (TIGER's start token included).

:func:`cached_block` is one :class:`~recframe.models.generative.attention.RowBlock` applied to the new tokens
with the same parameters and the same pre-norm residual order as ``RowBlock.forward``; its self-attention
(:func:`cached_self_attention`) is ``RowAttention``'s with the ancestors' cached keys/values placed before
the new token's own. It passes the per-head outputs through the layer's ``head_hook`` as ``RowAttention``
does, so the head probe (:mod:`recframe.heads`) sees cached scoring too, one position per call.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from recframe.models.generative.attention import RowAttention, RowBlock
from recframe.models.generative.trie import SIDTrie

KV = tuple[Tensor, Tensor]


class NodeKV:
    """Per layer, the keys and values ``[B, n_cached, H, d_h]`` of the token of every trie node at depths
    ``first..L-1``, in one table per layer, so that a node's path (its ancestors, itself) is one gather.

    ``B`` is 1 for a layer whose keys/values do not depend on the user (the first layer: its inputs are the
    nodes' token embeddings), which the attention broadcasts over users.

    Args:
        trie: the item trie being walked.
        n_layers: self-attention layers.
        first: the shallowest depth that has a token (0: TIGER's start token; 1: the decoder-only model).
    """

    def __init__(self, trie: SIDTrie, n_layers: int, first: int) -> None:
        self.trie, self.n_layers, self.first = trie, n_layers, first
        self._kv: dict[int, KV] = {}
        sizes = trie.n_nodes[first : trie.depth]
        self.base = dict(zip(range(first, trie.depth), [0, *torch.tensor(sizes).cumsum(0).tolist()]))
        self.size = int(sum(sizes))
        # path[d]: the cache rows of each depth-d node's ancestors at depths first..d-1, then its own row
        self.path: dict[int, Tensor] = {}
        for d in range(first, trie.depth):
            own = self.base[d] + torch.arange(trie.n_nodes[d], device=trie.device)[:, None]
            above = self.path[d - 1][trie.parents(d)] if d > first else own[:, :0]
            self.path[d] = torch.cat([above, own], 1)

    def store(self, depth: int, nodes: Tensor | None, layer: int, kv: KV) -> None:
        """Keep the keys/values ``[B, len(nodes), H, d_h]`` of ``nodes`` (ids) at ``depth``."""
        k, v = kv
        if layer not in self._kv:
            shape = (k.shape[0], self.size, *k.shape[2:])
            self._kv[layer] = (k.new_empty(shape), v.new_empty(shape))
        ks, vs = self._kv[layer]
        rows = self.base[depth] + nodes
        ks[:, rows], vs[:, rows] = k, v

    def path_kv(self, depth: int, nodes: Tensor | None, layer: int) -> KV:
        """Keys/values ``[B, len(nodes), depth - first + 1, H, d_h]`` of the path of ``nodes`` (ids) at
        ``depth``: their ancestors at depths ``first..depth-1``, then themselves (stored first)."""
        rows = self.path[depth][nodes]
        ks, vs = self._kv[layer]
        return ks[:, rows], vs[:, rows]


class BeamKV:
    """Per layer, the keys and values ``[B, W, P, H, d_h]`` of the tokens on the path of each of the ``W``
    hypotheses every user keeps in a beam search (module docstring).

    It offers :class:`NodeKV`'s ``store``/``path_kv`` (``nodes`` is ignored: a call scores every
    hypothesis) so that :func:`cached_self_attention` serves both; :meth:`select` reorders the paths after the
    beam keeps its best children.
    """

    def __init__(self) -> None:
        self._path: dict[int, KV] = {}  # the kept hypotheses' paths, before this level's new token
        self._new: dict[int, KV] = {}  # the same paths with this level's token appended

    def store(self, depth: int, nodes: Tensor | None, layer: int, kv: KV) -> None:
        """Append the new tokens' keys/values ``[B or 1, W, H, d_h]`` to each hypothesis's path."""
        k, v = (t[:, :, None] for t in kv)
        if layer in self._path:
            pk, pv = self._path[layer]
            users = max(pk.shape[0], k.shape[0])
            k = torch.cat([pk.expand(users, *pk.shape[1:]), k.expand(users, *k.shape[1:])], 2)
            v = torch.cat([pv.expand(users, *pv.shape[1:]), v.expand(users, *v.shape[1:])], 2)
        self._new[layer] = (k, v)

    def path_kv(self, depth: int, nodes: Tensor | None, layer: int) -> KV:
        """Keys/values ``[B, W, P + 1, H, d_h]`` of each hypothesis's path, its new token last."""
        return self._new[layer]

    def select(self, parent: Tensor) -> None:
        """Keep, for each user's next hypotheses ``[B, W']``, the path of its parent (an index into the
        ``W`` hypotheses just scored)."""
        for layer, (k, v) in self._new.items():
            users = max(k.shape[0], parent.shape[0])
            k, v = k.expand(users, *k.shape[1:]), v.expand(users, *v.shape[1:])
            index = parent.view(*parent.shape, 1, 1, 1).expand(-1, -1, *k.shape[2:])
            self._path[layer] = (k.gather(1, index), v.gather(1, index))
        self._new = {}


def cached_self_attention(
    attn: RowAttention,
    x: Tensor,
    *,
    cache: NodeKV | BeamKV,
    depth: int,
    nodes: Tensor | None,
    layer: int,
    self_bias: Tensor | None = None,
    context_kv: KV | None = None,
    context_mask: Tensor | None = None,
    context_bias: Tensor | None = None,
) -> Tensor:
    """``attn`` for the new tokens of trie ``nodes`` at ``depth`` (one per row), which see their
    ancestors' cached keys/values, themselves and a shared context. Their own keys/values go to ``cache``.

    Args:
        attn: a self-attention ``RowAttention`` (its ``q``, ``kv`` and ``out`` layers are used).
        x: ``[B, N, 1, D]`` normalised inputs of the new tokens (``B = 1``: the same for every user).
        cache, depth, nodes, layer: where the rows' paths are cached (:class:`NodeKV` for trie nodes, by id;
            :class:`BeamKV` for beam hypotheses, ``nodes`` None).
        self_bias: broadcastable to ``[B, N, H, 1, P + 1]`` over the path (ancestors in depth order, itself).
        context_kv, context_mask, context_bias: the shared per-user context, as in ``RowAttention.forward``.

    Returns:
        ``[B, N, 1, D]`` outputs.
    """
    B, N, q, D = x.shape  # B = 1 when the inputs do not depend on the user (first layer)
    H, dh = attn.n_heads, attn.head_dim
    Q = attn.q(x).view(B, N, H, dh) / dh**0.5
    k_new, v_new = attn.kv(x).view(B, N, 2, H, dh).unbind(2)
    cache.store(depth, nodes, layer, (k_new, v_new))
    k, v = cache.path_kv(depth, nodes, layer)  # [B, N, P + 1, H, d_h]
    s = (Q[:, :, None] * k).sum(-1).permute(0, 1, 3, 2)[:, :, :, None]  # [B, N, H, 1, P + 1]
    if self_bias is not None:
        s = s + self_bias
    logits = [s]
    if attn.attend_context and context_kv is not None:
        users = context_kv[0].shape[0]
        c = torch.einsum("bnhd,bkhd->bnhk", Q.expand(users, -1, -1, -1), context_kv[0])[:, :, :, None]
        if context_bias is not None:
            c = c + context_bias
        if context_mask is not None:
            c = c.masked_fill(~context_mask, float("-inf"))
        logits = [s.expand(users, -1, -1, -1, -1), c]
    probs = torch.softmax(torch.cat(logits, -1) if len(logits) > 1 else s, dim=-1).nan_to_num(0.0)
    probs = F.dropout(probs, attn.dropout, attn.training)
    width = s.shape[-1]
    path_probs = probs[:, :, :, 0, :width].permute(0, 1, 3, 2)[..., None]  # [B, N, P + 1, H, 1]
    heads = (path_probs * v).sum(2)[:, :, :, None]  # [B, N, H, 1, d_h]
    if len(logits) > 1:
        context = torch.einsum("bnhk,bkhd->bnhd", probs[:, :, :, 0, width:], context_kv[1])
        heads = heads + context[:, :, :, None]
    if attn.head_hook is not None:
        heads = attn.head_hook(attn, heads)
    return attn.out(heads.permute(0, 1, 3, 2, 4).reshape(heads.shape[0], N, q, D))


def cached_block(
    block: RowBlock,
    x: Tensor,
    *,
    memory_kv: KV | None = None,
    memory_mask: Tensor | None = None,
    **attention: Any,
) -> Tensor:
    """``block`` on the new tokens ``[B, N, 1, D]`` of trie nodes (``RowBlock.forward``'s order).

    ``attention``: the keyword arguments of :func:`cached_self_attention` (cache, depth, nodes, layer,
    biases, context); ``memory_*``: the encoder memory of the cross-attention.
    """
    x = x + block.drop(cached_self_attention(block.attn, block.norm1(x), **attention))
    if block.cross is not None:
        x = x.expand(memory_kv[0].shape[0], -1, -1, -1)  # user-independent rows meet the user's memory
        x = x + block.drop(block.cross(block.norm_c(x), context_kv=memory_kv, context_mask=memory_mask))
    return x + block.drop(block.ffn(block.norm2(x)))
