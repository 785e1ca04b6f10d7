"""Exact rung-1 and rung-2 inference: conditioning by variable elimination, ``do`` by graph surgery.

``P(event | evidence, do(intervention))`` is computed on the mutilated network (the truncated
factorisation: the intervened variables lose their parents and get point-mass CPTs), restricted to
the ancestors of the variables involved (barren nodes sum to one and are dropped), with the CPTs
sliced at the evidence and every other variable summed out by :func:`causal_ext.unico.factors.eliminate`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from causal_ext.unico.factors import Factor, eliminate
from causal_ext.unico.network import DiscreteBN, State

__all__ = ["distribution", "evidence_probability", "joint_distribution", "probability"]


def _factors(bn: DiscreteBN, nodes: set[str], fixed: Mapping[str, int]) -> list[Factor]:
    return [
        Factor(bn.parents[v] + (v,), bn.cpts[v]).reduce(fixed) for v in bn.topological_order() if v in nodes
    ]


def _mass(bn: DiscreteBN, fixed: Mapping[str, int]) -> float:
    """Probability that every variable of ``fixed`` takes its given state (no do)."""
    if not fixed:
        return 1.0
    nodes = bn.ancestors(fixed)
    return float(eliminate(_factors(bn, nodes, fixed), ()).values)


def _merge(
    bn: DiscreteBN, a: Mapping[str, State] | None, b: Mapping[str, State] | None
) -> dict[str, int] | None:
    """Union of two assignments; ``None`` if they disagree on a variable."""
    out = bn.assignment(a)
    for v, i in bn.assignment(b).items():
        if out.get(v, i) != i:
            return None
        out[v] = i
    return out


def evidence_probability(
    bn: DiscreteBN, evidence: Mapping[str, State], do: Mapping[str, State] | None = None
) -> float:
    """``P(evidence | do(...))``."""
    return _mass(bn.mutilate(do), bn.assignment(evidence))


def probability(
    bn: DiscreteBN,
    event: Mapping[str, State],
    evidence: Mapping[str, State] | None = None,
    do: Mapping[str, State] | None = None,
) -> float:
    """``P(event | evidence, do(intervention))``, exactly.

    Args:
        bn: the network.
        event: variable -> state that must all hold.
        evidence: variable -> observed state (conditioning).
        do: variable -> forced state (graph surgery before conditioning).

    Raises:
        ValueError: unknown variables or states, or evidence of probability zero.
    """
    g = bn.mutilate(do)
    ev = g.assignment(evidence)
    both = _merge(g, event, evidence)
    denom = _mass(g, ev)
    if denom <= 0.0:
        raise ValueError(
            f"the evidence {dict(evidence or {})} has probability zero"
            f"{' under do(' + str(dict(do)) + ')' if do else ''}; the conditional is undefined."
        )
    if both is None:
        return 0.0
    return _mass(g, both) / denom


def joint_distribution(
    bn: DiscreteBN,
    targets: Sequence[str],
    evidence: Mapping[str, State] | None = None,
    do: Mapping[str, State] | None = None,
) -> np.ndarray:
    """``P(targets | evidence, do(...))`` as an array with one axis per target (in the given order)."""
    targets = tuple(targets)
    if len(set(targets)) != len(targets) or not targets:
        raise ValueError(f"targets must be a non-empty list of distinct variables; got {targets}.")
    g = bn.mutilate(do)
    ev = g.assignment(evidence)
    clash = [t for t in targets if t in ev]
    if clash:
        raise ValueError(f"targets {clash} are also in the evidence; drop them from one of the two.")
    nodes = g.ancestors(set(targets) | set(ev))
    f = eliminate(_factors(g, nodes, ev), targets)
    total = float(f.values.sum())
    if total <= 0.0:
        raise ValueError(
            f"the evidence {dict(evidence or {})} has probability zero; the conditional is undefined."
        )
    return f.values / total


def distribution(
    bn: DiscreteBN,
    var: str,
    evidence: Mapping[str, State] | None = None,
    do: Mapping[str, State] | None = None,
) -> np.ndarray:
    """``P(var | evidence, do(...))`` as a vector over the states of ``var``."""
    return joint_distribution(bn, (var,), evidence, do)
