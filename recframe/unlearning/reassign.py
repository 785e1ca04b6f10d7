"""TRACER step 1: reassign the concept's (forget) items to code paths that retain items do not share.

Why. Under the original semantic IDs a forget item usually shares its first tokens with retain items, so
pushing its path's probability down (GA, NPO) or masking its tokens (suppression) also pushes down retain
items. TRACER moves the forget items instead: each gets a new, unused path chosen so that as few retain
items as possible share its prefixes. Forgetting then acts on tokens the retain items do not use.

**Assignment rule.** Let ``n_R(p)`` be the number of retain items whose path starts with prefix ``p``. The
*sharing cost* of a full path ``c = (c_0 .. c_{L-1})`` is ``S(c) = sum_{d=1..L} n_R(c[:d])``: each retain
item counted once per level at which it shares the forget item's prefix (a fresh level-0 code costs 0, the
least used one the fewest retain items). Candidates are the free paths (no retain item's path; the forget
items' own old paths are free) in increasing ``S``, enumerated best-first over the code tree (a heap keyed
by ``(S so far, deeper first, codes)``, so zero-cost subtrees are filled before new ones are opened and the
forget items stay grouped under few exclusive prefixes). The first ``max(4 n_F, n_F + 64)`` candidates and
the forget items' old paths enter an assignment problem (``scipy.optimize.linear_sum_assignment``) with cost
``S(c) + mu * hamming(c, old_i) / L``, ``mu = 0.5``: the tie-break keeps an item's old codes where that is
free, and since ``mu < 1`` it never buys a path with a higher sharing cost (costs ``S`` are integers), so
the total sharing cost is the minimum over all collision-free assignments. Retain items never move, and an
assignment is one-to-one over distinct free paths, so two items never share a path (the new
:class:`~recframe.tokenizers.SIDTable` checks it again). The codebooks are not enlarged (a new token would
need an embedding the model never trained).
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

__all__ = [
    "MU",
    "Reassignment",
    "exclusive_roots",
    "prefix_counts",
    "reassign_forget_items",
    "shared_retain_items",
]

#: weight of the keep-the-old-codes tie-break (below 1, so it never trades against a sharing count)
MU = 0.5


def prefix_counts(codes: np.ndarray, items: np.ndarray) -> list[Counter]:
    """Per depth ``d = 1..L`` (list index ``d - 1``), how many of ``items`` have each length-``d`` prefix."""
    rows = np.asarray(codes)[np.asarray(items, dtype=np.int64)]
    return [Counter(map(tuple, rows[:, :d].tolist())) for d in range(1, rows.shape[1] + 1)]


def shared_retain_items(codes: np.ndarray, forget: np.ndarray) -> list[int]:
    """Per depth ``d = 1..L``, the number of retain items that share their length-``d`` prefix with at least
    one forget item (the retain items a token-level intervention on the concept touches)."""
    codes = np.asarray(codes)
    forget = np.asarray(forget, dtype=bool)
    items = np.arange(len(codes))
    retain_items, forget_items = items[1:][~forget[1:]], items[forget]
    out = []
    for d in range(1, codes.shape[1] + 1):
        fset = set(map(tuple, codes[forget_items, :d].tolist()))
        out.append(sum(tuple(r) in fset for r in codes[retain_items, :d].tolist()))
    return out


def exclusive_roots(codes: np.ndarray, forget: np.ndarray) -> list[tuple[int, ...]]:
    """The minimal trie prefixes whose items are all forget items and that cover every forget item.

    For each forget item, its shortest prefix that no retain item shares (its full path at the latest, as
    paths are unique). Sorted, without duplicates.
    """
    codes = np.asarray(codes)
    forget = np.asarray(forget, dtype=bool)
    retain = np.flatnonzero(~forget)
    counts = prefix_counts(codes, retain[retain > 0])
    roots = set()
    for item in np.flatnonzero(forget[1:]) + 1:
        path = tuple(int(c) for c in codes[item])
        for d in range(1, len(path) + 1):
            if counts[d - 1].get(path[:d], 0) == 0:
                roots.add(path[:d])
                break
    return sorted(roots)


@dataclass(frozen=True)
class Reassignment:
    """Result of :func:`reassign_forget_items`.

    Attributes:
        items: the forget items (dense ids), in the order of ``codes``; ``moved`` counts those whose path
            changed.
        codes: ``[len(items), L]`` their new paths.
        sharing_cost: ``sum_i S(new_i)`` (module docstring); ``sharing_cost_before`` the same for the old
            paths.
        shared_before, shared_after: :func:`shared_retain_items` per depth under the old and new table.
    """

    items: np.ndarray
    codes: np.ndarray
    sharing_cost: int
    sharing_cost_before: int
    shared_before: list[int]
    shared_after: list[int]
    n_moved: int = 0

    @property
    def moved(self) -> int:
        """How many forget items got a path other than their old one (set by the caller's table)."""
        return int(self.n_moved)

    def apply(self, codes: np.ndarray) -> np.ndarray:
        """A copy of the full code table ``[n_items + 1, L]`` with the new paths written in."""
        out = np.array(codes, copy=True)
        out[self.items] = self.codes
        return out


def _candidates(
    counts: list[Counter], sizes: tuple[int, ...], limit: int
) -> list[tuple[tuple[int, ...], int]]:
    """Up to ``limit`` free full paths in increasing sharing cost (best-first; module docstring)."""
    depth = len(sizes)
    heap: list[tuple[int, int, tuple[int, ...]]] = [(0, 0, ())]
    out: list[tuple[tuple[int, ...], int]] = []
    while heap and len(out) < limit:
        cost, _, prefix = heapq.heappop(heap)
        if len(prefix) == depth:
            out.append((prefix, cost))
            continue
        level = len(prefix)
        for code in range(sizes[level]):
            child = (*prefix, code)
            n = counts[level].get(child, 0)
            if level == depth - 1 and n:  # a retain item's path: taken
                continue
            heapq.heappush(heap, (cost + n, -(level + 1), child))
    return out


def reassign_forget_items(
    codes: np.ndarray, codebook_sizes: tuple[int, ...], forget: np.ndarray, mu: float = MU
) -> Reassignment:
    """New collision-free paths for the forget items (rule: module docstring).

    Args:
        codes: ``[n_items + 1, L]`` SID table (row 0 padding).
        codebook_sizes: codes per level.
        forget: bool ``[n_items + 1]``, the concept's items (row 0 ignored).
        mu: tie-break weight (``< 1`` keeps the sharing cost minimal).

    Raises:
        ValueError: no forget item, every item is a forget item, or fewer free paths than forget items.
    """
    codes = np.asarray(codes, dtype=np.int64)
    sizes = tuple(int(s) for s in codebook_sizes)
    forget = np.asarray(forget, dtype=bool).copy()
    forget[0] = False
    f_items = np.flatnonzero(forget)
    r_items = np.flatnonzero(~forget)[1:]
    if len(f_items) == 0:
        raise ValueError("reassign_forget_items: the concept holds for no item; nothing to reassign.")
    if len(r_items) == 0:
        raise ValueError("reassign_forget_items: every item is a forget item; nothing would be retained.")
    if not 0 <= mu < 1:
        raise ValueError(
            f"reassign_forget_items: mu={mu}; it must be in [0, 1) to keep the sharing cost minimal."
        )
    counts = prefix_counts(codes, r_items)
    limit = max(4 * len(f_items), len(f_items) + 64)
    cands = _candidates(counts, sizes, limit)
    seen = {p for p, _ in cands}
    for path in map(tuple, codes[f_items].tolist()):  # an old path stays a candidate (kept if cheapest)
        if path not in seen:
            seen.add(path)
            cands.append((path, sum(counts[d - 1].get(path[:d], 0) for d in range(1, len(path) + 1))))
    if len(cands) < len(f_items):
        raise ValueError(
            f"reassign_forget_items: only {len(cands)} free code paths for {len(f_items)} forget "
            f"items (codebook_sizes={sizes}); use a tokenizer with larger codebooks."
        )
    paths = np.array([p for p, _ in cands], dtype=np.int64)
    share = np.array([c for _, c in cands], dtype=np.float64)
    old = codes[f_items]
    hamming = (old[:, None, :] != paths[None, :, :]).sum(-1) / codes.shape[1]
    cost = share[None, :] + mu * hamming
    rows, cols = linear_sum_assignment(cost)
    new = np.empty_like(old)
    new[rows] = paths[cols]

    def sharing(table: np.ndarray) -> int:
        return int(
            sum(counts[d - 1].get(tuple(p[:d]), 0) for p in table.tolist() for d in range(1, len(p) + 1))
        )

    after = codes.copy()
    after[f_items] = new
    return Reassignment(
        items=f_items,
        codes=new,
        sharing_cost=sharing(new),
        sharing_cost_before=sharing(old),
        shared_before=shared_retain_items(codes, forget),
        shared_after=shared_retain_items(after, forget),
        n_moved=int((new != old).any(1).sum()),
    )
