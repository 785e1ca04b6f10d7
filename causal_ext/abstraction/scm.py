"""Structural causal models over named array variables, with batched, per-row interventions.

One class, :class:`SCM`, describes both levels of a causal abstraction: the low-level
system (gates of a circuit, cells of a rod, agents, spins, activations) and the high-level
explanation (operands, block temperatures, population sizes). Every variable holds one
array per run; a run is a row, so ``simulate(do, n)`` returns ``{name: [n, *shape]}``.

Interventions are :class:`Clamp` objects: values for every row plus an optional row mask,
so one vectorised call can run many different interventions at once (row ``i`` clamps
exactly the variables whose mask is true at ``i``). Semantics, per node in insertion
(topological) order:

* an **exogenous** variable takes its natural value from its ``prior`` (a
  :class:`~causal_ext.abstraction.domains.Domain`), then its clamp where one applies;
* an **endogenous** node computes its outputs from its parents' (already clamped)
  values, then clamped rows are overwritten, so a clamp cuts the incoming edges and
  propagates downstream, which is Pearl's ``do``;
* a ``clamp_aware`` node (a joint equilibrium sampler such as an Ising chain, where
  fixing some spins changes the law of the others) receives its clamps and must honour
  them itself; the clamped values are written over its outputs afterwards in any case.

A node may produce several variables at once (``group``): a time step of a rod or a
population updates many micro-variables in one call, and a clamp on one of them leaves
the others as computed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from causal_ext.abstraction.domains import Domain


@dataclass(frozen=True)
class Clamp:
    """An intervention on one variable: ``values [n, *shape]``, applied on rows where ``mask`` is true.

    ``mask=None`` clamps every row.
    """

    values: np.ndarray
    mask: np.ndarray | None = None

    def apply(self, natural: np.ndarray | None) -> np.ndarray:
        """The clamped array: ``values`` on masked rows, ``natural`` elsewhere."""
        if self.mask is None or natural is None:
            return np.array(self.values, copy=True)
        m = self.mask.reshape((-1,) + (1,) * (np.ndim(natural) - 1))
        return np.where(m, self.values, natural)

    @property
    def all_rows(self) -> bool:
        """Whether every row is clamped."""
        return self.mask is None or bool(np.all(self.mask))


@dataclass(frozen=True)
class Node:
    """One mechanism: ``fn(*parents) -> outputs``; ``fn`` is None for an exogenous variable."""

    outputs: tuple[str, ...]
    parents: tuple[str, ...]
    fn: Callable[..., Any] | None
    domains: tuple[Domain, ...]
    prior: Domain | None = None
    stochastic: bool = False
    clamp_aware: bool = False


class SCM:
    """A structural causal model over array-valued variables (module docstring).

    Build it node by node, parents first::

        m = SCM("xor")
        m.exogenous("a", Bernoulli())
        m.exogenous("b", Bernoulli())
        m.node("y", ["a", "b"], lambda a, b: a ^ b, Bernoulli())

    Args:
        name: a label used in error messages and reports.
    """

    def __init__(self, name: str = "scm") -> None:
        self.name = name
        self.nodes: list[Node] = []
        self._domain: dict[str, Domain] = {}
        self._node_of: dict[str, Node] = {}

    # ------------------------------------------------------------------ building
    def exogenous(self, name: str, prior: Domain, domain: Domain | None = None) -> SCM:
        """Add an exogenous variable with natural distribution ``prior`` and support ``domain``.

        ``domain`` (default: ``prior``) is what interventions and perturbations draw from,
        when that differs from what the system does on its own (a heater that is
        naturally off but can be switched on).
        """
        dom = domain if domain is not None else prior
        if tuple(prior.shape) != tuple(dom.shape):
            raise ValueError(f"{self.name}: exogenous '{name}': prior shape {prior.shape} differs from "
                             f"domain shape {dom.shape}.")
        return self._add(Node((name,), (), None, (dom,), prior=prior))

    def node(self, name: str, parents: Sequence[str], fn: Callable[..., np.ndarray], domain: Domain, *,
             stochastic: bool = False) -> SCM:
        """Add ``name = fn(*parents)`` (``fn(*parents, rng=rng)`` when ``stochastic``)."""
        return self._add(Node((name,), tuple(parents), fn, (domain,), stochastic=stochastic))

    def group(self, names: Sequence[str], parents: Sequence[str], fn: Callable[..., Sequence[np.ndarray]],
              domains: Sequence[Domain], *, stochastic: bool = False, clamp_aware: bool = False) -> SCM:
        """Add a node with several outputs; ``fn`` returns one array per name, in order.

        ``clamp_aware`` nodes are called as ``fn(*parents, clamps=..., [rng=...])`` with
        ``clamps = {output name: Clamp}`` for their clamped outputs.
        """
        if len(names) != len(domains):
            raise ValueError(f"{self.name}: group {list(names)} needs one domain per name "
                             f"(got {len(domains)}).")
        return self._add(Node(tuple(names), tuple(parents), fn, tuple(domains), stochastic=stochastic,
                              clamp_aware=clamp_aware))

    def _add(self, node: Node) -> SCM:
        for out in node.outputs:
            if out in self._domain:
                raise ValueError(f"{self.name}: variable '{out}' is defined twice.")
        missing = [p for p in node.parents if p not in self._domain]
        if missing:
            raise ValueError(f"{self.name}: node {list(node.outputs)} names parents {missing} that are not "
                             "defined yet; add parents before their children (this keeps the model acyclic).")
        self.nodes.append(node)
        for out, dom in zip(node.outputs, node.domains):
            self._domain[out] = dom
            self._node_of[out] = node
        return self

    # --------------------------------------------------------------- inspection
    @property
    def variables(self) -> list[str]:
        """All variable names, in topological order."""
        return [o for nd in self.nodes for o in nd.outputs]

    @property
    def roots(self) -> list[str]:
        """The exogenous variables."""
        return [nd.outputs[0] for nd in self.nodes if nd.fn is None]

    @property
    def sinks(self) -> list[str]:
        """Variables that no mechanism reads."""
        used = {p for nd in self.nodes for p in nd.parents}
        return [v for v in self.variables if v not in used]

    @property
    def is_stochastic(self) -> bool:
        """Whether any mechanism draws random numbers (exogenous priors aside)."""
        return any(nd.stochastic for nd in self.nodes)

    def domain(self, name: str) -> Domain:
        """The support of variable ``name``."""
        self._check_name(name)
        return self._domain[name]

    def parents(self, name: str) -> tuple[str, ...]:
        """Parents of the node that computes ``name``."""
        self._check_name(name)
        return self._node_of[name].parents

    def _check_name(self, name: str) -> None:
        if name not in self._domain:
            raise KeyError(f"{self.name}: no variable '{name}'; known: {self.variables}.")

    # ---------------------------------------------------------------- simulation
    def simulate(self, do: Mapping[str, Clamp | np.ndarray] | None = None, n: int | None = None,
                 rng: np.random.Generator | None = None) -> dict[str, np.ndarray]:
        """Run ``n`` rows under the interventions ``do``; returns every variable ``[n, *shape]``.

        Args:
            do: ``{variable: Clamp or values [n, *shape]}``.
            n: number of rows (inferred from ``do`` when omitted).
            rng: random generator for priors and stochastic mechanisms (fresh when None).

        Raises:
            ValueError: unknown variable in ``do``, wrong shapes, or no way to tell ``n``.
        """
        rng = rng if rng is not None else np.random.default_rng()
        clamps = self._clamps(do or {}, n)
        if n is None:
            if not clamps:
                raise ValueError(f"{self.name}.simulate: pass n (the number of runs) when do is empty.")
            n = len(next(iter(clamps.values())).values)
        values: dict[str, np.ndarray] = {}
        for nd in self.nodes:
            own = {o: clamps[o] for o in nd.outputs if o in clamps}
            if nd.fn is None:
                name = nd.outputs[0]
                c = own.get(name)
                natural = None if c is not None and c.all_rows else nd.prior.sample(n, rng)
                values[name] = c.apply(natural) if c is not None else natural
                continue
            args = [values[p] for p in nd.parents]
            kwargs: dict[str, Any] = {}
            if nd.stochastic:
                kwargs["rng"] = rng
            if nd.clamp_aware:
                kwargs["clamps"] = own
            out = nd.fn(*args, **kwargs)
            outs = (out,) if len(nd.outputs) == 1 else tuple(out)
            if len(outs) != len(nd.outputs):
                raise ValueError(f"{self.name}: node {list(nd.outputs)} returned {len(outs)} arrays.")
            for name, dom, arr in zip(nd.outputs, nd.domains, outs):
                arr = np.asarray(arr)
                if arr.shape != (n, *dom.shape):
                    raise ValueError(f"{self.name}: mechanism of '{name}' returned shape {arr.shape}, "
                                     f"expected {(n, *dom.shape)}.")
                values[name] = own[name].apply(arr) if name in own else arr
        return values

    def _clamps(self, do: Mapping[str, Clamp | np.ndarray], n: int | None) -> dict[str, Clamp]:
        out: dict[str, Clamp] = {}
        for name, c in do.items():
            if name not in self._domain:
                raise ValueError(f"{self.name}: cannot intervene on unknown variable '{name}'; "
                                 f"known: {self.variables}.")
            c = c if isinstance(c, Clamp) else Clamp(np.asarray(c))
            vals = np.asarray(c.values)
            shape = tuple(self._domain[name].shape)
            if vals.shape[1:] != shape:
                raise ValueError(f"{self.name}: do['{name}'] has value shape {vals.shape[1:]}, expected "
                                 f"{shape} (one row per run first).")
            if n is not None and len(vals) != n:
                raise ValueError(f"{self.name}: do['{name}'] has {len(vals)} rows, expected n={n}.")
            if c.mask is not None and np.shape(c.mask) != (len(vals),):
                raise ValueError(f"{self.name}: do['{name}'].mask must be a boolean vector of {len(vals)} "
                                 "rows.")
            out[name] = Clamp(vals, None if c.mask is None else np.asarray(c.mask, dtype=bool))
        lengths = {len(c.values) for c in out.values()}
        if len(lengths) > 1:
            raise ValueError(f"{self.name}: the interventions in do have different row counts "
                             f"{sorted(lengths)}.")
        return out


__all__ = ["Clamp", "Node", "SCM"]
