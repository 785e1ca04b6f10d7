"""The 18 UniCo query types: what they ask, how a random instance is drawn, the exact answer, shortcuts.

Every type is a :class:`QueryType` (name, rung, answer type, formula) with a sampler (pick roles and
states in a network; ``None`` if the network has no valid instance) and a solver (exact answer,
derivation steps, the linear combination of probabilities behind a rung-1/2 number, and the
shortcut checks). Notation: ``x, x'`` two states of the treatment ``X``; ``y`` a state of the
outcome ``Y``; ``Y_{X=x}`` the counterfactual outcome under ``do(X=x)``; "P(...)" means "P(... = the
given state)".

| # | type | rung | answer |
|---|------|------|--------|
| 1 | marginal | 1 | ``P(Y=y)`` |
| 2 | conditional | 1 | ``P(Y=y | E=e)`` |
| 3 | correlation | 1 | ``P(y | x) - P(y | x')`` |
| 4 | explaining_away | 1 | ``P(a | c, b) - P(a | c)`` for two causes ``A, B`` of ``C`` |
| 5 | independence | 1 | is ``X`` independent of ``Y`` given ``Z`` (d-separation)? |
| 6 | interventional | 2 | ``P(y | do(x))`` |
| 7 | ate | 2 | ``P(y | do(x)) - P(y | do(x'))`` |
| 8 | cate | 2 | ``P(y | do(x), z) - P(y | do(x'), z)``, ``Z`` not a descendant of ``X`` |
| 9 | backdoor_set | 2 | a smallest set satisfying the backdoor criterion for ``(X, Y)`` |
| 10 | collider_bias | 2 | the ATE, given the association ``P(y|x,c) - P(y|x',c)`` in a collider stratum |
| 11 | cde | 2 | ``P(y | do(x, m)) - P(y | do(x', m))`` |
| 12 | simpson | 2 | which of ``do(x)``, ``do(x')`` makes ``y`` likelier, under confounding |
| 13 | counterfactual | 3 | ``P(Y_{X=x'} = y | X=x, E=e)`` |
| 14 | ett | 3 | ``P(Y_{X=x}=y | X=x) - P(Y_{X=x'}=y | X=x)`` |
| 15 | nde | 3 | ``P(Y_{X=x, M=M_{X=x'}}=y) - P(Y_{X=x'}=y)`` |
| 16 | nie | 3 | ``P(Y_{X=x', M=M_{X=x}}=y) - P(Y_{X=x'}=y)`` |
| 17 | pn | 3 | ``P(Y_{X=x'} != y | X=x, Y=y)`` |
| 18 | ps | 3 | ``P(Y_{X=x} = y | X=x', Y != y)`` |

Rung-1 and rung-2 answers are exact variable elimination on the network (rung 2 after graph
surgery). Rung-3 answers are exact abduction-action-prediction on the multi-world network of the
canonical quantile-coupled SCM (:mod:`causal_ext.unico.counterfactual`); ETT, NDE and NIE are only
generated where they are identified (an observed backdoor set exists; no recanting witness), so
there they do not depend on that choice of SCM, while ``counterfactual``, ``pn`` and ``ps`` do and
come with the Tian-Pearl bounds in their ``extra`` field.

**Sampling.** Roles are drawn uniformly among the structurally valid assignments (e.g. ``X`` an
ancestor of ``Y`` for rung-2/3 effects, ``M`` on a directed ``X -> Y`` path, ``C`` a common descendant
of ``X`` and ``Y``); the types in :data:`CONFOUNDED_TYPES` (and ``cde``) prefer confounded pairs, and
``independence`` takes, with probability 0.85, a marginally independent pair and conditions on a common
descendant (opening a collider), so both answers occur. States
of evidence come from one forward sample (the evidence is always possible), other states uniformly.

**Shortcut rules.** An instance is dropped when a check in :data:`RULES` fires, that is when an
answer obtainable without the reasoning the type is about is already right (within ``tolerance``,
default 0.01), or the instance is degenerate. See :data:`RULES` for the list.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from causal_ext.unico import graphs
from causal_ext.unico.counterfactual import (
    counterfactual_probability,
    ett,
    natural_effects,
    pn_ps_bounds,
    probabilities_of_causation,
)
from causal_ext.unico.inference import joint_distribution, probability
from causal_ext.unico.network import DiscreteBN

__all__ = [
    "QUERY_TYPES",
    "RULES",
    "NetInfo",
    "Notation",
    "Query",
    "QueryType",
    "Solution",
    "evaluate_terms",
    "sample_query",
    "solve",
]


# ----------------------------------------------------------------------------- types and rules
@dataclass(frozen=True)
class QueryType:
    """One UniCo query type.

    Attributes:
        name: identifier used in the JSONL ``query_type`` field.
        rung: 1 association, 2 intervention, 3 counterfactual.
        answer_type: ``probability``, ``difference``, ``boolean``, ``state`` or ``set``.
        formula: the estimand in the module's notation.
        title: a short human name.
    """

    name: str
    rung: int
    answer_type: str
    formula: str
    title: str


QUERY_TYPES: dict[str, QueryType] = {
    q.name: q
    for q in (
        QueryType("marginal", 1, "probability", "P(Y=y)", "marginal probability"),
        QueryType("conditional", 1, "probability", "P(Y=y | E=e)", "conditional probability"),
        QueryType(
            "correlation", 1, "difference", "P(Y=y | X=x) - P(Y=y | X=x')", "association (risk difference)"
        ),
        QueryType("explaining_away", 1, "difference", "P(A=a | C=c, B=b) - P(A=a | C=c)", "explaining away"),
        QueryType("independence", 1, "boolean", "X _||_ Y | Z ?", "conditional independence"),
        QueryType("interventional", 2, "probability", "P(Y=y | do(X=x))", "interventional probability"),
        QueryType("ate", 2, "difference", "P(Y=y | do(X=x)) - P(Y=y | do(X=x'))", "average treatment effect"),
        QueryType(
            "cate",
            2,
            "difference",
            "P(Y=y | do(X=x), Z=z) - P(Y=y | do(X=x'), Z=z)",
            "conditional (z-specific) effect",
        ),
        QueryType(
            "backdoor_set",
            2,
            "set",
            "smallest Z with (Y _||_ X | Z) in G_X-underbar, Z ∩ De(X) = {}",
            "backdoor adjustment set",
        ),
        QueryType(
            "collider_bias",
            2,
            "difference",
            "P(Y=y | do(X=x)) - P(Y=y | do(X=x')) given P(y|x,c) - P(y|x',c)",
            "collider (selection) bias",
        ),
        QueryType(
            "cde",
            2,
            "difference",
            "P(Y=y | do(X=x, M=m)) - P(Y=y | do(X=x', M=m))",
            "controlled direct effect",
        ),
        QueryType(
            "simpson", 2, "state", "argmax over {x, x'} of P(Y=y | do(X=.))", "Simpson's-paradox decision"
        ),
        QueryType(
            "counterfactual", 3, "probability", "P(Y_{X=x'}=y | X=x, E=e)", "counterfactual probability"
        ),
        QueryType(
            "ett",
            3,
            "difference",
            "P(Y_{X=x}=y | X=x) - P(Y_{X=x'}=y | X=x)",
            "effect of treatment on the treated",
        ),
        QueryType(
            "nde", 3, "difference", "P(Y_{X=x, M=M_{X=x'}}=y) - P(Y_{X=x'}=y)", "natural direct effect"
        ),
        QueryType(
            "nie", 3, "difference", "P(Y_{X=x', M=M_{X=x}}=y) - P(Y_{X=x'}=y)", "natural indirect effect"
        ),
        QueryType("pn", 3, "probability", "P(Y_{X=x'} != y | X=x, Y=y)", "probability of necessity"),
        QueryType("ps", 3, "probability", "P(Y_{X=x} = y | X=x', Y != y)", "probability of sufficiency"),
    )
}
"""The 18 query types in rung order."""

RULES: dict[str, str] = {
    "lookup": "the answer is a single CPT entry (marginal of a root; conditioning on exactly the parents; "
    "a risk difference of a variable whose only parent is X)",
    "uniform_guess": "1/k (k = number of states) is already right",
    "evidence_irrelevant": "the unconditional probability P(y) is already right",
    "negligible": "the quantity is ~0 although the graph connects the variables (for PN/PS: X=x did not "
    "raise the chance of y), so guessing 0 is right",
    "conditioning_ignored": "the marginal (Z-free) independence answer is already right",
    "unfaithful": "the graph says dependent but the numbers are independent given Z (max gap < tolerance)",
    "rung_collapse": "the associational counterpart (conditioning instead of do) is already right",
    "ate_heuristic": "the population average effect is already right",
    "no_confounding": "the empty set is a valid adjustment set (nothing to adjust for)",
    "parents_heuristic": "'adjust for all observed parents of X' is already a smallest valid set",
    "stratum_heuristic": "the association inside the collider stratum is already the causal effect",
    "total_effect": "the total effect (ATE) is already right",
    "no_reversal": "the aggregate association already picks the better action (no Simpson reversal)",
    "tie": "the two actions are within tolerance of each other",
    "rung2_heuristic": "the interventional P(y | do(x')), which ignores the evidence, is already right",
    "conditional_heuristic": "the matching observational conditional probability is already right",
}
"""Shortcut and degeneracy rules (name -> what fires it)."""


# ----------------------------------------------------------------------------- notation
class Notation:
    """How variables and states are written in formulas (derivations, symbolic questions).

    Args:
        bn: the network.
        symbols: variable -> symbol; ``None`` writes the variable names.
        state_index: write states by index (symbolic rendering) instead of by name.
    """

    def __init__(self, bn: DiscreteBN, symbols: Mapping[str, str] | None = None, state_index: bool = False):
        self.bn, self.symbols, self.state_index = bn, dict(symbols or {}), state_index

    def v(self, var: str) -> str:
        """A variable."""
        return self.symbols.get(var, var)

    def s(self, var: str, state: str) -> str:
        """A state of ``var``."""
        return str(self.bn.state_index(var, state)) if self.state_index else state

    def e(self, var: str, state: str, op: str = "=") -> str:
        """``V=s``."""
        return f"{self.v(var)}{op}{self.s(var, state)}"

    def events(self, pairs: Sequence[tuple[str, str]]) -> str:
        """``A=a, B=b``."""
        return ", ".join(self.e(v, s) for v, s in pairs)

    def p(
        self,
        event: Sequence[tuple[str, str]],
        given: Sequence[tuple[str, str]] = (),
        do: Sequence[tuple[str, str]] = (),
    ) -> str:
        """``P(event | do(...), given)``."""
        cond = ([f"do({self.events(do)})"] if do else []) + ([self.events(given)] if given else [])
        return f"P({self.events(event)}{' | ' + ', '.join(cond) if cond else ''})"

    def cf(
        self,
        y: str,
        y_state: str,
        do: Sequence[tuple[str, str]],
        given: Sequence[tuple[str, str]] = (),
        op: str = "=",
    ) -> str:
        """``P(Y_{X=x} = y | given)``."""
        sub = ", ".join(self.e(v, s) for v, s in do)
        tail = f" | {self.events(given)}" if given else ""
        return f"P({self.v(y)}_{{{sub}}}{op}{self.s(y, y_state)}{tail})"

    def nested(self, y: str, y_state: str, x: str, x_state: str, m: str, m_world: str) -> str:
        """``P(Y_{X=x, M=M_{X=x*}} = y)``."""
        return (
            f"P({self.v(y)}_{{{self.e(x, x_state)}, {self.v(m)}={self.v(m)}_{{{self.e(x, m_world)}}}}}"
            f"={self.s(y, y_state)})"
        )


Expr = Callable[[Notation], str]
"""A formula, written in some notation."""


# ----------------------------------------------------------------------------- queries and solutions
@dataclass(frozen=True)
class Query:
    """One instance of a query type in one network.

    Attributes:
        type: a key of :data:`QUERY_TYPES`.
        roles: role -> variable (``X``, ``Y``, ``Z``, ``M``, ``C``, ``A``, ``B``).
        states: state symbol -> state name (``x``, ``x'``, ``y``, ``z``, ``m``, ``c``, ``a``, ``b``).
        evidence: further observed ``{variable: state}`` (conditional and counterfactual types).
        given: conditioning set of the independence type.
    """

    type: str
    roles: Mapping[str, str]
    states: Mapping[str, str] = field(default_factory=dict)
    evidence: Mapping[str, str] = field(default_factory=dict)
    given: tuple[str, ...] = ()

    @property
    def key(self) -> tuple:
        """Hashable identity (for de-duplication)."""
        return (
            self.type,
            tuple(sorted(self.roles.items())),
            tuple(sorted(self.states.items())),
            tuple(sorted(self.evidence.items())),
            tuple(self.given),
        )

    def variables(self) -> set[str]:
        """Every variable the query mentions."""
        return set(self.roles.values()) | set(self.evidence) | set(self.given)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "roles": dict(self.roles),
            "states": dict(self.states),
            "evidence": dict(self.evidence),
            "given": list(self.given),
        }


@dataclass
class Solution:
    """An exactly answered query with its derivation and shortcut checks.

    Attributes:
        query: the query.
        answer: float (probability / difference), bool, state name, or sorted list of variables.
        accepted: every correct answer (several only for ``backdoor_set``).
        steps: derivation: (formula, value) pairs, in order.
        terms: rung-1/2 numbers as ``sum coef * P(event | evidence, do)`` (JSON-ready), else ``None``.
        checks: rule -> {"value": heuristic value or None, "fired": bool}.
        extra: type-specific facts (e.g. Tian-Pearl bounds).
    """

    query: Query
    answer: Any
    accepted: list[Any]
    steps: list[tuple[Expr, Any]]
    terms: list[dict[str, Any]] | None
    checks: dict[str, dict[str, Any]]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def dropped_by(self) -> list[str]:
        """The rules that fired."""
        return [r for r, c in self.checks.items() if c["fired"]]


def _term(
    coef: float,
    event: Mapping[str, str],
    evidence: Mapping[str, str] | None = None,
    do: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    return {"coef": coef, "event": dict(event), "evidence": dict(evidence or {}), "do": dict(do or {})}


def evaluate_terms(bn: DiscreteBN, terms: Sequence[Mapping[str, Any]]) -> float:
    """``sum coef * P(event | evidence, do)`` (how rung-1/2 answers are assembled)."""
    return float(sum(t["coef"] * probability(bn, t["event"], t["evidence"], t["do"]) for t in terms))


def _check(value: Any, fired: bool) -> dict[str, Any]:
    return {"value": value, "fired": bool(fired)}


def _close(a: float | None, b: float | None, tol: float) -> bool:
    return a is not None and b is not None and abs(a - b) < tol


def _safe_prob(bn: DiscreteBN, event, evidence=None, do=None) -> float | None:
    try:
        return probability(bn, event, evidence, do)
    except ValueError:  # zero-probability conditioning: the heuristic is undefined
        return None


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


# ----------------------------------------------------------------------------- network facts
class NetInfo:
    """Cached graph facts of one network used by the samplers."""

    def __init__(self, bn: DiscreteBN):
        self.bn = bn
        self.obs = bn.observed
        self.parents = bn.parents
        self.de = {v: bn.descendants([v]) for v in bn.variables}
        self.an = {v: bn.ancestors([v]) for v in bn.variables}
        self.causal_pairs = [(x, y) for x in self.obs for y in self.obs if x != y and y in self.de[x]]
        self._backdoor: dict[tuple[str, str], list[tuple[str, ...]]] = {}

    def backdoor(self, x: str, y: str) -> list[tuple[str, ...]]:
        """Smallest valid backdoor sets among the observed variables (cached)."""
        if (x, y) not in self._backdoor:
            self._backdoor[(x, y)] = graphs.minimum_backdoor_sets(self.parents, x, y, self.obs, max_size=4)
        return self._backdoor[(x, y)]

    def adjacent(self, a: str, b: str) -> bool:
        """True if ``a -> b`` or ``b -> a``."""
        return a in self.parents[b] or b in self.parents[a]

    def dsep(self, xs, ys, zs=()) -> bool:
        """d-separation in the network's graph."""
        return graphs.d_separated(self.parents, xs, ys, zs)


def _pick(rng: np.random.Generator, seq: Sequence[Any]) -> Any:
    return seq[int(rng.integers(len(seq)))]


def _state(rng: np.random.Generator, bn: DiscreteBN, var: str) -> str:
    return _pick(rng, bn.states[var])


def _two_states(rng: np.random.Generator, bn: DiscreteBN, var: str) -> tuple[str, str]:
    a, b = rng.choice(bn.card(var), size=2, replace=False)
    return bn.states[var][int(a)], bn.states[var][int(b)]


def _observe(rng: np.random.Generator, bn: DiscreteBN, variables: Sequence[str]) -> dict[str, str]:
    """States of ``variables`` in one forward sample (so the observation has positive probability)."""
    row = bn.sample(1, rng)
    return {v: bn.states[v][int(row[v][0])] for v in variables}


# ----------------------------------------------------------------------------- samplers
def _sample(info: NetInfo, qtype: str, rng: np.random.Generator) -> Query | None:
    bn, obs = info.bn, info.obs
    pairs = info.causal_pairs
    if qtype == "marginal":
        y = _pick(rng, obs)
        return Query(qtype, {"Y": y}, {"y": _state(rng, bn, y)})
    if qtype == "conditional":
        y = _pick(rng, obs)
        pool = [v for v in obs if v != y and not info.dsep([v], [y])]
        if not pool:
            return None
        k = min(len(pool), 1 + int(rng.random() < 0.5))
        ev_vars = [pool[i] for i in sorted(rng.choice(len(pool), size=k, replace=False))]
        return Query(qtype, {"Y": y}, {"y": _state(rng, bn, y)}, _observe(rng, bn, ev_vars))
    if qtype == "correlation":
        cands = [(x, y) for x in obs for y in obs if x != y and not info.dsep([x], [y])]
        if not cands:
            return None
        x, y = _pick(rng, cands)
        xs = _two_states(rng, bn, x)
        return Query(qtype, {"X": x, "Y": y}, {"x": xs[0], "x'": xs[1], "y": _state(rng, bn, y)})
    if qtype == "explaining_away":
        cands = [
            (a, b, c)
            for c in obs
            for a, b in combinations([p for p in bn.parents[c] if p in obs], 2)
            if info.dsep([a], [b])
        ]
        if not cands:
            return None
        a, b, c = _pick(rng, cands)
        if rng.random() < 0.5:
            a, b = b, a
        seen = _observe(rng, bn, [b, c])
        return Query(qtype, {"A": a, "B": b, "C": c}, {"a": _state(rng, bn, a), "b": seen[b], "c": seen[c]})
    if qtype == "independence":
        cands = [(x, y) for i, x in enumerate(obs) for y in obs[i + 1 :] if not info.adjacent(x, y)]
        if not cands:
            return None
        opening = [
            (x, y, c)
            for x, y in cands
            if info.dsep([x], [y])
            for c in sorted((info.de[x] & info.de[y]) & set(obs) - {x, y})
        ]
        if opening and rng.random() < 0.85:  # mostly: an independent pair given a common descendant
            x, y, c = _pick(rng, opening)
            return Query(qtype, {"X": x, "Y": y}, given=(c,))
        x, y = _pick(rng, cands)
        pool = sorted(((info.an[x] | info.an[y]) | (info.de[x] & info.de[y])) & set(obs) - {x, y})
        if not pool:
            return None
        k = min(len(pool), 1 + int(rng.random() < 0.3))
        given = tuple(pool[i] for i in sorted(rng.choice(len(pool), size=k, replace=False)))
        return Query(qtype, {"X": x, "Y": y}, given=given)
    if qtype in (
        "interventional",
        "ate",
        "simpson",
        "ett",
        "pn",
        "ps",
        "backdoor_set",
        "cate",
        "counterfactual",
    ):
        cands = pairs
        if qtype in ("pn", "ps"):
            cands = [(x, y) for x, y in pairs if bn.card(x) == 2]
        if qtype == "cate":
            cands = [(x, y) for x, y in cands if _cate_covariates(info, x, y)]
        if qtype in ("ett", "simpson", "backdoor_set"):
            cands = [(x, y) for x, y in cands if info.backdoor(x, y)]
        if qtype in CONFOUNDED_TYPES:
            cands = _prefer_confounded(info, cands, require=qtype in ("simpson", "backdoor_set"))
        if not cands:
            return None
        x, y = _pick(rng, cands)
        if qtype == "backdoor_set":
            return Query(qtype, {"X": x, "Y": y})
        xs = _two_states(rng, bn, x)
        st = {"x": xs[0], "x'": xs[1], "y": _state(rng, bn, y)}
        if qtype == "interventional":
            return Query(qtype, {"X": x, "Y": y}, {"x": xs[0], "y": st["y"]})
        if qtype == "cate":
            z = _pick(rng, _cate_covariates(info, x, y))
            return Query(qtype, {"X": x, "Y": y, "Z": z}, {**st, "z": _observe(rng, bn, [z])[z]})
        if qtype == "counterfactual":
            others = [v for v in obs if v != x]
            e = y if rng.random() < 0.5 else _pick(rng, others)
            seen = _observe(rng, bn, [x, e])
            x_alt = _pick(rng, [s for s in bn.states[x] if s != seen[x]])
            return Query(qtype, {"X": x, "Y": y}, {"x": seen[x], "x'": x_alt, "y": st["y"]}, {e: seen[e]})
        if qtype in ("pn", "ps"):
            seen = _observe(rng, bn, [x, y])  # a factual (x, y) that occurs
            x_alt = _pick(rng, [s for s in bn.states[x] if s != seen[x]])
            return Query(qtype, {"X": x, "Y": y}, {"x": seen[x], "x'": x_alt, "y": seen[y]})
        return Query(qtype, {"X": x, "Y": y}, st)
    if qtype == "collider_bias":
        cands = [
            (x, y, c)
            for x in obs
            for y in obs
            if x != y and x not in info.de[y]
            for c in sorted((info.de[x] & info.de[y]) & set(obs) - {x, y})
        ]
        if not cands:
            return None
        x, y, c = _pick(rng, cands)
        xs = _two_states(rng, bn, x)
        return Query(
            qtype,
            {"X": x, "Y": y, "C": c},
            {"x": xs[0], "x'": xs[1], "y": _state(rng, bn, y), "c": _observe(rng, bn, [c])[c]},
        )
    if qtype in ("cde", "nde", "nie"):
        cands = [(x, m, y) for x, y in pairs for m in sorted(graphs.mediators(info.parents, x, y) & set(obs))]
        if qtype != "cde":
            cands = [
                (x, m, y)
                for x, m, y in cands
                if not graphs.recanting_witnesses(info.parents, x, m, y) and info.backdoor(x, y)
            ]
        else:
            confounded = [
                (x, m, y) for x, m, y in cands if info.backdoor(x, y) != [()] or info.backdoor(m, y) != [()]
            ]
            cands = confounded or cands
        if not cands:
            return None
        x, m, y = _pick(rng, cands)
        xs = _two_states(rng, bn, x)
        st = {"x": xs[0], "x'": xs[1], "y": _state(rng, bn, y)}
        if qtype == "cde":
            st["m"] = _state(rng, bn, m)
        return Query(qtype, {"X": x, "M": m, "Y": y}, st)
    raise ValueError(f"unknown query type {qtype!r}; known: {list(QUERY_TYPES)}.")


CONFOUNDED_TYPES = ("interventional", "ate", "cate", "ett", "backdoor_set", "simpson")
"""Types whose sampler prefers confounded pairs (the empty set is not a valid backdoor set): without
confounding their rung-2/3 answer equals a rung-1 quantity, which the shortcut filter would drop."""


def _prefer_confounded(info: NetInfo, pairs: list[tuple[str, str]], require: bool) -> list[tuple[str, str]]:
    """The confounded pairs among ``pairs`` if any (or always, with ``require``), else ``pairs``."""
    confounded = [(x, y) for x, y in pairs if info.backdoor(x, y) != [()]]
    return confounded if confounded or require else pairs


def _cate_covariates(info: NetInfo, x: str, y: str) -> list[str]:
    """Observed ancestors of ``X`` or ``Y`` that do not descend from ``X`` (the covariates of a CATE),
    preferring those that do not block every backdoor path on their own (otherwise the z-specific
    effect is the z-specific association and the item collapses to rung 1)."""
    cov = sorted((info.an[x] | info.an[y]) & set(info.obs) - info.de[x] - {y})
    open_ = [z for z in cov if not graphs.is_backdoor_set(info.parents, x, y, [z])]
    return open_ or cov


def sample_query(
    bn: DiscreteBN, qtype: str, rng: np.random.Generator, info: NetInfo | None = None
) -> Query | None:
    """A random instance of ``qtype`` in ``bn`` (``None`` if the network has none)."""
    if qtype not in QUERY_TYPES:
        raise ValueError(f"unknown query type {qtype!r}; known: {list(QUERY_TYPES)}.")
    return _sample(info or NetInfo(bn), qtype, rng)


# ----------------------------------------------------------------------------- solvers
def _has_path_avoiding(parents, x: str, y: str, m: str) -> bool:
    cut = {v: tuple(p for p in ps if p != m) for v, ps in parents.items() if v != m}
    return graphs.has_directed_path(cut, x, y)


def solve(bn: DiscreteBN, query: Query, tolerance: float = 0.01, info: NetInfo | None = None) -> Solution:
    """Answer ``query`` exactly and run its shortcut checks.

    Raises:
        ValueError: an unknown type, or a query whose own evidence has probability zero.
    """
    info = info or NetInfo(bn)
    t, r, s, tol = query.type, query.roles, query.states, tolerance
    X, Y = r.get("X"), r.get("Y")
    x, xp, y = s.get("x"), s.get("x'"), s.get("y")
    ex, exp_, ey = ((X, x),), ((X, xp),), ((Y, y),)
    steps: list[tuple[Expr, Any]] = []
    checks: dict[str, dict[str, Any]] = {}
    extra: dict[str, Any] = {}
    terms: list[dict[str, Any]] | None = None

    if t == "marginal":
        ans = probability(bn, {Y: y})
        terms = [_term(1, {Y: y})]
        steps.append((lambda n: n.p(ey), ans))
        k = bn.card(Y)
        checks["lookup"] = _check(None, not bn.parents[Y])
        checks["uniform_guess"] = _check(1 / k, _close(ans, 1 / k, tol))
    elif t == "conditional":
        ev = dict(query.evidence)
        ans = probability(bn, {Y: y}, ev)
        terms = [_term(1, {Y: y}, ev)]
        ev_pairs = tuple(ev.items())
        steps.append((lambda n: n.p(ey, ev_pairs), ans))
        base = probability(bn, {Y: y})
        checks["lookup"] = _check(None, set(ev) == set(bn.parents[Y]))
        checks["evidence_irrelevant"] = _check(base, _close(ans, base, tol))
    elif t == "correlation":
        a, b = probability(bn, {Y: y}, {X: x}), probability(bn, {Y: y}, {X: xp})
        ans = a - b
        terms = [_term(1, {Y: y}, {X: x}), _term(-1, {Y: y}, {X: xp})]
        steps += [(lambda n: n.p(ey, ex), a), (lambda n: n.p(ey, exp_), b)]
        checks["lookup"] = _check(None, bn.parents[Y] == (X,))
        checks["negligible"] = _check(0.0, abs(ans) < tol)
    elif t == "explaining_away":
        A, B, C = r["A"], r["B"], r["C"]
        ea, eb, ec = ((A, s["a"]),), ((B, s["b"]),), ((C, s["c"]),)
        a = probability(bn, {A: s["a"]}, {C: s["c"], B: s["b"]})
        b = probability(bn, {A: s["a"]}, {C: s["c"]})
        ans = a - b
        terms = [_term(1, {A: s["a"]}, {C: s["c"], B: s["b"]}), _term(-1, {A: s["a"]}, {C: s["c"]})]
        steps += [(lambda n: n.p(ea, ec + eb), a), (lambda n: n.p(ea, ec), b)]
        checks["negligible"] = _check(0.0, abs(ans) < tol)
    elif t == "independence":
        Z = list(query.given)
        ans = info.dsep([X], [Y], Z)
        marginal = info.dsep([X], [Y])
        checks["conditioning_ignored"] = _check(marginal, marginal == ans)
        gap = _independence_gap(bn, X, Y, Z)
        extra["max_dependence_gap"] = gap
        checks["unfaithful"] = _check(gap, (not ans) and gap < tol)
        steps.append((lambda n: f"d-separated({n.v(X)}, {n.v(Y)} | {', '.join(n.v(z) for z in Z)})", ans))
        steps.append((lambda n: f"max |P({n.v(X)},{n.v(Y)} | z) - P({n.v(X)} | z) P({n.v(Y)} | z)|", gap))
    elif t == "interventional":
        ans = probability(bn, {Y: y}, do={X: x})
        terms = [_term(1, {Y: y}, do={X: x})]
        obs_ = _safe_prob(bn, {Y: y}, {X: x})
        steps.append((lambda n: n.p(ey, do=ex), ans))
        checks["rung_collapse"] = _check(obs_, _close(ans, obs_, tol))
    elif t in ("ate", "collider_bias"):
        a, b = probability(bn, {Y: y}, do={X: x}), probability(bn, {Y: y}, do={X: xp})
        ans = a - b
        terms = [_term(1, {Y: y}, do={X: x}), _term(-1, {Y: y}, do={X: xp})]
        steps += [(lambda n: n.p(ey, do=ex), a), (lambda n: n.p(ey, do=exp_), b)]
        if t == "ate":
            assoc = _diff(_safe_prob(bn, {Y: y}, {X: x}), _safe_prob(bn, {Y: y}, {X: xp}))
            checks["rung_collapse"] = _check(assoc, _close(ans, assoc, tol))
            checks["negligible"] = _check(0.0, abs(ans) < tol)
        else:
            C, c = r["C"], s["c"]
            strat = _diff(_safe_prob(bn, {Y: y}, {X: x, C: c}), _safe_prob(bn, {Y: y}, {X: xp, C: c}))
            extra["stratum_association"] = strat
            extra["causal_path"] = Y in info.de[X]
            checks["stratum_heuristic"] = _check(strat, strat is None or _close(ans, strat, tol))
    elif t == "cate":
        Z, z = r["Z"], s["z"]
        ez = ((Z, z),)
        a, b = probability(bn, {Y: y}, {Z: z}, {X: x}), probability(bn, {Y: y}, {Z: z}, {X: xp})
        ans = a - b
        terms = [_term(1, {Y: y}, {Z: z}, {X: x}), _term(-1, {Y: y}, {Z: z}, {X: xp})]
        steps += [(lambda n: n.p(ey, ez, ex), a), (lambda n: n.p(ey, ez, exp_), b)]
        assoc = _diff(_safe_prob(bn, {Y: y}, {X: x, Z: z}), _safe_prob(bn, {Y: y}, {X: xp, Z: z}))
        ate_ = probability(bn, {Y: y}, do={X: x}) - probability(bn, {Y: y}, do={X: xp})
        checks["rung_collapse"] = _check(assoc, _close(ans, assoc, tol))
        checks["ate_heuristic"] = _check(ate_, _close(ans, ate_, tol))
        checks["negligible"] = _check(0.0, abs(ans) < tol)
    elif t == "backdoor_set":
        sets = info.backdoor(X, Y)
        if not sets:
            raise ValueError(f"no observed backdoor set exists for ({X}, {Y}).")
        ans = sorted(sets[0])
        accepted = [sorted(c) for c in sets]
        pa = sorted(p for p in bn.parents[X] if p in info.obs)
        par_ok = len(pa) == len(sets[0]) and graphs.is_backdoor_set(info.parents, X, Y, pa)
        checks["no_confounding"] = _check([], sets == [()])
        checks["parents_heuristic"] = _check(pa, par_ok)
        # the adjustment formula with the answer reproduces P(y | do(x)) (checked on the first states)
        x0, y0 = bn.states[X][0], bn.states[Y][0]
        target = probability(bn, {Y: y0}, do={X: x0})
        adj = _adjust(bn, X, x0, Y, y0, ans)
        if abs(adj - target) > 1e-9:
            raise AssertionError(f"backdoor set {ans} fails the adjustment identity ({adj} vs {target}).")
        zs = tuple(ans)
        steps.append((lambda n: f"backdoor criterion holds for {{{', '.join(n.v(z) for z in zs)}}}", True))
        steps.append(
            (
                lambda n: f"{n.p(((Y, y0),), do=((X, x0),))} = sum_z P({n.e(Y, y0)} | {n.e(X, x0)}, z) P(z)",
                target,
            )
        )
        extra["all_minimum_sets"] = accepted
        return Solution(query, ans, accepted, steps, None, checks, extra)
    elif t == "cde":
        M, m = r["M"], s["m"]
        a = probability(bn, {Y: y}, do={X: x, M: m})
        b = probability(bn, {Y: y}, do={X: xp, M: m})
        ans = a - b
        terms = [_term(1, {Y: y}, do={X: x, M: m}), _term(-1, {Y: y}, do={X: xp, M: m})]
        em = ((M, m),)
        steps += [(lambda n: n.p(ey, do=ex + em), a), (lambda n: n.p(ey, do=exp_ + em), b)]
        assoc = _diff(_safe_prob(bn, {Y: y}, {X: x, M: m}), _safe_prob(bn, {Y: y}, {X: xp, M: m}))
        ate_ = probability(bn, {Y: y}, do={X: x}) - probability(bn, {Y: y}, do={X: xp})
        checks["rung_collapse"] = _check(assoc, _close(ans, assoc, tol))
        checks["total_effect"] = _check(ate_, _close(ans, ate_, tol))
    elif t == "simpson":
        a, b = probability(bn, {Y: y}, do={X: x}), probability(bn, {Y: y}, do={X: xp})
        ans = x if a >= b else xp
        terms = None
        steps += [(lambda n: n.p(ey, do=ex), a), (lambda n: n.p(ey, do=exp_), b)]
        ca, cb = _safe_prob(bn, {Y: y}, {X: x}), _safe_prob(bn, {Y: y}, {X: xp})
        naive = None if ca is None or cb is None else (x if ca >= cb else xp)
        extra.update({"p_do": {x: a, xp: b}, "p_obs": {x: ca, xp: cb}})
        checks["no_reversal"] = _check(naive, naive == ans)
        checks["tie"] = _check(a - b, abs(a - b) < tol)
    elif t == "counterfactual":
        ev = {X: x, **dict(query.evidence)}
        ans = counterfactual_probability(bn, {Y: y}, {X: xp}, ev)
        ev_pairs = tuple(ev.items())
        steps.append((lambda n: n.cf(Y, y, exp_, ev_pairs), ans))
        rung2 = probability(bn, {Y: y}, do={X: xp})
        rest = {k: v for k, v in ev.items() if k != X}
        cond = 1.0 * (rest[Y] == y) if Y in rest else _safe_prob(bn, {Y: y}, {X: xp, **rest})
        checks["rung2_heuristic"] = _check(rung2, _close(ans, rung2, tol))
        checks["conditional_heuristic"] = _check(cond, _close(ans, cond, tol))
    elif t == "ett":
        ans = ett(bn, X, x, xp, Y, y)
        fac = probability(bn, {Y: y}, {X: x})
        zs = info.backdoor(X, Y)[0]
        cf_ = fac - ans
        extra["backdoor_formula"] = fac - _adjust(bn, X, xp, Y, y, zs, weights_given={X: x})
        extra["adjustment_set"] = list(zs)
        steps += [(lambda n: n.cf(Y, y, ex, ex), fac), (lambda n: n.cf(Y, y, exp_, ex), cf_)]
        ate_ = probability(bn, {Y: y}, do={X: x}) - probability(bn, {Y: y}, do={X: xp})
        checks["ate_heuristic"] = _check(ate_, _close(ans, ate_, tol))
        checks["negligible"] = _check(0.0, abs(ans) < tol)
    elif t in ("nde", "nie"):
        M = r["M"]
        eff = natural_effects(bn, X, x, xp, M, Y, y)  # treatment x, reference x'
        ans, te = eff[t], eff["te"]
        base = probability(bn, {Y: y}, do={X: xp})
        if t == "nde":
            steps.append((lambda n: n.nested(Y, y, X, x, M, xp), ans + base))
            structural_zero = not _has_path_avoiding(info.parents, X, Y, M)
        else:
            steps.append((lambda n: n.nested(Y, y, X, xp, M, x), ans + base))
            structural_zero = False
        steps.append((lambda n: n.cf(Y, y, exp_), base))
        extra["mediation_formula"] = _mediation_formula(bn, info, X, x, xp, M, Y, y, t)
        checks["total_effect"] = _check(te, _close(ans, te, tol))
        checks["negligible"] = _check(0.0, (not structural_zero) and abs(ans) < tol)
    elif t in ("pn", "ps"):
        poc = probabilities_of_causation(bn, X, x, xp, Y, y)
        bounds = pn_ps_bounds(bn, X, x, xp, Y, y)
        ans = poc[t]
        extra["bounds"] = list(bounds[t])
        extra["pns"] = poc["pns"]
        if t == "pn":
            steps.append((lambda n: n.cf(Y, y, exp_, ex + ey, op="!="), ans))
            heur = _safe_prob(bn, {Y: y}, {X: xp})
            heur = None if heur is None else 1 - heur
        else:
            steps.append(
                (lambda n: f"P({n.v(Y)}_{{{n.e(X, x)}}}={n.s(Y, y)} | {n.e(X, xp)}, {n.e(Y, y, '!=')})", ans)
            )
            heur = _safe_prob(bn, {Y: y}, {X: x})
        lo, hi = bounds[t]
        steps.append((lambda n: f"Tian-Pearl bounds on {t.upper()}", [lo, hi]))
        checks["conditional_heuristic"] = _check(heur, _close(ans, heur, tol))
        checks["negligible"] = _check(0.0, abs(ans) < tol)
    else:
        raise ValueError(f"unknown query type {t!r}; known: {list(QUERY_TYPES)}.")
    return Solution(query, ans, [ans], steps, terms, checks, extra)


def _adjust(
    bn: DiscreteBN,
    X: str,
    x: str,
    Y: str,
    y: str,
    zs: Sequence[str],
    weights_given: Mapping[str, str] | None = None,
) -> float:
    """``sum_z P(y | x, z) P(z | weights_given)``: backdoor adjustment (``weights_given`` for the ETT)."""
    zs = list(zs)
    if not zs:
        return probability(bn, {Y: y}, {X: x})
    pz = joint_distribution(bn, zs, weights_given)
    total = 0.0
    for idx in np.ndindex(*pz.shape):
        if pz[idx] <= 0:
            continue
        zev = {z: bn.states[z][i] for z, i in zip(zs, idx)}
        p = _safe_prob(bn, {Y: y}, {X: x, **zev})
        if p is None:
            raise ValueError(f"positivity fails: P({X}={x}, {zev}) = 0, the adjustment formula is undefined.")
        total += p * float(pz[idx])
    return total


def _mediation_formula(
    bn: DiscreteBN,
    info: NetInfo,
    X: str,
    x: str,
    xp: str,
    M: str,
    Y: str,
    y: str,
    which: str,
    max_configs: int = 64,
) -> float | None:
    """Pearl's mediation formula with ``W`` = the observed pre-treatment ancestors of ``X, M, Y``.

    ``NDE = sum_w P(w) sum_m [P(y | x, m, w) - P(y | x', m, w)] P(m | x', w)``,
    ``NIE = sum_w P(w) sum_m P(y | x', m, w) [P(m | x, w) - P(m | x', w)]``.
    Valid in a Markovian model without recanting witness; ``None`` when a needed conditional is
    undefined (positivity) or ``W`` has more than ``max_configs`` configurations (not computed).
    """
    ws = sorted((info.an[X] | info.an[M] | info.an[Y]) & set(info.obs) - info.de[X])
    if int(np.prod([bn.card(w) for w in ws], dtype=np.int64)) > max_configs:
        return None
    pw_all = joint_distribution(bn, ws) if ws else np.ones(())
    total = 0.0
    for idx in np.ndindex(*pw_all.shape):
        pw = float(pw_all[idx])
        if pw <= 0:
            continue
        wev = {w: bn.states[w][i] for w, i in zip(ws, idx)}
        for m in bn.states[M]:
            pmx = _safe_prob(bn, {M: m}, {X: x, **wev})
            pmxp = _safe_prob(bn, {M: m}, {X: xp, **wev})
            if pmx is None or pmxp is None:
                return None
            weight = pmxp if which == "nde" else pmx - pmxp
            if weight == 0:
                continue
            pyxp = _safe_prob(bn, {Y: y}, {X: xp, M: m, **wev})
            pyx = _safe_prob(bn, {Y: y}, {X: x, M: m, **wev}) if which == "nde" else 0.0
            if pyx is None or pyxp is None:
                return None
            total += pw * weight * ((pyx - pyxp) if which == "nde" else pyxp)
    return total


def _independence_gap(bn: DiscreteBN, X: str, Y: str, Z: Sequence[str]) -> float:
    """``max over z with P(z) > 0 of max |P(x, y | z) - P(x | z) P(y | z)|``."""
    joint = joint_distribution(bn, [X, Y, *Z])
    gap = 0.0
    for idx in np.ndindex(*joint.shape[2:]):
        block = joint[(slice(None), slice(None)) + idx]
        mass = block.sum()
        if mass <= 1e-15:
            continue
        p = block / mass
        gap = max(gap, float(np.abs(p - np.outer(p.sum(1), p.sum(0))).max()))
    return gap
