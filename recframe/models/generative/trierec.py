"""TrieRec: trie-aware absolute and topology-aware relative positional encodings, as a generative add-on.

Both encodings are computed from the item trie of the SID table, never from a
token's index in the sequence, and both come with one add-on, :class:`TrieRec`
(``addons: [{class_path: recframe.models.generative.TrieRec}]``); they add no
hyperparameters. Design choices the TrieRec abstract leaves open, and what we chose:

**Absolute encoding** (added to each token's input embedding). A token is a
trie node at depth ``d`` (its SID level; the decoder start token is the root,
``d = 0``). Its encoding aggregates the node's local structure:

    abs(node) = E_depth[d] + mean_{a ∈ ancestors(node)} E_tok[a]
                + w · log(1 + |subtree(node)|) / log(1 + n_items)

* depth: one learned vector per depth (there are only L + 1 depths);
* ancestors: the mean of the token embeddings of the node's proper ancestors
  (the item's earlier SID tokens; zero for depth ≤ 1). The token embedding
  table is the backbone's own, so no new table is learned;
* descendants: the subtree size (number of items under the node), log-scaled
  and normalised by the catalogue size, times one learned vector ``w``. We use
  the size rather than the descendant mean because it is exact, cheap, and
  defined for every node without another pass over the items.

**Relative encoding** (added to the attention logits, per head). For a query
node ``a`` and key node ``b``:

    bias_h(a, b) = R_h[relation(a, b)] + D_h[dist(a, b)] + C_h[lca_depth(a, b)] + S_h[same_item(a, b)]

with relation ∈ {same node, key is an ancestor, key is a descendant, sibling,
other}, tree distance ``d_a + d_b − 2·lca`` (0..2L), LCA depth (0..L) and
whether both tokens belong to the same item occurrence. Each term is a small
learned table per head (T5-style learned scalar biases), zero-initialised so a
TrieRec model starts exactly at its backbone. Distances need no bucketing:
they are bounded by 2L.

Both are applied in every self-attention of the backbone (encoder, decoder, or
the decoder-only stack); cross-attention is left unbiased, as in the paper's
statement that the relations are injected "into self-attention".
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from recframe.models.generative.addons import GenerativeAddon
from recframe.models.generative.structure import N_RELATIONS, TokenNodes, pair_relations


class TrieAbsoluteEncoding(nn.Module):
    """``abs(node)`` above, for tokens described by :class:`TokenNodes`.

    Args:
        depth: SID length L (depths 0..L).
        dim: model width.
        n_items: catalogue size (normalises the subtree size).
    """

    def __init__(self, depth: int, dim: int, n_items: int) -> None:
        super().__init__()
        self.depth_emb = nn.Embedding(depth + 1, dim)
        nn.init.zeros_(self.depth_emb.weight)
        self.size_vec = nn.Parameter(torch.zeros(dim))
        self.log_items = math.log1p(max(n_items, 1))

    def forward(self, nodes: TokenNodes, ancestor_mean: Tensor) -> Tensor:
        """``[B, N, dim]`` encodings; ``ancestor_mean`` is the mean ancestor token embedding per token."""
        size = torch.log1p(nodes.subtree.float()) / self.log_items
        out = self.depth_emb(nodes.depth) + ancestor_mean + size[..., None] * self.size_vec
        return out * nodes.valid[..., None]


class TrieRelativeBias(nn.Module):
    """Per-head additive attention bias from pairwise trie relations (see module docstring)."""

    def __init__(self, depth: int, n_heads: int) -> None:
        super().__init__()
        self.relation = nn.Embedding(N_RELATIONS, n_heads)
        self.distance = nn.Embedding(2 * depth + 1, n_heads)
        self.lca = nn.Embedding(depth + 1, n_heads)
        self.same_item = nn.Embedding(2, n_heads)
        for table in (self.relation, self.distance, self.lca, self.same_item):
            nn.init.zeros_(table.weight)

    def forward(self, query: TokenNodes, key: TokenNodes) -> Tensor:
        """``[B, H, Nq, Nk]`` bias.

        The four tables are summed into one joint table over every (relation, distance, LCA depth, same
        item) combination (``5 x (2L+1) x (L+1) x 2`` rows, 450 at L = 4) and looked up once per pair: the
        same sum for every pair as four lookups, at a quarter of the gathers and of the embedding backward
        (which dominated a TrieRec training step on 50 x 50 token grids)."""
        lca, dist, rel, same = pair_relations(query, key)
        n_dist, n_lca = self.distance.num_embeddings, self.lca.num_embeddings
        dist = dist.clamp(0, n_dist - 1)
        lca = lca.clamp(0, n_lca - 1)
        joint = (self.relation.weight[:, None, None, None] + self.distance.weight[None, :, None, None]
                 + self.lca.weight[None, None, :, None] + self.same_item.weight[None, None, None, :])
        index = ((rel * n_dist + dist) * n_lca + lca) * 2 + same.long()
        heads = joint.shape[-1]
        # index_select, not F.embedding: the same rows, and its backward (index_add) is ~6x cheaper on a CPU
        # than embedding's for a 450-row table and 50 x 50 grids
        bias = joint.reshape(-1, heads).index_select(0, index.reshape(-1)).view(*index.shape, heads)
        return bias.permute(0, 3, 1, 2)


def ancestor_mean(token_emb: Tensor) -> Tensor:
    """Mean of the embeddings of each token's proper ancestors within its item.

    ``token_emb`` ``[..., L, D]`` holds the embeddings of the L tokens of an item
    (level order); token at level ``l`` (depth ``l + 1``) averages levels
    ``< l``. Returns ``[..., L, D]`` (zeros at level 0).
    """
    L = token_emb.shape[-2]
    csum = token_emb.cumsum(-2)
    shifted = torch.cat([torch.zeros_like(csum[..., :1, :]), csum[..., :-1, :]], -2)
    count = torch.arange(L, device=token_emb.device).clamp(min=1).to(token_emb.dtype)
    return shifted / count[:, None]


class TrieRec(GenerativeAddon):
    """TrieRec as an add-on: :class:`TrieAbsoluteEncoding` on every token's input and
    :class:`TrieRelativeBias` on every self-attention (module docstring). No settings.

    Its tables are zero-initialised, so a TrieRec model starts exactly at its backbone.
    """

    def build(self, backbone: nn.Module) -> None:
        self.abs_enc = TrieAbsoluteEncoding(backbone.L, backbone.dim, backbone.n_items)
        self.rel_bias = TrieRelativeBias(backbone.L, backbone.n_heads)

    def encode(self, nodes: TokenNodes, token_emb: Tensor) -> Tensor:
        return self.abs_enc(nodes, ancestor_mean(token_emb))

    def attention_bias(self, query: TokenNodes, key: TokenNodes) -> Tensor:
        return self.rel_bias(query, key)
