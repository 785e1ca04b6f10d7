"""Keys and values reused across trie levels, for exact full-catalogue scoring.

Exact scoring (:func:`~recframe.models.generative.decoding.exact_scores_cached`) visits the trie depth by
depth. The decoder token of a depth-``d`` node (its code ``c_d``; the start token at the root) attends, in
its self-attention, to the tokens of its ancestors and to itself. The attention is causal, so an ancestor
token's keys and values are the same in every prefix that contains it: they are computed once, when their
own node is scored, stored here per depth and layer (:class:`NodeKV`), and gathered for the descendants.
Each level then runs only one new token per node, instead of re-running the whole prefix: ``sum_d n_nodes[d]``
tokens instead of ``sum_d (d + 1) n_nodes[d]`` (TIGER; the decoder-only model has no start token).

:func:`cached_block` is one :class:`~recframe.models.generative.attention.RowBlock` applied to the new tokens
with the same parameters and the same pre-norm residual order as ``RowBlock.forward``; its self-attention
(:func:`cached_self_attention`) is ``RowAttention``'s with the ancestors' cached keys/values placed before
the new token's own. It passes the per-head outputs through the layer's ``head_hook`` as ``RowAttention``
does, so the head probe (:mod:`recframe.heads`) sees cached scoring too, one position per call.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from recframe.models.generative.attention import RowAttention, RowBlock
from recframe.models.generative.trie import SIDTrie

KV = tuple[Tensor, Tensor]


class NodeKV:
    """Per depth and layer, the keys and values ``[B, n_nodes[d], H, d_h]`` of every depth-``d`` node's token.

    Args:
        trie: the item trie being walked.
        n_layers: self-attention layers.
        depths: the depths whose tokens are stored (those that have descendants to score).
    """

    def __init__(self, trie: SIDTrie, n_layers: int, depths: range) -> None:
        self.trie, self.n_layers, self.depths = trie, n_layers, depths
        self._kv: dict[tuple[int, int], KV] = {}
        # ancestors[d][:, j]: the depth-j ancestor of each depth-d node (j < d)
        self.ancestors = [torch.zeros(1, 0, dtype=torch.long, device=trie.device)]
        for d in range(1, trie.depth + 1):
            parent = trie.parents(d)
            self.ancestors.append(torch.cat([self.ancestors[d - 1][parent], parent[:, None]], 1))

    def store(self, depth: int, start: int, stop: int, layer: int, kv: KV) -> None:
        """Keep the keys/values ``[B, stop - start, H, d_h]`` of nodes ``start:stop`` at ``depth``."""
        if depth not in self.depths:
            return
        k, v = kv
        if (depth, layer) not in self._kv:
            shape = (k.shape[0], self.trie.n_nodes[depth], *k.shape[2:])
            self._kv[depth, layer] = (k.new_empty(shape), v.new_empty(shape))
        ks, vs = self._kv[depth, layer]
        ks[:, start:stop], vs[:, start:stop] = k, v

    def past(self, depth: int, start: int, stop: int, layer: int, first: int) -> KV | None:
        """Keys/values ``[B, stop - start, depth - first, H, d_h]`` of the ancestors at depths
        ``first..depth-1`` of nodes ``start:stop`` at ``depth`` (None when there are none)."""
        if depth <= first:
            return None
        anc = self.ancestors[depth][start:stop]
        ks = [self._kv[d, layer][0][:, anc[:, d]] for d in range(first, depth)]
        vs = [self._kv[d, layer][1][:, anc[:, d]] for d in range(first, depth)]
        return torch.stack(ks, 2), torch.stack(vs, 2)


def cached_self_attention(
    attn: RowAttention,
    x: Tensor,
    *,
    past_kv: KV | None,
    self_bias: Tensor | None = None,
    context_kv: KV | None = None,
    context_mask: Tensor | None = None,
    context_bias: Tensor | None = None,
) -> tuple[Tensor, KV]:
    """``attn`` for one new token per row that sees its cached ancestors, itself and a shared context.

    Args:
        attn: a self-attention ``RowAttention`` (its ``q``, ``kv`` and ``out`` layers are used).
        x: ``[B, N, 1, D]`` normalised inputs of the new tokens.
        past_kv: ``[B, N, P, H, d_h]`` cached keys/values of each row's ancestors (in depth order), or None.
        self_bias: broadcastable to ``[B, N, H, 1, P + 1]`` over (ancestors, the token itself).
        context_kv, context_mask, context_bias: the shared per-user context, as in ``RowAttention.forward``.

    Returns:
        ``[B, N, 1, D]`` outputs and the new tokens' keys/values ``[B, N, H, d_h]``.
    """
    B, N, q, D = x.shape
    H, dh = attn.n_heads, attn.head_dim
    Q = attn.q(x).view(B, N, q, H, dh) / dh**0.5
    k_new, v_new = attn.kv(x).view(B, N, q, 2, H, dh).unbind(3)
    k, v = k_new, v_new
    if past_kv is not None:
        k, v = torch.cat([past_kv[0], k_new], 2), torch.cat([past_kv[1], v_new], 2)
    s = torch.einsum("bnqhd,bnkhd->bnhqk", Q, k)
    if self_bias is not None:
        s = s + self_bias
    logits = [s]
    if attn.attend_context and context_kv is not None:
        c = torch.einsum("bnqhd,bkhd->bnhqk", Q, context_kv[0])
        if context_bias is not None:
            c = c + context_bias
        if context_mask is not None:
            c = c.masked_fill(~context_mask, float("-inf"))
        logits.append(c)
    probs = torch.softmax(torch.cat(logits, -1), dim=-1).nan_to_num(0.0)
    probs = F.dropout(probs, attn.dropout, attn.training)
    width = s.shape[-1]
    heads = torch.einsum("bnhqk,bnkhd->bnhqd", probs[..., :width], v)
    if len(logits) > 1:
        heads = heads + torch.einsum("bnhqk,bkhd->bnhqd", probs[..., width:], context_kv[1])
    if attn.head_hook is not None:
        heads = attn.head_hook(attn, heads)
    out = attn.out(heads.permute(0, 1, 3, 2, 4).reshape(B, N, q, D))
    return out, (k_new[:, :, 0], v_new[:, :, 0])


def cached_block(
    block: RowBlock,
    x: Tensor,
    *,
    past_kv: KV | None,
    self_bias: Tensor | None = None,
    context_kv: KV | None = None,
    context_mask: Tensor | None = None,
    context_bias: Tensor | None = None,
    memory_kv: KV | None = None,
    memory_mask: Tensor | None = None,
) -> tuple[Tensor, KV]:
    """``block`` on new tokens ``[B, N, 1, D]`` (``RowBlock.forward``'s order); returns them and their K/V."""
    h, kv = cached_self_attention(
        block.attn,
        block.norm1(x),
        past_kv=past_kv,
        self_bias=self_bias,
        context_kv=context_kv,
        context_mask=context_mask,
        context_bias=context_bias,
    )
    x = x + block.drop(h)
    if block.cross is not None:
        x = x + block.drop(block.cross(block.norm_c(x), context_kv=memory_kv, context_mask=memory_mask))
    return x + block.drop(block.ffn(block.norm2(x))), kv
