"""Random causal Bayesian networks with nonsense variable names.

:func:`random_network` draws a DAG over ``n`` variables (a random topological order; each earlier
variable becomes a parent with probability ``edge_prob``, at most ``max_parents`` parents) with a
planted *confounded effect* triangle on the first three variables of the order (``Z -> X``,
``Z -> Y``, ``X -> Y``), so every network supports the rung-2 and rung-3 query types that need a
confounder, and CPT rows drawn from a symmetric Dirichlet. Rows are rounded to ``decimals`` places
with every entry at least ``10**-decimals`` (no zero probabilities, so all evidence is possible)
and the rounded network is the one the questions show and the answers use.
"""

from __future__ import annotations

import numpy as np

from causal_ext.unico.names import nonsense_variables
from causal_ext.unico.network import DiscreteBN, quantize_cpt

__all__ = ["random_network"]


def random_network(
    rng: np.random.Generator,
    n_nodes: int = 6,
    *,
    edge_prob: float = 0.4,
    max_parents: int = 3,
    ternary_prob: float = 0.2,
    concentration: float = 0.7,
    decimals: int = 2,
    plant_triangle: bool = True,
    name: str = "random",
) -> DiscreteBN:
    """Sample a random discrete causal network.

    Args:
        rng: random generator (the only source of randomness).
        n_nodes: number of variables (>= 3 when ``plant_triangle``).
        edge_prob: probability of each forward edge beyond the planted ones.
        max_parents: cap on the number of parents (extra edges are dropped at random).
        ternary_prob: probability that a variable has three states instead of two.
        concentration: Dirichlet concentration of CPT rows (below 1: more extreme rows, larger effects).
        decimals: CPT entries are multiples of ``10**-decimals`` and at least that large.
        plant_triangle: force ``v0 -> v1``, ``v0 -> v2``, ``v1 -> v2`` (a confounded effect).
        name: network name.
    """
    if n_nodes < (3 if plant_triangle else 1):
        raise ValueError(f"n_nodes must be >= {3 if plant_triangle else 1}; got {n_nodes}.")
    if not 0 <= edge_prob <= 1 or max_parents < (2 if plant_triangle else 0):
        raise ValueError(f"edge_prob must be in [0, 1] and max_parents >= 2; got {edge_prob}, {max_parents}.")
    cards = [3 if rng.random() < ternary_prob else 2 for _ in range(n_nodes)]
    names, state_names = nonsense_variables(n_nodes, cards, rng)
    parents: dict[str, tuple[str, ...]] = {}
    for j, v in enumerate(names):
        forced = {0: [], 1: [0], 2: [0, 1]}.get(j, []) if plant_triangle else []
        optional = [i for i in range(j) if i not in forced and rng.random() < edge_prob]
        rng.shuffle(optional)
        chosen = sorted(forced + optional[: max(0, max_parents - len(forced))])
        parents[v] = tuple(names[i] for i in chosen)
    cpts = {}
    floor = 10.0**-decimals
    for v, k in zip(names, cards):
        shape = tuple(cards[names.index(p)] for p in parents[v]) + (k,)
        rows = rng.dirichlet(np.full(k, concentration), size=int(np.prod(shape[:-1], dtype=int)))
        rows = floor + rows * (1.0 - k * floor)  # every entry >= one grid step before rounding
        cpts[v] = quantize_cpt(rows.reshape(shape), decimals)
    return DiscreteBN(dict(zip(names, state_names)), parents, cpts, name=name)
