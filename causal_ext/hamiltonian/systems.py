"""Immutable mechanisms of a Hamiltonian causal model: the Hamiltonian and the local (Langevin) environment.

The Hamiltonian ``H(q, p) = p^T M^{-1} p / 2 + V(q)`` fixes the equations of motion ``dq = M^{-1} p dt``, ``dp
= -grad V(q) dt``; a model never intervenes on it (:mod:`causal_ext.hamiltonian.model`). Choices the abstract
leaves open, taken as in stochastic thermodynamics:

* separable Hamiltonians (kinetic + potential) with a constant symmetric positive-definite mass matrix ``M``;
  the quadratic case ``V(q) = q^T K q / 2`` has closed forms (:mod:`causal_ext.hamiltonian.linear`), the
  general case takes ``V`` and ``grad V`` as callables (vectorised over a leading batch axis);
* the environment is a heat bath at temperature ``T`` (``k_B = 1``) with a constant symmetric
  positive-definite friction matrix ``Gamma``, coupled through the fluctuation–dissipation relation
  (Einstein): underdamped ``dp = (... - Gamma M^{-1} p) dt + sqrt(2 T Gamma) dW``, overdamped limit ``dq =
  Gamma^{-1} f(q) dt + sqrt(2 T Gamma^{-1}) dW``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["Hamiltonian", "LangevinBath", "PotentialHamiltonian", "QuadraticHamiltonian", "as_spd"]


def as_spd(value: object, dim: int, name: str) -> np.ndarray:
    """A scalar, a length-``dim`` vector (diagonal) or a ``(dim, dim)`` matrix as a symmetric
    positive-definite matrix; raises ``ValueError`` naming ``name`` otherwise."""
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 0:
        arr = float(arr) * np.eye(dim)
    elif arr.ndim == 1:
        if arr.shape != (dim,):
            raise ValueError(f"{name} as a vector must have length {dim}, got {arr.shape[0]}")
        arr = np.diag(arr)
    elif arr.shape != (dim, dim):
        raise ValueError(f"{name} must be a scalar, a length-{dim} vector or a {dim}x{dim} matrix, "
                         f"got {arr.shape}")
    if not np.all(np.isfinite(arr)) or not np.allclose(arr, arr.T, atol=1e-12):
        raise ValueError(f"{name} must be finite and symmetric")
    if np.linalg.eigvalsh(arr).min() <= 0:
        raise ValueError(f"{name} must be positive definite (all eigenvalues > 0)")
    return 0.5 * (arr + arr.T)


class Hamiltonian:
    """Separable Hamiltonian ``H = p^T M^{-1} p / 2 + V(q)``; subclasses give ``potential`` and ``force``."""

    dim: int
    mass: np.ndarray

    def potential(self, q: np.ndarray) -> np.ndarray:
        """``V(q)`` for ``q`` of shape ``(..., dim)``; returns shape ``(...)``."""
        raise NotImplementedError

    def force(self, q: np.ndarray) -> np.ndarray:
        """Conservative force ``-grad V(q)``, shape ``(..., dim)``."""
        raise NotImplementedError

    def velocity(self, p: np.ndarray) -> np.ndarray:
        """``dH/dp = M^{-1} p``."""
        return p @ np.linalg.inv(self.mass).T

    def energy(self, q: np.ndarray, p: np.ndarray) -> np.ndarray:
        """``H(q, p)``."""
        return 0.5 * np.einsum("...i,...i->...", p, self.velocity(p)) + self.potential(q)

    @property
    def stiffness_matrix(self) -> np.ndarray | None:
        """``K`` when ``V = q^T K q / 2`` (closed forms apply), else ``None``."""
        return None


@dataclass(frozen=True, eq=False)
class QuadraticHamiltonian(Hamiltonian):
    """Harmonic Hamiltonian ``H = p^T M^{-1} p / 2 + q^T K q / 2``.

    ``stiffness`` ``K`` and ``mass`` ``M``: scalar, vector (diagonal) or symmetric positive-definite matrix;
    ``dim`` is needed only when both are scalars.
    """

    stiffness: object = 1.0
    mass: object = 1.0
    dim: int = 0

    def __post_init__(self) -> None:
        dims = [np.asarray(v).shape[0] for v in (self.stiffness, self.mass) if np.asarray(v).ndim > 0]
        dim = self.dim or (dims[0] if dims else 0)
        if dim < 1:
            raise ValueError("dim must be given (>= 1) when stiffness and mass are both scalars")
        object.__setattr__(self, "dim", int(dim))
        object.__setattr__(self, "stiffness", as_spd(self.stiffness, dim, "stiffness"))
        object.__setattr__(self, "mass", as_spd(self.mass, dim, "mass"))

    def potential(self, q: np.ndarray) -> np.ndarray:
        return 0.5 * np.einsum("...i,ij,...j->...", q, self.stiffness, q)

    def force(self, q: np.ndarray) -> np.ndarray:
        return -q @ self.stiffness.T

    @property
    def stiffness_matrix(self) -> np.ndarray:
        return self.stiffness


@dataclass(frozen=True, eq=False)
class PotentialHamiltonian(Hamiltonian):
    """General separable Hamiltonian from callables ``potential_fn(q)`` and ``grad_fn(q) = grad V(q)``.

    Both take ``q`` of shape ``(..., dim)``. Example: the double well ``V = sum (q_i^2 - 1)^2``.
    """

    potential_fn: Callable[[np.ndarray], np.ndarray]
    grad_fn: Callable[[np.ndarray], np.ndarray]
    dim: int
    mass: object = 1.0

    def __post_init__(self) -> None:
        if not callable(self.potential_fn) or not callable(self.grad_fn):
            raise TypeError("potential_fn and grad_fn must be callables of q with shape (..., dim)")
        if int(self.dim) < 1:
            raise ValueError(f"dim must be >= 1, got {self.dim}")
        object.__setattr__(self, "mass", as_spd(self.mass, int(self.dim), "mass"))
        probe = np.asarray(self.grad_fn(np.zeros((2, int(self.dim)))))
        if probe.shape != (2, int(self.dim)):
            raise ValueError(f"grad_fn must map shape (batch, {self.dim}) to (batch, {self.dim}), "
                             f"got {probe.shape}")

    def potential(self, q: np.ndarray) -> np.ndarray:
        return np.asarray(self.potential_fn(q), dtype=float)

    def force(self, q: np.ndarray) -> np.ndarray:
        return -np.asarray(self.grad_fn(q), dtype=float)


@dataclass(frozen=True, eq=False)
class LangevinBath:
    """Local environment: friction ``Gamma`` (scalar, vector or SPD matrix) and temperature ``T > 0`` (k_B =
    1)."""

    friction: object = 1.0
    temperature: float = 1.0

    def __post_init__(self) -> None:
        if not np.isfinite(self.temperature) or self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")

    def friction_matrix(self, dim: int) -> np.ndarray:
        """``Gamma`` as a ``(dim, dim)`` SPD matrix."""
        return as_spd(self.friction, dim, "friction")
