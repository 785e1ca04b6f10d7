"""Brute-force references for the UniCo tests: the full joint table and the truncated factorisation."""

from __future__ import annotations

import itertools

import numpy as np

from causal_ext.unico.network import DiscreteBN


def joint_table(bn: DiscreteBN, do: dict[str, str] | None = None) -> np.ndarray:
    """P(all variables) (axes in ``bn.variables`` order), with ``do`` by the truncated factorisation."""
    names = bn.variables
    fixed = {v: bn.state_index(v, s) for v, s in (do or {}).items()}
    shape = [bn.card(v) for v in names]
    out = np.zeros(shape)
    for idx in itertools.product(*[range(k) for k in shape]):
        a = dict(zip(names, idx))
        p = 1.0
        for v in names:
            if v in fixed:
                p *= float(a[v] == fixed[v])
            else:
                p *= bn.cpts[v][tuple(a[q] for q in bn.parents[v]) + (a[v],)]
        out[idx] = p
    return out


def brute_probability(
    bn: DiscreteBN, event: dict, evidence: dict | None = None, do: dict | None = None
) -> float:
    """P(event | evidence, do) by summing the joint table."""
    table = joint_table(bn, do)
    names = bn.variables

    def mass(assign: dict) -> float:
        idx = tuple(bn.state_index(v, assign[v]) if v in assign else slice(None) for v in names)
        return float(table[idx].sum())

    evidence = evidence or {}
    if any(
        v in evidence and bn.state_index(v, evidence[v]) != bn.state_index(v, s) for v, s in event.items()
    ):
        return 0.0
    return mass({**evidence, **event}) / mass(evidence)
