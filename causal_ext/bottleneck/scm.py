"""Simulator for structural causal bottleneck models (SCBMs) with known bottlenecks and effects.

An SCBM is a structural causal model over vector-valued nodes in which each
mechanism sees its parents only through a low-dimensional summary, the
*bottleneck*::

    X_j := m_j(b_j(X_pa(j)), N_j),    b_j: R^{sum of parent dims} -> R^{r_j},  r_j small.

This module simulates the linear-bottleneck family

    X_j := A_j φ(B_j [X_p1; ...; X_pk]) + s_j N_j,   N_j ~ N(0, I_{d_j}),

with bottleneck map ``b_j(x) = B_j x`` (``r_j x sum d_p``), loading ``A_j``
(``d_j x r_j``), noise scale ``s_j`` and ``φ`` the identity (linear SCBM, effects
known in closed form), ``tanh`` or ``square`` (``φ(u) = u^2``) applied elementwise (a
nonlinear mechanism ``m_j`` on a linear bottleneck). A latent node with identity
loading and zero noise, ``S := φ(B X_pa)``, is a *nonlinear bottleneck* ``b(x) = φ(B x)``
that other nodes can read linearly (see
:func:`~causal_ext.bottleneck.scenarios.nonlinear_backdoor_scenario`). Nodes may be
latent (``observed=False``) to model hidden confounding. Effects follow the regression convention used across
this package: an effect of ``X_s`` on ``X_t`` is a ``(d_t, d_s)`` matrix ``E`` with
``E[X_t | do(X_s = x)] - E[X_t | do(X_s = x')] = E (x - x')``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Node", "SCBM"]

_ACTIVATIONS = {"linear": lambda b: b, "tanh": np.tanh, "square": np.square}


@dataclass(frozen=True, eq=False)
class Node:
    """One node of an SCBM.

    Args:
        name: node name, unique in the model.
        dim: dimension ``d_j`` of the node variable.
        parents: names of the parent nodes, in the order their values are stacked for ``B_j``.
        bottleneck: ``B_j`` of shape ``(r_j, sum of parent dims)``; ``None`` for a root.
        loading: ``A_j`` of shape ``(dim, r_j)``; ``None`` for a root.
        noise_scale: ``s_j``, the standard deviation of each noise coordinate.
        activation: ``"linear"``, ``"tanh"`` or ``"square"`` (``φ`` applied to the bottleneck).
        observed: ``False`` marks a latent node (e.g. a hidden confounder).
    """

    name: str
    dim: int
    parents: tuple[str, ...] = ()
    bottleneck: np.ndarray | None = None
    loading: np.ndarray | None = None
    noise_scale: float = 1.0
    activation: str = "linear"
    observed: bool = True

    @property
    def rank(self) -> int:
        """Bottleneck dimension ``r_j`` (0 for a root)."""
        return 0 if self.bottleneck is None else int(self.bottleneck.shape[0])


class SCBM:
    """A structural causal bottleneck model over vector-valued nodes (listed in causal order).

    Raises :class:`ValueError` naming the node when a parent is unknown or comes
    later in the list, a shape does not match, or an activation is unknown.
    """

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes: dict[str, Node] = {}
        for node in nodes:
            self._check(node)
            self.nodes[node.name] = node

    def _check(self, node: Node) -> None:
        if node.name in self.nodes:
            raise ValueError(f"node names must be unique; {node.name!r} appears twice")
        if node.dim < 1 or node.noise_scale < 0:
            raise ValueError(f"node {node.name!r}: dim must be >= 1 and noise_scale >= 0")
        if node.activation not in _ACTIVATIONS:
            raise ValueError(f"node {node.name!r}: activation must be one of {sorted(_ACTIVATIONS)}")
        missing = [p for p in node.parents if p not in self.nodes]
        if missing:
            raise ValueError(f"node {node.name!r}: parents {missing} must be listed before it (causal order)")
        if not node.parents:
            if node.bottleneck is not None or node.loading is not None:
                raise ValueError(f"root node {node.name!r} takes no bottleneck or loading")
            return
        d_in = sum(self.nodes[p].dim for p in node.parents)
        B, A = node.bottleneck, node.loading
        if B is None or A is None or B.ndim != 2 or A.ndim != 2:
            raise ValueError(f"node {node.name!r}: a node with parents needs 2-D bottleneck and loading")
        if B.shape[1] != d_in or A.shape != (node.dim, B.shape[0]):
            raise ValueError(f"node {node.name!r}: bottleneck must be (r, {d_in}) and loading "
                             f"({node.dim}, r); got {B.shape} and {A.shape}")

    @property
    def linear(self) -> bool:
        """True when every mechanism is linear (effects then have a closed form)."""
        return all(n.activation == "linear" for n in self.nodes.values())

    def sample(self, n: int, rng: np.random.Generator,
               interventions: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Draw ``n`` joint samples (latent nodes included), optionally under ``do(node = value)``.

        ``interventions`` maps node names to a value of shape ``(dim,)`` (the same
        for every sample) or ``(n, dim)``; the node's mechanism is then replaced.
        """
        interventions = dict(interventions or {})
        unknown = set(interventions) - set(self.nodes)
        if unknown:
            raise ValueError(f"interventions name unknown nodes {sorted(unknown)}; known: {list(self.nodes)}")
        out: dict[str, np.ndarray] = {}
        for name, node in self.nodes.items():
            if name in interventions:
                value = np.broadcast_to(np.asarray(interventions[name], dtype=float), (n, node.dim))
                out[name] = np.array(value)
                continue
            noise = node.noise_scale * rng.standard_normal((n, node.dim))
            if not node.parents:
                out[name] = noise
                continue
            parents = np.concatenate([out[p] for p in node.parents], axis=1)
            summary = _ACTIVATIONS[node.activation](parents @ node.bottleneck.T)
            out[name] = summary @ node.loading.T + noise
        return out

    def direct_effect_matrix(self, child: str, parent: str) -> np.ndarray:
        """``A_j B_j`` restricted to ``parent``'s columns: the ``(d_child, d_parent)`` direct effect."""
        node = self.nodes[child]
        if parent not in node.parents:
            raise ValueError(f"{parent!r} is not a parent of {child!r}; parents: {list(node.parents)}")
        start = sum(self.nodes[p].dim for p in node.parents[: node.parents.index(parent)])
        cols = slice(start, start + self.nodes[parent].dim)
        return node.loading @ node.bottleneck[:, cols]

    def total_effect(self, source: str, target: str) -> np.ndarray:
        """The ``(d_target, d_source)`` total causal effect in a linear SCBM (sum over directed paths)."""
        for name in (source, target):
            if name not in self.nodes:
                raise ValueError(f"unknown node {name!r}; known: {list(self.nodes)}")
        if not self.linear:
            raise ValueError("total_effect needs a linear SCBM (every activation 'linear'); "
                             "estimate nonlinear effects by sampling under interventions")
        d_s = self.nodes[source].dim
        effects: dict[str, np.ndarray] = {source: np.eye(d_s)}
        for name, node in self.nodes.items():
            if name == source:
                continue
            eff = np.zeros((node.dim, d_s))
            for p in node.parents:
                if p in effects:
                    eff += self.direct_effect_matrix(name, p) @ effects[p]
            if np.any(eff) or name == target:
                effects[name] = eff
        return effects[target] if target in effects else np.zeros((self.nodes[target].dim, d_s))

    def bottleneck_of(self, child: str, parent: str) -> np.ndarray:
        """The rows of ``B_child`` that read ``parent``, restricted to ``parent``'s columns.

        For the block-structured scenarios in :mod:`causal_ext.bottleneck.scenarios`
        this is the bottleneck through which ``parent`` acts on ``child``.
        """
        node = self.nodes[child]
        if parent not in node.parents:
            raise ValueError(f"{parent!r} is not a parent of {child!r}; parents: {list(node.parents)}")
        start = sum(self.nodes[p].dim for p in node.parents[: node.parents.index(parent)])
        block = node.bottleneck[:, start:start + self.nodes[parent].dim]
        return block[np.any(block != 0, axis=1)]
