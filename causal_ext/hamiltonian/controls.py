"""Intervenable mechanisms: control forces ``u(q, t)`` acting on a Hamiltonian system along its trajectories.

An intervention ``do(u)`` replaces the control mechanism of a model and leaves the Hamiltonian and the
environment untouched (:meth:`causal_ext.hamiltonian.model.HamiltonianCausalModel.do`). A control is a
generalised force added to ``dp`` (underdamped) or to the force in ``dq = Gamma^{-1} (...) dt`` (overdamped).
Choices the abstract leaves open: controls depend on positions and time only (not on momenta), which keeps the
time-reversal bookkeeping of :mod:`causal_ext.hamiltonian.entropy` exact (a velocity-dependent force would
need its own parity rule); a time-dependent potential change is the conservative special case ``u = -grad U(q,
t)``; a non-conservative control (``curl u != 0``, e.g. :func:`rotational`) is what drives a system out of
equilibrium in a steady state.

Every control is an immutable object called as ``u(q, t)`` with ``q`` of shape ``(n_paths, dim)`` and a float
``t``; it returns the force, shape ``(n_paths, dim)``. Controls add: ``u1 + u2``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = [
    "ConstantForce",
    "Control",
    "FeedbackControl",
    "LinearFeedback",
    "NoControl",
    "PotentialControl",
    "SumControl",
    "TimeDependentForce",
    "rotational",
]


class Control:
    """Base class of control forces ``u(q, t)``."""

    def __call__(self, q: np.ndarray, t: float) -> np.ndarray:
        raise NotImplementedError

    def affine_part(self, dim: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``(G, f)`` when ``u(q, t) = G q + f`` for all ``t`` (closed forms apply), else ``None``."""
        return None

    def __add__(self, other: Control) -> Control:
        if not isinstance(other, Control):
            return NotImplemented
        return SumControl((self, other))


def _force_like(q: np.ndarray, value: np.ndarray, name: str) -> np.ndarray:
    value = np.asarray(value, dtype=float)
    try:
        return np.broadcast_to(value, q.shape)
    except ValueError:
        raise ValueError(f"{name} returned shape {value.shape}; expected {q.shape} or "
                         f"({q.shape[-1]},)") from None


@dataclass(frozen=True, eq=False)
class NoControl(Control):
    """``u = 0``: the unintervened (observational) mechanism."""

    def __call__(self, q: np.ndarray, t: float) -> np.ndarray:
        return np.zeros_like(q)

    def affine_part(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((dim, dim)), np.zeros(dim)


@dataclass(frozen=True, eq=False)
class ConstantForce(Control):
    """A constant force ``u = f`` (e.g. a tilt of the potential)."""

    force: object

    def __post_init__(self) -> None:
        f = np.asarray(self.force, dtype=float).reshape(-1)
        if not np.all(np.isfinite(f)):
            raise ValueError("force must be finite")
        object.__setattr__(self, "force", f)

    def __call__(self, q: np.ndarray, t: float) -> np.ndarray:
        return _force_like(q, self.force, "ConstantForce.force")

    def affine_part(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((dim, dim)), np.broadcast_to(self.force, (dim,)).copy()


@dataclass(frozen=True, eq=False)
class LinearFeedback(Control):
    """Linear feedback ``u = G q``; conservative iff ``G`` is symmetric, circulating if antisymmetric."""

    gain: object

    def __post_init__(self) -> None:
        G = np.atleast_2d(np.asarray(self.gain, dtype=float))
        if G.ndim != 2 or G.shape[0] != G.shape[1] or not np.all(np.isfinite(G)):
            raise ValueError(f"gain must be a finite square matrix, got shape {G.shape}")
        object.__setattr__(self, "gain", G)

    def __call__(self, q: np.ndarray, t: float) -> np.ndarray:
        if q.shape[-1] != self.gain.shape[0]:
            raise ValueError(f"LinearFeedback.gain is {self.gain.shape[0]}-dimensional but q has "
                             f"{q.shape[-1]} coordinates")
        return q @ self.gain.T

    def affine_part(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        return self.gain.copy(), np.zeros(dim)

    @property
    def is_conservative(self) -> bool:
        """Whether ``u = -grad U`` for some potential ``U`` (``G`` symmetric)."""
        return bool(np.allclose(self.gain, self.gain.T))


def rotational(strength: float, dim: int = 2, plane: tuple[int, int] = (0, 1)) -> LinearFeedback:
    """Circulating (non-conservative) force ``u = strength * R q`` in ``plane``, ``R = [[0, 1], [-1, 0]]``.

    For the overdamped unit oscillator this turns ``dx = -x dt + sqrt(2) dW`` into ``dx = -B x dt + sqrt(2)
    dW`` with ``B = [[1, -w], [w, 1]]``, ``w = strength``: the stationary law ``N(0, I)`` is unchanged, the
    entropy production becomes ``2 w^2``.
    """
    i, j = plane
    if not (0 <= i < dim and 0 <= j < dim and i != j):
        raise ValueError(f"plane must name two different coordinates in range({dim}), got {plane}")
    G = np.zeros((dim, dim))
    G[i, j], G[j, i] = strength, -strength
    return LinearFeedback(G)


@dataclass(frozen=True, eq=False)
class TimeDependentForce(Control):
    """Open-loop control ``u = fn(t)`` (a protocol ``do(u(t))``); ``fn`` returns a length-``dim`` vector."""

    fn: Callable[[float], np.ndarray]

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError("fn must be a callable t -> force vector")

    def __call__(self, q: np.ndarray, t: float) -> np.ndarray:
        return _force_like(q, self.fn(t), "TimeDependentForce.fn")


@dataclass(frozen=True, eq=False)
class PotentialControl(Control):
    """Conservative control: a (possibly time-dependent) potential change, ``u = -grad_fn(q, t)``."""

    grad_fn: Callable[[np.ndarray, float], np.ndarray]

    def __post_init__(self) -> None:
        if not callable(self.grad_fn):
            raise TypeError("grad_fn must be a callable (q, t) -> grad U(q, t)")

    def __call__(self, q: np.ndarray, t: float) -> np.ndarray:
        return -_force_like(q, self.grad_fn(q, t), "PotentialControl.grad_fn")


@dataclass(frozen=True, eq=False)
class FeedbackControl(Control):
    """General state feedback ``u = fn(q, t)``."""

    fn: Callable[[np.ndarray, float], np.ndarray]

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise TypeError("fn must be a callable (q, t) -> force of the shape of q")

    def __call__(self, q: np.ndarray, t: float) -> np.ndarray:
        return _force_like(q, self.fn(q, t), "FeedbackControl.fn")


@dataclass(frozen=True, eq=False)
class SumControl(Control):
    """The sum of several controls."""

    parts: tuple[Control, ...]

    def __call__(self, q: np.ndarray, t: float) -> np.ndarray:
        return sum((part(q, t) for part in self.parts), np.zeros_like(q))

    def affine_part(self, dim: int) -> tuple[np.ndarray, np.ndarray] | None:
        pieces = [part.affine_part(dim) for part in self.parts]
        if any(p is None for p in pieces):
            return None
        return sum(p[0] for p in pieces), sum(p[1] for p in pieces)
