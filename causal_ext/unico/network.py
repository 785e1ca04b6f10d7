"""Discrete causal Bayesian networks: a DAG plus one conditional probability table per variable.

:class:`DiscreteBN` is the one model type of :mod:`causal_ext.unico`. Every variable has a finite list
of named states; its CPT is an array of shape ``(*cards(parents), card(variable))`` whose last axis
sums to one, in the order of :attr:`DiscreteBN.parents` (the order a BIF ``probability ( V | A, B )``
block names them). Variables may be marked *latent* (unobserved: they take part in the mechanism
but questions never mention them and adjustment sets never use them, e.g. the court order of
Pearl's firing squad).

Graph surgery (:meth:`DiscreteBN.mutilate`) is the rung-2 operation: ``do(X=x)`` removes the edges
into ``X`` and gives it a point-mass CPT (the truncated factorisation). States are addressed by name
(``"yes"``) or by index (``0``) everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from causal_ext.unico.graphs import reachable

__all__ = ["DiscreteBN", "State", "quantize_cpt"]

State = str | int
"""A state of a variable, by name or by index into its state list."""

_ROW_TOL = 1e-6


@dataclass(frozen=True, eq=False)
class DiscreteBN:
    """A causal Bayesian network over discrete variables.

    Args:
        states: variable -> its state names, in a fixed order (the dict order is the variable order).
        parents: variable -> its parents, in CPT axis order; variables missing here are roots.
        cpts: variable -> CPT array of shape ``(*cards(parents), card(variable))``, rows summing to 1.
        latent: unobserved variables.
        name: a label for the network (e.g. ``"asia"``).

    Raises:
        ValueError: unknown parents, a cycle, a CPT of the wrong shape, negative entries or rows not
            summing to one (within 1e-6), or a latent variable that is not declared.
    """

    states: Mapping[str, tuple[str, ...]]
    parents: Mapping[str, tuple[str, ...]]
    cpts: Mapping[str, np.ndarray]
    latent: frozenset[str] = field(default_factory=frozenset)
    name: str = "network"

    def __post_init__(self) -> None:
        states = {str(v): tuple(str(s) for s in ss) for v, ss in self.states.items()}
        for v, ss in states.items():
            if len(ss) < 1 or len(set(ss)) != len(ss):
                raise ValueError(f"states[{v!r}] must be a non-empty list of distinct names; got {ss}.")
        unknown = sorted(set(self.parents) - set(states))
        if unknown:
            raise ValueError(f"parents names variables without states: {unknown}; add them to `states`.")
        parents = {v: tuple(str(p) for p in self.parents.get(v, ())) for v in states}
        for v, ps in parents.items():
            bad = [p for p in ps if p not in states]
            if bad or len(set(ps)) != len(ps) or v in ps:
                raise ValueError(
                    f"parents[{v!r}] = {ps}: parents must be distinct known variables other "
                    f"than {v!r} (unknown: {bad})."
                )
        missing = [v for v in states if v not in self.cpts]
        if missing:
            raise ValueError(f"cpts is missing the table of {missing}.")
        cpts: dict[str, np.ndarray] = {}
        for v in states:
            t = np.asarray(self.cpts[v], dtype=float)
            want = tuple(len(states[p]) for p in parents[v]) + (len(states[v]),)
            if t.shape != want:
                raise ValueError(
                    f"cpts[{v!r}] has shape {t.shape}; expected {want} (parents {parents[v]} then {v!r})."
                )
            if not np.all(np.isfinite(t)) or (t < 0).any():
                raise ValueError(f"cpts[{v!r}] must be finite and non-negative.")
            sums = t.sum(axis=-1)
            if np.abs(sums - 1.0).max(initial=0.0) > _ROW_TOL:
                raise ValueError(
                    f"cpts[{v!r}]: rows must sum to 1 (worst row sums to "
                    f"{sums.flat[np.abs(sums - 1).argmax()]:.8f}); normalise them first."
                )
            t = t.copy()
            t.setflags(write=False)
            cpts[v] = t
        latent = frozenset(str(v) for v in self.latent)
        if latent - set(states):
            raise ValueError(f"latent names unknown variables {sorted(latent - set(states))}.")
        object.__setattr__(self, "states", states)
        object.__setattr__(self, "parents", parents)
        object.__setattr__(self, "cpts", cpts)
        object.__setattr__(self, "latent", latent)
        object.__setattr__(self, "_order", self._topological_order())

    # ------------------------------------------------------------------ structure
    @property
    def variables(self) -> list[str]:
        """All variables, in declaration order."""
        return list(self.states)

    @property
    def observed(self) -> list[str]:
        """Variables that are not latent, in declaration order."""
        return [v for v in self.states if v not in self.latent]

    @property
    def edges(self) -> list[tuple[str, str]]:
        """Directed edges ``(parent, child)``."""
        return [(p, v) for v in self.states for p in self.parents[v]]

    def card(self, var: str) -> int:
        """Number of states of ``var``."""
        return len(self.states[self._check_var(var)])

    def topological_order(self) -> list[str]:
        """Variables with every parent before its children (ties in declaration order)."""
        return list(self._order)  # type: ignore[attr-defined]

    def _topological_order(self) -> list[str]:
        indeg = {v: len(ps) for v, ps in self.parents.items()}
        children = self.children_map()
        ready = [v for v in self.states if indeg[v] == 0]
        order: list[str] = []
        while ready:
            v = ready.pop(0)
            order.append(v)
            for c in children[v]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        if len(order) != len(self.states):
            cyc = sorted(v for v, d in indeg.items() if d > 0)
            raise ValueError(f"the graph has a directed cycle through {cyc}; a causal network must be a DAG.")
        return order

    def children_map(self) -> dict[str, list[str]]:
        """Variable -> its children, in declaration order."""
        out: dict[str, list[str]] = {v: [] for v in self.states}
        for v, ps in self.parents.items():
            for p in ps:
                out[p].append(v)
        return out

    def ancestors(self, nodes: Iterable[str], *, include_self: bool = True) -> set[str]:
        """Ancestors of ``nodes`` (including the nodes themselves unless ``include_self=False``)."""
        start = {self._check_var(v) for v in nodes}
        first = start if include_self else [p for v in start for p in self.parents[v]]
        return reachable(self.parents, first)

    def descendants(self, nodes: Iterable[str], *, include_self: bool = True) -> set[str]:
        """Descendants of ``nodes`` (including the nodes themselves unless ``include_self=False``)."""
        children = self.children_map()
        start = {self._check_var(v) for v in nodes}
        first = start if include_self else [c for v in start for c in children[v]]
        return reachable(children, first)

    # ------------------------------------------------------------------ states
    def state_index(self, var: str, state: State) -> int:
        """Index of ``state`` (a name or an index) among the states of ``var``."""
        ss = self.states[self._check_var(var)]
        if isinstance(state, (int, np.integer)) and not isinstance(state, bool):
            if 0 <= int(state) < len(ss):
                return int(state)
        elif isinstance(state, str) and state in ss:
            return ss.index(state)
        raise ValueError(f"{state!r} is not a state of {var!r}; states are {list(ss)} (or their indices).")

    def state_name(self, var: str, state: State) -> str:
        """Name of ``state`` of ``var``."""
        return self.states[var][self.state_index(var, state)]

    def assignment(self, values: Mapping[str, State] | None) -> dict[str, int]:
        """``{variable: state}`` with every state resolved to its index (checked)."""
        return {self._check_var(v): self.state_index(v, s) for v, s in (values or {}).items()}

    def _check_var(self, var: str) -> str:
        if var not in self.states:
            raise ValueError(f"unknown variable {var!r}; the network {self.name!r} has {self.variables}.")
        return var

    def is_deterministic(self, var: str) -> bool:
        """True if every row of ``var``'s CPT is a point mass."""
        t = self.cpts[self._check_var(var)]
        return bool(np.all(np.isclose(t, 0.0) | np.isclose(t, 1.0)))

    # ------------------------------------------------------------------ derived networks
    def mutilate(self, do: Mapping[str, State] | None) -> DiscreteBN:
        """The network after ``do(X=x)`` for every item of ``do``: graph surgery, point-mass CPTs."""
        fixed = self.assignment(do)
        if not fixed:
            return self
        parents = dict(self.parents)
        cpts = dict(self.cpts)
        for v, i in fixed.items():
            parents[v] = ()
            cpts[v] = np.eye(self.card(v))[i]
        return DiscreteBN(self.states, parents, cpts, self.latent, self.name)

    def subnetwork(self, nodes: Iterable[str]) -> DiscreteBN:
        """The network restricted to the ancestral closure of ``nodes`` (same joint on those nodes)."""
        keep = self.ancestors(nodes)
        order = [v for v in self.states if v in keep]
        return DiscreteBN(
            {v: self.states[v] for v in order},
            {v: self.parents[v] for v in order},
            {v: self.cpts[v] for v in order},
            self.latent & keep,
            self.name,
        )

    def with_latent(self, latent: Iterable[str]) -> DiscreteBN:
        """The same network with ``latent`` as its set of unobserved variables."""
        return DiscreteBN(self.states, self.parents, self.cpts, frozenset(latent), self.name)

    def quantized(self, decimals: int) -> DiscreteBN:
        """CPT rows rounded to ``decimals`` places, still summing exactly to one (largest remainder)."""
        if not isinstance(decimals, int) or decimals < 1:
            raise ValueError(f"decimals must be a positive integer; got {decimals!r}.")
        return DiscreteBN(
            self.states,
            self.parents,
            {v: quantize_cpt(t, decimals) for v, t in self.cpts.items()},
            self.latent,
            self.name,
        )

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``n`` forward samples: variable -> array of state indices."""
        out: dict[str, np.ndarray] = {}
        for v in self._order:  # type: ignore[attr-defined]
            t = self.cpts[v]
            rows = (
                t[tuple(out[p] for p in self.parents[v])]
                if self.parents[v]
                else np.broadcast_to(t, (n, len(t)))
            )
            cum = np.cumsum(rows, axis=-1)
            u = rng.random(n)
            out[v] = np.minimum((u[:, None] >= cum).sum(axis=-1), t.shape[-1] - 1)
        return out

    def __repr__(self) -> str:
        return (
            f"DiscreteBN(name={self.name!r}, variables={len(self.states)}, edges={len(self.edges)}, "
            f"latent={sorted(self.latent)})"
        )


def quantize_cpt(table: np.ndarray, decimals: int) -> np.ndarray:
    """Round every row (last axis) of ``table`` to multiples of ``10**-decimals`` summing exactly to one.

    Largest-remainder rounding: floor every entry to the grid, then give the missing units to the
    entries with the largest remainders (ties to the lower index), so each row stays a distribution.
    """
    t = np.asarray(table, dtype=float)
    scale = 10**decimals
    flat = t.reshape(-1, t.shape[-1]) * scale
    base = np.floor(flat + 1e-9)
    missing = np.rint(scale - base.sum(axis=1)).astype(int)
    rem = flat - base
    for r in range(flat.shape[0]):
        if missing[r] > 0:
            idx = np.argsort(-rem[r], kind="stable")[: missing[r]]
            base[r, idx] += 1
        elif missing[r] < 0:  # only for rows that summed to slightly more than one
            idx = [i for i in np.argsort(rem[r], kind="stable") if base[r, i] > 0][: -missing[r]]
            base[r, idx] -= 1
    return (base / scale).reshape(t.shape)
