"""Vectorised SDE integrators (all paths advance together; one Python loop over time steps).

* :func:`euler_maruyama` for overdamped dynamics ``dq = Gamma^{-1} F(q, t) dt + sqrt(2 T Gamma^{-1}) dW``: the
  scheme whose Gaussian transition densities the path-likelihood ratios of
  :mod:`causal_ext.hamiltonian.effects` use, weak order 1.
* :func:`baoab` for underdamped Langevin dynamics ``dq = M^{-1} p dt``, ``dp = (F(q, t) - Gamma M^{-1} p) dt +
  sqrt(2 T Gamma) dW`` (Leimkuhler & Matthews 2013): half kick (B), half drift (A), exact Ornstein–Uhlenbeck
  step of the momenta (O), half drift, half kick. It samples the Boltzmann law of a harmonic system with only
  O(dt^2) error, the usual default for Langevin molecular dynamics.
* :func:`exact_linear` for linear time-invariant systems: the exact Gaussian transition ``x' = F x + g +
  Q^{1/2} xi`` (:func:`causal_ext.hamiltonian.linear.transition_moments`), free of discretisation error at any
  step, so that a simulated law has exactly the model's marginals (e.g. a stationary law stays exactly
  stationary, which matters when comparing arms whose marginals agree in theory).

``force(q, t)`` returns the total force (conservative + control) for ``q`` of shape ``(n_paths, dim)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.linalg import expm

__all__ = ["baoab", "euler_maruyama", "exact_linear", "n_records"]

Force = Callable[[np.ndarray, float], np.ndarray]


def n_records(n_steps: int, record_every: int) -> int:
    """Number of stored states (the initial one included)."""
    return n_steps // record_every + 1


def _chol_psd(S: np.ndarray) -> np.ndarray:
    """A square root ``L L^T = S`` of a symmetric PSD ``S`` (eigen-decomposition, robust to zeros)."""
    w, V = np.linalg.eigh(0.5 * (S + S.T))
    return V * np.sqrt(np.clip(w, 0.0, None))


def euler_maruyama(force: Force, q0: np.ndarray, friction: np.ndarray, temperature: float, dt: float,
                   n_steps: int, rng: np.random.Generator, t0: float = 0.0,
                   record_every: int = 1) -> np.ndarray:
    """Overdamped paths, shape ``(n_paths, n_steps // record_every + 1, dim)``."""
    mobility = np.linalg.inv(friction)
    noise = _chol_psd(2.0 * temperature * mobility * dt)
    q = np.array(q0, dtype=float)
    out = np.empty((q.shape[0], n_records(n_steps, record_every), q.shape[1]))
    out[:, 0] = q
    for k in range(1, n_steps + 1):
        t = t0 + (k - 1) * dt
        q = q + force(q, t) @ mobility.T * dt + rng.standard_normal(q.shape) @ noise.T
        if k % record_every == 0:
            out[:, k // record_every] = q
    return out


def baoab(force: Force, q0: np.ndarray, p0: np.ndarray, mass: np.ndarray, friction: np.ndarray,
          temperature: float, dt: float, n_steps: int, rng: np.random.Generator, t0: float = 0.0,
          record_every: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Underdamped paths ``(q, p)``, each of shape ``(n_paths, n_steps // record_every + 1, dim)``."""
    inv_mass = np.linalg.inv(mass)
    decay = expm(-friction @ inv_mass * dt)
    noise = _chol_psd(temperature * (mass - decay @ mass @ decay.T))
    q, p = np.array(q0, dtype=float), np.array(p0, dtype=float)
    shape = (q.shape[0], n_records(n_steps, record_every), q.shape[1])
    qs, ps = np.empty(shape), np.empty(shape)
    qs[:, 0], ps[:, 0] = q, p
    f = force(q, t0)
    half = 0.5 * dt
    for k in range(1, n_steps + 1):
        t = t0 + k * dt
        p = p + half * f
        q = q + half * p @ inv_mass.T
        p = p @ decay.T + rng.standard_normal(p.shape) @ noise.T
        q = q + half * p @ inv_mass.T
        f = force(q, t)
        p = p + half * f
        if k % record_every == 0:
            qs[:, k // record_every], ps[:, k // record_every] = q, p
    return qs, ps


def exact_linear(F: np.ndarray, g: np.ndarray, Q: np.ndarray, x0: np.ndarray, n_steps: int,
                 rng: np.random.Generator, record_every: int = 1) -> np.ndarray:
    """Paths of the exact linear-Gaussian chain, shape ``(n_paths, n_steps // record_every + 1, dim)``."""
    noise = _chol_psd(Q)
    x = np.array(x0, dtype=float)
    out = np.empty((x.shape[0], n_records(n_steps, record_every), x.shape[1]))
    out[:, 0] = x
    for k in range(1, n_steps + 1):
        x = x @ F.T + g + rng.standard_normal(x.shape) @ noise.T
        if k % record_every == 0:
            out[:, k // record_every] = x
    return out
