"""Graph queries on a DAG given as ``{node: parents}``: d-separation, backdoor sets, paths, mediators.

* :func:`d_separated` uses the ancestral moral graph (Lauritzen et al. 1990): ``X`` and ``Y`` are
  d-separated by ``Z`` iff they are disconnected in the moralised graph of ``An(X u Y u Z)`` once
  ``Z`` is removed.
* :func:`is_backdoor_set` is Pearl's backdoor criterion: no element of ``Z`` descends from ``X``, and
  ``Z`` d-separates ``X`` from ``Y`` in the graph without the edges out of ``X``.
* :func:`minimum_backdoor_sets` enumerates candidate sets by size among the observed
  non-descendants of ``X`` that are ancestors of ``X`` or ``Y`` (a minimal backdoor set never needs
  any other variable) and returns all valid sets of the smallest size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations

__all__ = [
    "ancestors",
    "children",
    "d_separated",
    "descendants",
    "has_directed_path",
    "is_backdoor_set",
    "mediators",
    "minimum_backdoor_sets",
    "recanting_witnesses",
]

Parents = Mapping[str, Sequence[str]]


def children(parents: Parents) -> dict[str, list[str]]:
    """Node -> its children."""
    out: dict[str, list[str]] = {v: [] for v in parents}
    for v, ps in parents.items():
        for p in ps:
            out[p].append(v)
    return out


def reachable(neighbours: Mapping[str, Sequence[str]], start: Iterable[str]) -> set[str]:
    """Every node reachable from ``start`` along ``neighbours`` (parents or children), ``start`` included."""
    seen: set[str] = set()
    stack = list(start)
    while stack:
        v = stack.pop()
        if v not in seen:
            seen.add(v)
            stack.extend(neighbours[v])
    return seen


def ancestors(parents: Parents, nodes: Iterable[str]) -> set[str]:
    """The nodes and all their ancestors."""
    return reachable(parents, nodes)


def descendants(parents: Parents, nodes: Iterable[str]) -> set[str]:
    """The nodes and all their descendants."""
    return reachable(children(parents), nodes)


def has_directed_path(parents: Parents, x: str, y: str) -> bool:
    """True if there is a directed path ``x -> ... -> y`` of length at least one."""
    return x != y and y in descendants(parents, [x])


def d_separated(parents: Parents, xs: Iterable[str], ys: Iterable[str], zs: Iterable[str] = ()) -> bool:
    """True if every path between ``xs`` and ``ys`` is blocked by ``zs`` in the DAG."""
    xs, ys, zs = set(xs), set(ys), set(zs)
    if xs & ys:
        return False
    keep = ancestors(parents, xs | ys | zs)
    nbrs: dict[str, set[str]] = {v: set() for v in keep}
    for v in keep:
        ps = [p for p in parents[v] if p in keep]
        for p in ps:
            nbrs[v].add(p)
            nbrs[p].add(v)
        for a, b in combinations(ps, 2):  # moralise: marry the parents
            nbrs[a].add(b)
            nbrs[b].add(a)
    seen = set(xs)
    stack = list(xs)
    while stack:
        v = stack.pop()
        for w in nbrs[v]:
            if w in zs or w in seen:
                continue
            if w in ys:
                return False
            seen.add(w)
            stack.append(w)
    return True


def is_backdoor_set(parents: Parents, x: str, y: str, zs: Iterable[str]) -> bool:
    """Pearl's backdoor criterion for the effect of ``x`` on ``y`` with adjustment set ``zs``."""
    zs = set(zs)
    if x in zs or y in zs or zs & descendants(parents, [x]):
        return False
    cut = {v: tuple(p for p in ps if p != x) for v, ps in parents.items()}  # remove edges out of x
    return d_separated(cut, [x], [y], zs)


def minimum_backdoor_sets(
    parents: Parents, x: str, y: str, observed: Iterable[str] | None = None, max_size: int | None = None
) -> list[tuple[str, ...]]:
    """All valid backdoor adjustment sets of the smallest size (sorted tuples, sorted list).

    Args:
        parents: the DAG.
        x: treatment; y: outcome.
        observed: variables that may be adjusted for (default: all).
        max_size: give up above this size (default: no limit).

    Returns:
        ``[]`` if no set of observed variables (up to ``max_size``) satisfies the criterion;
        ``[()]`` if the empty set does.
    """
    allowed = set(parents) if observed is None else set(observed)
    dex = descendants(parents, [x])
    cands = sorted((ancestors(parents, [x, y]) & allowed) - dex - {x, y})
    top = len(cands) if max_size is None else min(max_size, len(cands))
    for k in range(top + 1):
        found = [c for c in combinations(cands, k) if is_backdoor_set(parents, x, y, c)]
        if found:
            return found
    return []


def mediators(parents: Parents, x: str, y: str) -> set[str]:
    """Nodes strictly between ``x`` and ``y`` on some directed path ``x -> ... -> y``."""
    return (descendants(parents, [x]) & ancestors(parents, [y])) - {x, y}


def recanting_witnesses(parents: Parents, x: str, m: str, y: str) -> set[str]:
    """Descendants ``W != x`` of ``x`` that block identification of the natural effects through ``m``.

    ``W`` is a recanting witness (Avin, Shpitser & Pearl 2005) when it lies on a directed path from
    ``x`` that avoids ``m`` and it reaches ``y`` both through ``m`` and around it; the natural direct
    and indirect effects with respect to ``m`` are then not identified, so generators skip such
    triples. With no witness (e.g. every ``x``-descendant that reaches ``y`` around ``m`` does not reach
    ``m``) the mediation formula applies.
    """
    no_m = {v: tuple(p for p in ps if p != m) for v, ps in parents.items() if v != m}
    no_m_children = children(no_m)
    # W reachable from x without passing m
    reach = set()
    stack = list(no_m_children[x])
    while stack:
        v = stack.pop()
        if v not in reach:
            reach.add(v)
            stack.extend(no_m_children[v])
    reach_y_around_m = {w for w in reach if w == y or y in descendants(no_m, [w])}
    to_m = ancestors(parents, [m])
    return {w for w in reach_y_around_m if w in to_m and w != y}
