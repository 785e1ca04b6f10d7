"""Exact rung-3 inference: abduction, action and prediction on a multi-world (twin) network.

**Which SCM.** A CPT ``P(V | pa)`` fixes the observational and interventional distributions but not
the counterfactual ones; those need a structural causal model. We use the *canonical quantile
coupling*: every variable is ``V := F^{-1}_{V | pa}(U_V)`` (the first state whose cumulative
probability in the row of ``pa`` exceeds ``U_V``), with independent ``U_V ~ Uniform(0, 1)``. This is
exactly what the code rendering of a question executes (``draw(u[V], row)``), so the program is the
mechanism. When ``X`` is a parent of a binary ``Y`` and ``P(y | x, .) >= P(y | x', .)`` in every
configuration of ``Y``'s other parents, this SCM is *monotone* (``Y_x >= Y_x'`` for every ``u``), so
its probabilities of causation are the point-identified values of Tian & Pearl (2000) (e.g.
``PN = [P(y) - P(y_x')] / P(x, y)``); in every case they lie inside the Tian-Pearl bounds
(:func:`pn_ps_bounds`), as for any SCM compatible with the network. A network that
already is deterministic given explicit latent roots (Pearl's firing squad; a two-variable model
with listed response types) is used as is: its CPTs are point masses, so the coupling is trivial
and the counterfactuals are those of that SCM.

**How.** ``U_V`` matters only through the cell of ``[0, 1)`` cut by the cumulative row sums of its
CPT, so it is replaced by a finite exogenous variable over those cells (cell length = probability),
and every copy of ``V`` becomes a deterministic function of its parents' copies and ``U_V``. Worlds
share the ``U``s; a variable gets its own copy in a world only if its value can differ there (it is
intervened on, or one of its parents' copies differs), identical copies are merged (hash-consing),
and a variable with a single copy keeps its original CPT (its ``U`` is summed out). The result is
an ordinary :class:`~causal_ext.unico.network.DiscreteBN` on which
:func:`causal_ext.unico.inference.probability` does the abduction (conditioning on the factual
evidence) and the prediction (the query in another world) in one variable-elimination pass.

Nested counterfactuals such as ``Y_{x1, M_{x0}}`` (natural direct effects) are worlds whose
intervention sets a variable to its value *in another world* (:class:`Link`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from causal_ext.unico.inference import probability
from causal_ext.unico.network import DiscreteBN, State

__all__ = [
    "Link",
    "MultiWorld",
    "counterfactual_probability",
    "ett",
    "multi_world_network",
    "natural_effects",
    "pn_ps_bounds",
    "probabilities_of_causation",
    "quantile_cells",
]

_MERGE = 1e-12


@dataclass(frozen=True)
class Link:
    """An intervention that sets a variable to its value in world ``world`` (for nested counterfactuals)."""

    world: int


def quantile_cells(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The finite exogenous variable of the quantile coupling of one CPT.

    Args:
        table: CPT of shape ``(*parent cards, k)``.

    Returns:
        ``(weights, response)``: cell probabilities (length ``c``, summing to one) and the
        deterministic response ``response[pa..., cell]`` = state index, shape ``(*parent cards, c)``.
    """
    t = np.asarray(table, dtype=float)
    cum = np.cumsum(t, axis=-1)
    cum[..., -1] = 1.0
    cuts = np.unique(np.concatenate([[0.0, 1.0], np.clip(cum[..., :-1].ravel(), 0.0, 1.0)]))
    keep = np.concatenate([[True], np.diff(cuts) > _MERGE])
    cuts = cuts[keep]
    if cuts[-1] < 1.0:
        cuts = np.append(cuts, 1.0)
    else:
        cuts[-1] = 1.0
    weights = np.diff(cuts)
    mids = (cuts[:-1] + cuts[1:]) / 2
    flat = cum.reshape(-1, t.shape[-1])
    resp = np.stack([np.minimum((m >= flat).sum(axis=1), t.shape[-1] - 1) for m in mids], axis=-1)
    return weights, resp.reshape(t.shape[:-1] + (len(mids),))


@dataclass(frozen=True)
class MultiWorld:
    """A network holding several worlds that share their exogenous variables.

    Attributes:
        network: the combined network (copies named ``V@k``, exogenous ``U[V]``).
        nodes: ``nodes[w][V]`` = the name of ``V``'s copy in world ``w``.
    """

    network: DiscreteBN
    nodes: list[dict[str, str]]

    def event(self, world: int, values: Mapping[str, State]) -> dict[str, State]:
        """Translate ``{V: state}`` in world ``world`` to the combined network's node names."""
        unknown = [v for v in values if v not in self.nodes[world]]
        if unknown:
            raise ValueError(f"unknown variables {unknown} in world {world}.")
        return {self.nodes[world][v]: s for v, s in values.items()}


def _conjunction(net: DiscreteBN, *pairs: tuple[str, State]) -> dict[str, int] | None:
    """``{node: state index}`` for all pairs; ``None`` if two pairs disagree on a (merged) node."""
    out: dict[str, int] = {}
    for node, s in pairs:
        i = net.state_index(node, s)
        if out.setdefault(node, i) != i:
            return None
    return out


def _prob(net: DiscreteBN, *pairs: tuple[str, State]) -> float:
    event = _conjunction(net, *pairs)
    return 0.0 if event is None else probability(net, event)


def multi_world_network(bn: DiscreteBN, worlds: Sequence[Mapping[str, State | Link]]) -> MultiWorld:
    """Build the multi-world network of ``bn`` for the given interventions (world 0 is usually factual).

    Args:
        bn: the causal network (read as the quantile-coupled SCM, see the module docstring).
        worlds: one ``{variable: state or Link(w)}`` per world; ``Link(w)`` must point to an earlier world.
    """
    order = bn.topological_order()
    key_of: list[dict[str, tuple]] = []
    for w, do in enumerate(worlds):
        for v, val in do.items():
            bn.state_index(v, 0)  # checks the variable
            if isinstance(val, Link) and not 0 <= val.world < w:
                raise ValueError(f"world {w}: Link({val.world}) for {v!r} must point to an earlier world.")
        keys: dict[str, tuple] = {}
        for v in order:
            if v in do:
                val = do[v]
                keys[v] = key_of[val.world][v] if isinstance(val, Link) else ("do", v, bn.state_index(v, val))
            else:
                keys[v] = ("f", v, tuple(keys[p] for p in bn.parents[v]))
        key_of.append(keys)
    # distinct structural copies per variable decide who needs an explicit U
    copies: dict[str, list[tuple]] = {v: [] for v in order}
    for keys in key_of:
        for v in order:
            k = keys[v]
            if k[0] == "f" and k[1] == v and k not in copies[v]:
                copies[v].append(k)
    names: dict[tuple, str] = {}
    states: dict[str, tuple[str, ...]] = {}
    parents: dict[str, tuple[str, ...]] = {}
    cpts: dict[str, np.ndarray] = {}
    for keys in key_of:
        for v in order:
            k = keys[v]
            if k in names:
                continue
            name = f"{v}@{len([n for n in names if n[1] == v])}"
            names[k] = name
            states[name] = bn.states[v]
            if k[0] == "do":
                parents[name] = ()
                cpts[name] = np.eye(bn.card(v))[k[2]]
                continue
            pnames = tuple(names[pk] for pk in k[2])
            if len(copies[v]) == 1:
                parents[name] = pnames
                cpts[name] = bn.cpts[v]
                continue
            u = f"U[{v}]"
            if u not in states:
                weights, resp = quantile_cells(bn.cpts[v])
                states[u] = tuple(f"c{i}" for i in range(len(weights)))
                parents[u] = ()
                cpts[u] = weights
                cpts[f"__resp_{v}"] = resp
            resp = cpts[f"__resp_{v}"]
            parents[name] = pnames + (u,)
            cpts[name] = np.eye(bn.card(v))[resp]
    cpts = {k: t for k, t in cpts.items() if not k.startswith("__resp_")}
    latent = {n for n in states if n.startswith("U[")} | {names[k[v]] for k in key_of for v in bn.latent}
    net = DiscreteBN(states, parents, cpts, frozenset(latent), f"{bn.name}-worlds")
    nodes = [{v: names[keys[v]] for v in order} for keys in key_of]
    return MultiWorld(net, nodes)


def counterfactual_probability(
    bn: DiscreteBN,
    query: Mapping[str, State],
    do: Mapping[str, State],
    evidence: Mapping[str, State] | None = None,
) -> float:
    """``P(query_{do} | evidence)``: the probability that ``query`` would hold under ``do``, given the
    factual ``evidence`` (abduction on the shared exogenous variables, action, prediction)."""
    mw = multi_world_network(bn, [{}, dict(do)])
    return probability(mw.network, mw.event(1, query), mw.event(0, evidence or {}))


def ett(bn: DiscreteBN, x: str, x1: State, x0: State, y: str, y_state: State) -> float:
    """Effect of treatment on the treated: ``P(Y_{x1}=y | X=x1) - P(Y_{x0}=y | X=x1)``."""
    factual = probability(bn, {y: y_state}, {x: x1})  # consistency: Y_{x1} = Y when X = x1
    return factual - counterfactual_probability(bn, {y: y_state}, {x: x0}, {x: x1})


def natural_effects(
    bn: DiscreteBN, x: str, x1: State, x0: State, m: str, y: str, y_state: State
) -> dict[str, float]:
    """Natural direct and indirect effects of ``X: x0 -> x1`` on ``P(Y = y)`` through mediator ``M``.

    Pearl's (2001) definitions (also CLadder's)::

        NDE = P(Y_{x1, M_{x0}} = y) - P(Y_{x0} = y)
        NIE = P(Y_{x0, M_{x1}} = y) - P(Y_{x0} = y)

    Returns:
        ``{"nde", "nie", "te"}`` with ``te = P(Y_{x1}=y) - P(Y_{x0}=y)``.
    """
    base = probability(bn, {y: y_state}, do={x: x0})
    treated = probability(bn, {y: y_state}, do={x: x1})
    mw = multi_world_network(bn, [{x: x0}, {x: x1, m: Link(0)}, {x: x1}, {x: x0, m: Link(2)}])
    nde_term = probability(mw.network, mw.event(1, {y: y_state}))
    nie_term = probability(mw.network, mw.event(3, {y: y_state}))
    return {"nde": nde_term - base, "nie": nie_term - base, "te": treated - base}


def probabilities_of_causation(
    bn: DiscreteBN, x: str, x_state: State, x_alt: State, y: str, y_state: State
) -> dict[str, float]:
    """PN, PS and PNS of ``X = x`` for ``Y = y`` (``y'`` means ``Y != y``; ``x'`` is ``x_alt``).

    ``PN = P(Y_{x'} != y | X = x, Y = y)``, ``PS = P(Y_x = y | X = x', Y != y)``,
    ``PNS = P(Y_x = y, Y_{x'} != y)``, all under the quantile-coupled SCM.
    """
    yi = bn.state_index(y, y_state)
    other = [s for s in range(bn.card(y)) if s != yi]
    mw = multi_world_network(bn, [{}, {x: x_alt}, {x: x_state}])
    net = mw.network
    y0, y1, y2, x0 = mw.nodes[0][y], mw.nodes[1][y], mw.nodes[2][y], mw.nodes[0][x]
    p_x_y = _prob(net, (x0, x_state), (y0, yi))
    p_ev = sum(_prob(net, (x0, x_alt), (y0, s)) for s in other)
    if p_x_y <= 0 or p_ev <= 0:
        raise ValueError(
            f"PN needs P({x}={x_state!r}, {y}={y_state!r}) > 0 and PS needs "
            f"P({x}={x_alt!r}, {y}!={y_state!r}) > 0; got {p_x_y:.3g} and {p_ev:.3g}."
        )
    pn = sum(_prob(net, (x0, x_state), (y0, yi), (y1, s)) for s in other) / p_x_y
    ps = sum(_prob(net, (x0, x_alt), (y0, s), (y2, yi)) for s in other) / p_ev
    pns = sum(_prob(net, (y2, yi), (y1, s)) for s in other)
    return {"pn": pn, "ps": ps, "pns": pns}


def pn_ps_bounds(
    bn: DiscreteBN, x: str, x_state: State, x_alt: State, y: str, y_state: State
) -> dict[str, tuple[float, float]]:
    """Tian & Pearl (2000) sharp bounds on PN and PS from ``P(x, y)`` and ``P(y_x), P(y_{x'})``.

    Valid for every SCM compatible with ``bn`` when ``X`` has exactly the two states ``x, x'``::

        max(0, [P(y) - P(y_{x'})] / P(x, y)) <= PN <= min(1, [P(y'_{x'}) - P(x', y')] / P(x, y))
        max(0, [P(y_x) - P(y)] / P(x', y')) <= PS <= min(1, [P(y_x) - P(x, y)] / P(x', y'))
    """
    if bn.card(x) != 2:
        raise ValueError(f"the Tian-Pearl bounds need a binary treatment; {x!r} has {bn.card(x)} states.")
    ev = {y: y_state}
    p_y = probability(bn, ev)
    p_xy = probability(bn, {x: x_state, y: y_state})
    p_xpy = probability(bn, {x: x_alt, y: y_state})
    p_x = probability(bn, {x: x_state})
    p_xp_yp = (1 - p_x) - p_xpy
    y_x = probability(bn, ev, do={x: x_state})
    y_xp = probability(bn, ev, do={x: x_alt})
    pn = (max(0.0, (p_y - y_xp) / p_xy), min(1.0, ((1 - y_xp) - p_xp_yp) / p_xy))
    ps = (max(0.0, (y_x - p_y) / p_xp_yp), min(1.0, (y_x - p_xy) / p_xp_yp))
    return {"pn": pn, "ps": ps}
