"""Trie structure of semantic-ID token sequences, as tensors.

Every token of a semantic-ID sequence is a node of the item trie: the level-``l``
token of item ``x`` (levels counted from 1) is the node reached by the path
``codes[x, :l]``; a decoder's start token is the root (depth 0). This module
turns token sequences into the per-token and pairwise structural quantities the
TrieRec encodings (:mod:`recframe.models.generative.trierec`) consume:

* per token: depth, the item occurrence it belongs to, its node path (codes up
  to its depth, ``-1`` below), and the size of its subtree (items under it);
* per pair ``(a, b)``: the depth of their lowest common ancestor (the length of
  the common prefix of the two paths), the tree distance
  ``d_a + d_b - 2 lca``, the relation (same node, ancestor, descendant,
  sibling, other) and whether both tokens belong to the same item occurrence.

All of it is vectorised over ``[B, N]`` tokens (``[B, N, N]`` pairs) with no
Python loop over tokens, beams or users.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

#: pairwise relation ids (``relation`` of :func:`pair_relations`)
SAME_NODE, ANCESTOR, DESCENDANT, SIBLING, OTHER = range(5)
N_RELATIONS = 5


@dataclass
class TokenNodes:
    """Structural description of ``[B, N]`` tokens.

    Attributes:
        path: ``[B, N, L]`` codes of each token's node (``-1`` below its depth, all ``-1`` for root/padding).
        depth: ``[B, N]`` node depth (0 = root / start token; padding tokens are 0 too, see ``valid``).
        occurrence: ``[B, N]`` id of the item occurrence the token belongs to (tokens of one item share it).
        subtree: ``[B, N]`` number of items below the node (the root holds all items).
        valid: ``[B, N]`` real (non-padding) tokens.
    """

    path: Tensor
    depth: Tensor
    occurrence: Tensor
    subtree: Tensor
    valid: Tensor

    def tokens(self, index: slice) -> TokenNodes:
        """The same description for the tokens ``index`` of each row (``[B, N]`` → ``[B, N']``)."""
        return TokenNodes(self.path[:, index], self.depth[:, index], self.occurrence[:, index],
                          self.subtree[:, index], self.valid[:, index])


def subtree_sizes(codes: np.ndarray) -> np.ndarray:
    """``[n_items + 1, L]``: items sharing item ``x``'s prefix of length ``l + 1`` (row 0 zeros).

    Computed once per SID table with ``np.unique`` on prefix keys (no loop over items).
    """
    codes = np.asarray(codes, dtype=np.int64)
    n, L = codes.shape
    sizes = np.zeros((n, L), dtype=np.int64)
    if n <= 1:
        return sizes
    real = codes[1:]
    for level in range(L):  # L is 3-5
        _, inverse, counts = np.unique(real[:, : level + 1], axis=0, return_inverse=True, return_counts=True)
        sizes[1:, level] = counts[inverse.reshape(-1)]
    return sizes


def item_token_nodes(items: Tensor, codes: Tensor, sizes: Tensor) -> TokenNodes:
    """Nodes of the flattened token stream of ``items`` ``[B, W]`` (0 = padding item).

    Token ``w * L + l`` is the level-``l + 1`` token of item ``items[:, w]``;
    each item position is its own occurrence.
    """
    B, W = items.shape
    L = codes.shape[1]
    item_codes = codes[items]  # [B, W, L]
    levels = torch.arange(L, device=items.device)
    below = levels[None, :] <= levels[:, None]  # [L(token level), L(path level)]: path levels <= token level
    path = torch.where(
        below[None, None], item_codes[:, :, None, :], torch.full_like(item_codes[:, :, None, :], -1)
    )
    valid = (items > 0)[:, :, None].expand(B, W, L)
    path = torch.where(valid[..., None], path, torch.full_like(path, -1))
    depth = torch.where(
        valid, (levels + 1)[None, None, :].expand(B, W, L), torch.zeros_like(valid, dtype=torch.long)
    )
    occurrence = torch.arange(W, device=items.device)[None, :, None].expand(B, W, L)
    subtree = torch.where(valid, sizes[items], torch.zeros_like(sizes[items]))
    return TokenNodes(
        path.reshape(B, W * L, L),
        depth.reshape(B, W * L),
        occurrence.reshape(B, W * L),
        subtree.reshape(B, W * L),
        valid.reshape(B, W * L),
    )


def prefix_token_nodes(prefix: Tensor, n_items: int, sizes_of_prefix: Tensor, occurrence: int) -> TokenNodes:
    """Nodes of decoder tokens ``[start, c_1, ..., c_m]`` for code prefixes ``prefix`` ``[B, m]``.

    The start token is the root (depth 0, subtree = all items); token ``j >= 1``
    is the node ``prefix[:, :j]``. ``sizes_of_prefix`` ``[B, m]`` holds the
    subtree sizes of those nodes. All tokens share one item ``occurrence``.
    """
    B, m = prefix.shape
    L = max(m, 1)
    depth = torch.arange(m + 1, device=prefix.device)[None, :].expand(B, m + 1)
    levels = torch.arange(L, device=prefix.device)
    path = torch.full((B, m + 1, L), -1, dtype=torch.long, device=prefix.device)
    if m:
        keep = levels[None, :] < depth[0, :, None]  # [m + 1, L]
        full = prefix[:, None, :].expand(B, m + 1, m)
        path[..., :m] = torch.where(keep[None, :, :m], full, torch.full_like(full, -1))
    subtree = torch.cat(
        [torch.full((B, 1), n_items, dtype=torch.long, device=prefix.device), sizes_of_prefix], 1
    )
    occ = torch.full((B, m + 1), occurrence, dtype=torch.long, device=prefix.device)
    return TokenNodes(path, depth, occ, subtree, torch.ones(B, m + 1, dtype=torch.bool, device=prefix.device))


def pad_path(nodes: TokenNodes, L: int) -> TokenNodes:
    """The same nodes with ``path`` widened to ``L`` levels (``-1`` filled)."""
    have = nodes.path.shape[-1]
    if have == L:
        return nodes
    extra = torch.full(
        (*nodes.path.shape[:-1], L - have), -1, dtype=nodes.path.dtype, device=nodes.path.device
    )
    return TokenNodes(
        torch.cat([nodes.path, extra], -1), nodes.depth, nodes.occurrence, nodes.subtree, nodes.valid
    )


def pair_relations(a: TokenNodes, b: TokenNodes) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Pairwise structure between query tokens ``a`` ``[B, Na]`` and key tokens ``b`` ``[B, Nb]``.

    Returns ``(lca, distance, relation, same_item)``, each ``[B, Na, Nb]``:
    LCA depth, tree distance, relation id (``SAME_NODE``, ``ANCESTOR`` — the key
    is an ancestor of the query, ``DESCENDANT``, ``SIBLING``, ``OTHER``) and
    whether both tokens belong to one item occurrence.
    """
    L = max(a.path.shape[-1], b.path.shape[-1])
    a, b = pad_path(a, L), pad_path(b, L)
    da, db = a.depth[:, :, None], b.depth[:, None, :]
    common = torch.minimum(da, db)
    levels = torch.arange(L, device=a.path.device)
    equal = (a.path[:, :, None, :] == b.path[:, None, :, :]) & (levels < common[..., None])
    lca = equal.long().cumprod(-1).sum(-1)
    distance = da + db - 2 * lca
    relation = torch.full_like(lca, OTHER)
    relation = torch.where((lca == da - 1) & (lca == db - 1), torch.full_like(lca, SIBLING), relation)
    relation = torch.where((lca == db) & (db < da), torch.full_like(lca, ANCESTOR), relation)
    relation = torch.where((lca == da) & (db > da), torch.full_like(lca, DESCENDANT), relation)
    relation = torch.where((lca == da) & (lca == db), torch.full_like(lca, SAME_NODE), relation)
    same_item = a.occurrence[:, :, None] == b.occurrence[:, None, :]
    return lca, distance, relation, same_item
