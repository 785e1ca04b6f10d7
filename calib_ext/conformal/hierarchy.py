"""Label hierarchies (trees) and the tree distance between labels.

A :class:`Hierarchy` is a rooted tree over string node names. It is built either

* from ATC-style codes by prefix (:meth:`Hierarchy.from_atc_codes`): the Anatomical Therapeutic
  Chemical classification nests a code's prefixes of length 1 / 3 / 4 / 5 / 7 -- anatomical group
  (``C``), therapeutic subgroup (``C07``), pharmacological subgroup (``C07A``), chemical subgroup
  (``C07AB``) and substance (``C07AB02``) -- so each prefix's parent is the prefix one level up and
  the anatomical groups hang from one root; or
* from any tree given as a parent map (:meth:`Hierarchy.from_parent_map`): ``{node: parent}`` with
  ``None`` for a top-level node. A parent that is named but has no entry of its own is a top-level
  node. When there are several top-level nodes, they hang from one virtual root, ``ROOT``.

Tree distance is the number of edges on the path between two nodes:

    d(a, b) = depth(a) + depth(b) - 2 * depth(lca(a, b)),

with ``depth(root) = 0`` and ``lca`` the lowest common ancestor. For ATC substances in different
anatomical groups ``d = 10``; for two substances in the same chemical subgroup ``d = 2``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

ROOT = "<root>"
ATC_LEVELS = (1, 3, 4, 5, 7)
# letter, two digits, letter, letter, two digits: the character class of each position of a 7-char ATC code
ATC_PATTERN = re.compile(r"[A-Z](\d\d([A-Z]([A-Z](\d\d)?)?)?)?")


class HierarchyError(ValueError):
    """A tree that is not a tree (cycle, self-parent), a malformed code, or a label not in the tree."""


class Hierarchy:
    """A rooted tree; node names are strings (see the module docstring).

    Attributes:
        parent: ``{node: parent}`` for every node but the root (the root maps to ``None``).
        root: the root's name.
        depth: ``{node: number of edges from the root}``.
    """

    def __init__(self, parent: Mapping[str, str | None], root: str) -> None:
        self.parent: dict[str, str | None] = dict(parent)
        self.root = root
        self.depth: dict[str, int] = {}
        for node in self.parent:
            self._depth_of(node)
        self.children: dict[str, list[str]] = {n: [] for n in self.parent}
        for node, par in self.parent.items():
            if par is not None:
                self.children[par].append(node)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_parent_map(cls, parent: Mapping[str, str | None]) -> Hierarchy:
        """Tree from ``{node: parent}`` (``None`` = top-level).

        Raises:
            HierarchyError: a node is its own parent, or the parent links form a cycle (the message
                lists the cycle), or a name is not a non-empty string.
        """
        if not isinstance(parent, Mapping) or not parent:
            raise HierarchyError("parent map must be a non-empty dict {node: parent or None}.")
        links: dict[str, str | None] = {}
        for node, par in parent.items():
            if not isinstance(node, str) or not node:
                raise HierarchyError(f"parent map key {node!r} is not a non-empty string; "
                                     "name nodes by strings.")
            if par is not None and (not isinstance(par, str) or not par):
                raise HierarchyError(f"parent of {node!r} is {par!r}; give a node name (str) or None for a "
                                     "top-level node.")
            if par == node:
                raise HierarchyError(f"node {node!r} is its own parent; a tree needs a parent above "
                                     "every node.")
            links[node] = par
        for par in list(links.values()):
            if par is not None and par not in links:
                links[par] = None  # a named parent without an entry is a top-level node
        _check_acyclic(links)
        tops = [n for n, p in links.items() if p is None]
        if len(tops) == 1:
            return cls(links, tops[0])
        if ROOT in links:
            raise HierarchyError(f"node name {ROOT!r} is reserved for the virtual root; rename that node.")
        links = {**{n: (ROOT if p is None else p) for n, p in links.items()}, ROOT: None}
        return cls(links, ROOT)

    @classmethod
    def from_atc_codes(cls, codes: Iterable[str], levels: Sequence[int] = ATC_LEVELS) -> Hierarchy:
        """Tree of ATC codes by prefix (levels of length 1/3/4/5/7 by default; module docstring).

        Every prefix of a code at a level length shorter than the code becomes an ancestor node; the
        level-1 prefixes (anatomical groups) hang from the virtual root ``ROOT``.

        Raises:
            HierarchyError: a code whose length is not one of ``levels`` or whose characters do not
                follow the ATC pattern (letter, 2 digits, letter, letter, 2 digits).
        """
        levels = tuple(levels)
        if not levels or list(levels) != sorted(set(levels)) or levels[0] < 1:
            raise HierarchyError(f"levels must be increasing positive prefix lengths; got {levels}.")
        parent: dict[str, str | None] = {ROOT: None}
        standard = levels == ATC_LEVELS
        for raw in codes:
            code = str(raw).strip().upper()
            if len(code) not in levels:
                raise HierarchyError(f"code {raw!r} has length {len(code)}; ATC-style codes have one of the "
                                     f"level lengths {levels}.")
            if standard and not ATC_PATTERN.fullmatch(code):
                raise HierarchyError(f"code {raw!r} is not an ATC code (letter, 2 digits, letter, letter, "
                                     "2 digits, e.g. C07AB02); fix the code or pass levels= for another "
                                     "scheme.")
            prev = ROOT
            for length in levels:
                if length > len(code):
                    break
                node = code[:length]
                parent.setdefault(node, prev)
                prev = node
        if len(parent) == 1:
            raise HierarchyError("no ATC codes given.")
        return cls(parent, ROOT)

    # ------------------------------------------------------------------ queries
    @property
    def nodes(self) -> list[str]:
        """All node names, the root included."""
        return list(self.parent)

    def leaves(self) -> list[str]:
        """Nodes without children."""
        return [n for n, ch in self.children.items() if not ch]

    def path(self, node: str) -> list[str]:
        """``[root, ..., node]``."""
        self.check_labels([node])
        out = [node]
        while self.parent[out[-1]] is not None:
            out.append(self.parent[out[-1]])  # type: ignore[arg-type]
        return out[::-1]

    def descendants(self, node: str) -> list[str]:
        """``node`` and every node below it."""
        self.check_labels([node])
        out, stack = [], [node]
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(self.children[n])
        return out

    def check_labels(self, labels: Iterable[str]) -> None:
        """Raise :class:`HierarchyError` naming the labels that are not nodes of the tree."""
        unknown = [lab for lab in labels if lab not in self.parent]
        if unknown:
            raise HierarchyError(f"{len(unknown)} label(s) not in the hierarchy (e.g. {unknown[:5]}); "
                                 "add them to the parent map / code list, or drop them from the label set.")

    def distance(self, a: str, b: str) -> int:
        """Tree distance ``depth(a) + depth(b) - 2 depth(lca(a, b))`` (edges on the path)."""
        pa, pb = self.path(a), self.path(b)
        common = 0
        for x, y in zip(pa, pb):
            if x != y:
                break
            common += 1
        return len(pa) + len(pb) - 2 * common

    def distance_matrix(self, labels: Sequence[str]) -> np.ndarray:
        """``D[i, j] = distance(labels[i], labels[j])`` as int64 ``[L, L]``.

        Raises:
            HierarchyError: a label is not a node of the tree.
        """
        labels = list(labels)
        self.check_labels(labels)
        index = {n: i for i, n in enumerate(self.parent)}
        paths = [self.path(lab) for lab in labels]
        width = max(len(p) for p in paths)
        ids = np.full((len(labels), width), -1, dtype=np.int64)
        for i, p in enumerate(paths):
            ids[i, : len(p)] = [index[n] for n in p]
        lens = np.array([len(p) for p in paths])
        same = (ids[:, None, :] == ids[None, :, :]) & (ids[:, None, :] >= 0)
        common = np.cumprod(same, axis=2).sum(axis=2)  # length of the shared root path = depth(lca) + 1
        return lens[:, None] + lens[None, :] - 2 * common

    def _depth_of(self, node: str) -> int:
        chain = []
        n: str | None = node
        while n is not None and n not in self.depth:
            chain.append(n)
            n = self.parent[n]
        base = -1 if n is None else self.depth[n]
        for k, m in enumerate(reversed(chain), start=1):
            self.depth[m] = base + k
        return self.depth[node]


def _check_acyclic(links: Mapping[str, str | None]) -> None:
    """Raise :class:`HierarchyError` listing a cycle of parent links, if there is one."""
    state: dict[str, int] = {}  # 1: on the current walk, 2: known to reach a top-level node
    for start in links:
        walk: list[str] = []
        n: str | None = start
        while n is not None and state.get(n) != 2:
            if state.get(n) == 1:
                cycle = walk[walk.index(n):] + [n]
                raise HierarchyError(f"parent links form a cycle: {' -> '.join(cycle)}; a tree needs every "
                                     "node to reach a top-level node (parent None).")
            state[n] = 1
            walk.append(n)
            n = links[n]
        for m in walk:
            state[m] = 2
