"""``SIDTrie``: the prefix tree of items' semantic-ID code paths, stored as tensors.

Every real item ``i`` (dense id ``1..n_items``; 0 is padding) has a code path ``codes[i] = (c_0, ..,
c_{L-1})`` with ``c_l`` in ``0..codebook_sizes[l]-1``; paths are unique. The paths form a trie: a node at
depth ``d`` is a distinct prefix of length ``d`` (depth 0 = the root, depth ``L`` = the items).

Representation (no Python object per node):

* nodes at each depth are numbered ``0..n_nodes[d]-1`` in lexicographic order of their prefixes, so the
  children of one node, and of any run of consecutive nodes, are a contiguous id range at the next depth;
* per depth ``d``: ``prefixes(d) [n_nodes[d], d]`` (each node's codes), ``parents(d)`` and ``node_codes(d)``
  (the parent id at depth ``d-1`` and the last code), and the CSR offsets of the children of depth-``d``
  nodes; the leaves (depth ``L``) carry item ids through ``leaf_items``;
* per level ``l`` (the step from depth ``l`` to ``l+1``), a child lookup ``children(l, nodes) -> [..., C_l]``
  giving the next node id for every code (the *item id* at the last level) and ``-1`` where the code is not
  a child. "Allowed next codes" for any batch of nodes is ``children(l, nodes) >= 0``: one gather.

Memory trade-off of the child lookup, per level: a dense table ``[n_nodes[l], C_l]`` of int32 costs
``4 * n_nodes[l] * C_l`` bytes and answers a batch with one row gather; the CSR form (always kept, because
exact scoring walks it) costs ``8 * (n_nodes[l] + 1 + 2 * n_nodes[l+1])`` bytes (offsets, then parent and
code of every child) and answers a batch with a few vectorised ``repeat_interleave``/scatter ops. The dense
table wins while levels are well filled (TIGER's 3 x 256 codes over 1M items: the last level's table is
65,536 x 256 x 4 B = 64 MiB against ~16 MiB of CSR); it loses on sparse deep levels (a 4th level of 256 codes
under ~1M depth-3 nodes: 1 GiB dense against ~24 MiB of CSR). So a level gets its dense table only while that
fits ``dense_max_bytes`` (default 64 MiB) and uses the CSR lookup otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

#: default per-level budget for a dense child table (bytes); larger levels use the CSR lookup
DENSE_MAX_BYTES = 64 << 20


class SIDTrie:
    """Tensor trie over items' semantic-ID paths (build with :meth:`from_codes` or :meth:`from_table`).

    Attributes:
        n_items: number of real items (ids ``1..n_items``).
        depth: code-path length ``L``.
        codebook_sizes: ``C_l`` per level.
        n_nodes: nodes per depth ``0..L`` (``n_nodes[0] == 1``, ``n_nodes[L] == n_items``).
        codes: ``[n_items + 1, L]`` int64 code paths (row 0 = padding, not part of the trie).
        leaf_items: ``[n_items]`` item id of each depth-``L`` node (lexicographic order of paths).
        path_nodes: ``[n_items + 1, L + 1]`` node id at each depth along each item's path (row 0 = -1).
        subtree_items: per depth, ``[n_nodes[d]]`` number of items below each node.
    """

    def __init__(self, codes: Tensor, codebook_sizes: tuple[int, ...], parents: list[Tensor],
                 node_codes: list[Tensor], offsets: list[Tensor], prefixes: list[Tensor],
                 leaf_items: Tensor, path_nodes: Tensor, dense: list[Tensor | None]) -> None:
        """Low-level constructor; use :meth:`from_codes`."""
        self.codes = codes
        self.codebook_sizes = tuple(codebook_sizes)
        self.depth = len(self.codebook_sizes)
        self.n_items = int(codes.shape[0]) - 1
        self._parents = parents          # depth d -> [n_nodes[d]] (index 0 unused: root has no parent)
        self._node_codes = node_codes    # depth d -> [n_nodes[d]] last code
        self._offsets = offsets          # level l -> [n_nodes[l] + 1] child ranges at depth l + 1
        self._offsets_np = [o.cpu().numpy() for o in offsets]
        self._prefixes = prefixes        # depth d -> [n_nodes[d], d]
        self.leaf_items = leaf_items
        self.path_nodes = path_nodes
        self._dense = dense              # level l -> [n_nodes[l], C_l] int32 or None (CSR lookup)
        self.n_nodes = tuple(int(p.shape[0]) for p in prefixes)
        self.subtree_items = [torch.diff(self._offsets_at_depth(d)) for d in range(self.depth + 1)]

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_codes(cls, codes: Any, codebook_sizes: Sequence[int], *,
                   dense_max_bytes: int = DENSE_MAX_BYTES) -> SIDTrie:
        """Build the trie from a code table.

        Args:
            codes: integer array ``[n_items + 1, L]`` (numpy or torch); row 0 (padding) is ignored.
            codebook_sizes: ``C_l`` for each of the ``L`` levels.
            dense_max_bytes: build a level's dense ``[n_nodes, C]`` child table only if it takes at most
                this many bytes (int32); otherwise that level uses the CSR lookup. ``0`` = CSR everywhere.

        Raises:
            ValueError: wrong shape or dtype, a code outside its codebook, or two items with the same path.
        """
        arr = np.asarray(codes.detach().cpu() if isinstance(codes, Tensor) else codes)
        sizes = _check_sizes(codebook_sizes, arr)
        real = arr[1:].astype(np.int64)
        n, depth = real.shape
        for lvl, size in enumerate(sizes):
            bad = np.flatnonzero((real[:, lvl] < 0) | (real[:, lvl] >= size))
            if bad.size:
                raise ValueError(f"codes[{bad[0] + 1}, {lvl}] = {real[bad[0], lvl]} is outside codebook "
                                 f"level {lvl} of size {size}; codes at level l must lie in "
                                 "0..codebook_sizes[l]-1.")
        order = np.lexsort(real.T[::-1])          # items sorted by path, lexicographically
        srt = real[order]
        differs = np.ones((n, depth), dtype=bool)
        differs[1:] = srt[1:] != srt[:-1]
        starts = np.logical_or.accumulate(differs, axis=1)  # starts[i, d-1]: row i opens a depth-d node
        dup = np.flatnonzero(~starts[:, -1])
        if dup.size:
            a, b = order[dup[0] - 1] + 1, order[dup[0]] + 1
            raise ValueError(f"items {a} and {b} share the code path {srt[dup[0]].tolist()}; every item "
                             "needs a unique path (add a disambiguation level to the tokenizer).")
        row_node = [np.zeros(n, dtype=np.int64)] + [np.cumsum(starts[:, d]) - 1 for d in range(depth)]
        parents, node_codes, prefixes = [np.zeros(1, np.int64)], [np.zeros(1, np.int64)], [np.zeros((1, 0),
                                                                                                    np.int64)]
        offsets, dense = [], []
        for d in range(1, depth + 1):
            first = np.flatnonzero(starts[:, d - 1])
            parents.append(row_node[d - 1][first])
            node_codes.append(srt[first, d - 1])
            prefixes.append(srt[first, :d])
            counts = np.bincount(parents[d], minlength=len(prefixes[d - 1]))
            offsets.append(np.concatenate([[0], np.cumsum(counts)]))
        leaf_items = order + 1
        for lvl in range(depth):
            n_here, size = len(prefixes[lvl]), sizes[lvl]
            if 4 * n_here * size > dense_max_bytes:
                dense.append(None)
                continue
            table = np.full((n_here, size), -1, dtype=np.int32)
            child = np.arange(len(prefixes[lvl + 1])) if lvl + 1 < depth else leaf_items
            table[parents[lvl + 1], node_codes[lvl + 1]] = child
            dense.append(torch.from_numpy(table))
        path_nodes = np.full((n + 1, depth + 1), -1, dtype=np.int64)
        path_nodes[leaf_items] = np.stack(row_node, axis=1)
        full = np.zeros((n + 1, depth), dtype=np.int64)
        full[1:] = real
        t = torch.from_numpy
        return cls(t(full), sizes, [t(p) for p in parents], [t(c) for c in node_codes],
                   [t(o) for o in offsets], [t(np.ascontiguousarray(p)) for p in prefixes], t(leaf_items),
                   t(path_nodes), dense)

    @classmethod
    def from_table(cls, table: Any, *, dense_max_bytes: int = DENSE_MAX_BYTES) -> SIDTrie:
        """Build from any object with ``codes`` and ``codebook_sizes`` (e.g. a tokenizer's ``SIDTable``)."""
        for attr in ("codes", "codebook_sizes"):
            if not hasattr(table, attr):
                raise ValueError(f"SIDTrie.from_table: {type(table).__name__} has no attribute {attr!r}; "
                                 "pass an SIDTable (codes [n_items + 1, L], codebook_sizes) or use "
                                 "from_codes.")
        return cls.from_codes(table.codes, table.codebook_sizes, dense_max_bytes=dense_max_bytes)

    # ------------------------------------------------------------------ queries
    @property
    def device(self) -> torch.device:
        """Device of the trie's tensors (decoding runs there)."""
        return self.codes.device

    def to(self, device: torch.device | str) -> SIDTrie:
        """A copy of the trie on ``device`` (``self`` if already there)."""
        device = torch.device(device)
        if device == self.device:
            return self
        def mv(ts: list[Tensor]) -> list[Tensor]:
            return [x.to(device) for x in ts]

        dense = [None if x is None else x.to(device) for x in self._dense]
        return type(self)(self.codes.to(device), self.codebook_sizes, mv(self._parents), mv(self._node_codes),
                          mv(self._offsets), mv(self._prefixes), self.leaf_items.to(device),
                          self.path_nodes.to(device), dense)

    def prefixes(self, depth: int) -> Tensor:
        """``[n_nodes[depth], depth]`` code prefix of every node at ``depth`` (lexicographic order)."""
        return self._prefixes[self._check_depth(depth)]

    def parents(self, depth: int) -> Tensor:
        """``[n_nodes[depth]]`` parent node id (at ``depth - 1``) of every node at ``depth >= 1``."""
        if not 1 <= depth <= self.depth:
            raise ValueError(f"depth={depth}: parents exist for depths 1..{self.depth}.")
        return self._parents[depth]

    def node_codes(self, depth: int) -> Tensor:
        """``[n_nodes[depth]]`` last code of every node at ``depth >= 1`` (the edge from its parent)."""
        if not 1 <= depth <= self.depth:
            raise ValueError(f"depth={depth}: node codes exist for depths 1..{self.depth}.")
        return self._node_codes[depth]

    def child_offsets(self, level: int) -> Tensor:
        """``[n_nodes[level] + 1]``: children of node ``p`` are ids ``offsets[p]:offsets[p + 1]`` at depth
        ``level + 1`` (positions in ``leaf_items`` at the last level)."""
        return self._offsets[self._check_level(level)]

    def child_range(self, level: int, start: int, stop: int) -> tuple[int, int]:
        """Id range at depth ``level + 1`` of the children of nodes ``start:stop`` at depth ``level``."""
        off = self._offsets_np[self._check_level(level)]
        return int(off[start]), int(off[stop])

    def children(self, level: int, nodes: Tensor) -> Tensor:
        """Next ids for every code: ``[*nodes.shape, C_level]`` int64, ``-1`` where absent.

        ``nodes`` are node ids at depth ``level`` (``-1`` = a dead hypothesis: no children). The value is the
        child's node id at depth ``level + 1``, or the item id at the last level.
        """
        level = self._check_level(level)
        shape = nodes.shape
        flat = nodes.reshape(-1)
        alive = flat >= 0
        safe = flat.clamp(min=0)
        table = self._dense[level]
        if table is not None:
            out = table[safe].long()
        else:
            out = self._csr_children(level, safe, alive)
        out = out.masked_fill(~alive[:, None], -1)
        return out.reshape(*shape, self.codebook_sizes[level])

    def child_mask(self, level: int, nodes: Tensor) -> Tensor:
        """``[*nodes.shape, C_level]`` bool: which codes continue a valid path from each node."""
        return self.children(level, nodes) >= 0

    def is_dense(self, level: int) -> bool:
        """Whether ``level`` answers :meth:`children` from a dense table (else CSR)."""
        return self._dense[self._check_level(level)] is not None

    def memory_bytes(self) -> dict[str, int]:
        """Bytes held by the dense child tables, the CSR arrays (offsets, parents, codes, leaf items) and
        the per-node prefixes."""
        def size(ts: list[Tensor]) -> int:
            return sum(t.numel() * t.element_size() for t in ts)

        return {"dense": size([t for t in self._dense if t is not None]),
                "csr": size(self._parents + self._node_codes + self._offsets + [self.leaf_items]),
                "prefixes": size(self._prefixes)}

    def __repr__(self) -> str:
        return (f"SIDTrie(n_items={self.n_items}, codebook_sizes={self.codebook_sizes}, "
                f"n_nodes={self.n_nodes}, dense_levels={[self.is_dense(lv) for lv in range(self.depth)]})")

    # ------------------------------------------------------------------ internals
    def _csr_children(self, level: int, nodes: Tensor, alive: Tensor) -> Tensor:
        off = self._offsets[level]
        starts = off[nodes]
        counts = (off[nodes + 1] - starts) * alive
        rows = torch.repeat_interleave(torch.arange(len(nodes), device=nodes.device), counts)
        first = torch.repeat_interleave(starts - (torch.cumsum(counts, 0) - counts), counts)
        pos = first + torch.arange(len(rows), device=nodes.device)
        value = pos if level + 1 < self.depth else self.leaf_items[pos]
        out = torch.full((len(nodes), self.codebook_sizes[level]), -1, dtype=torch.long, device=nodes.device)
        out[rows, self._node_codes[level + 1][pos]] = value
        return out

    def _offsets_at_depth(self, depth: int) -> Tensor:
        """Leaf ranges of the nodes at ``depth``: composition of child offsets down to the leaves."""
        off = torch.arange(self.n_nodes[depth] + 1)
        for lvl in range(depth, self.depth):
            off = self._offsets[lvl].cpu()[off]
        return off.to(self.device)

    def _check_level(self, level: int) -> int:
        if not 0 <= level < self.depth:
            raise ValueError(f"level={level}: levels run 0..{self.depth - 1} for a depth-{self.depth} trie.")
        return level

    def _check_depth(self, depth: int) -> int:
        if not 0 <= depth <= self.depth:
            raise ValueError(f"depth={depth}: depths run 0..{self.depth} for a depth-{self.depth} trie.")
        return depth


def _check_sizes(codebook_sizes: Sequence[int], arr: np.ndarray) -> tuple[int, ...]:
    if arr.ndim != 2 or arr.shape[0] < 2 or arr.shape[1] < 1:
        raise ValueError(f"codes has shape {arr.shape}; expected [n_items + 1, L] with n_items >= 1 and "
                         "L >= 1 (row 0 = padding item).")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"codes has dtype {arr.dtype}; expected an integer code table.")
    sizes = tuple(int(s) for s in codebook_sizes)
    if len(sizes) != arr.shape[1]:
        raise ValueError(f"codebook_sizes has {len(sizes)} levels but codes has L={arr.shape[1]} columns; "
                         "give one codebook size per level.")
    if min(sizes) < 1:
        raise ValueError(f"codebook_sizes={sizes}: every codebook needs at least one code.")
    return sizes
