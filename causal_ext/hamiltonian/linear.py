"""Closed forms for linear (Ornstein–Uhlenbeck) Langevin systems: steady state, entropy production, pairs.

A linear system is ``dx = (A x + b) dt + sqrt(2 D) dW`` on ``x`` in ``R^n`` with a stable drift matrix ``A``
(every eigenvalue has a negative real part), an offset ``b`` and a symmetric positive semi-definite diffusion
``D`` (the noise covariance per unit time is ``2 D``; ``D`` may be singular, as in the underdamped case where
only momenta are noisy). Each coordinate has a time-reversal *parity* ``eps_i``: ``+1`` for even variables
(positions), ``-1`` for odd ones (momenta, which flip sign when the film runs backwards).

Entropy production (``k_B = 1``, a rate per unit time) in the steady state ``N(mu, C)`` is the path KL
divergence rate between the forward path law and the law of time-reversed paths (momenta flipped), which for
diffusions is (Spinney & Ford, PRE 85, 051113, 2012)::

    sigma = E[ v(x)^T D^+ v(x) ],
    v(x) = A_irr x + b_irr - D grad log p(x) = A_irr x + b_irr + D C^{-1} (x - mu)

with the irreversible drift ``A_irr = (A + E A E) / 2``, ``b_irr = (b + E b) / 2``, ``E = diag(eps)`` (the
part of the drift that keeps its sign under time reversal, e.g. friction ``-gamma p / m`` for momenta; the
reversible part is the Hamiltonian flow). This formula also needs ``div`` of the reversible drift to vanish,
which holds for every linear drift (``tr((A - E A E) / 2) = 0``). Hence ``sigma = tr(M_N^T D_NN^{-1} M_N C) +
c_N^T D_NN^{-1} c_N`` with ``M = A_irr + D C^{-1}``, ``c = A_irr mu + b_irr`` and ``N`` the noisy coordinates.
If ``v`` has a component along a noiseless coordinate the forward and reversed path laws are mutually singular
and ``sigma = inf``.

For the 2-D process ``dx = -B x dt + sqrt(2) dW`` with ``B = [[1, -w], [w, 1]]``: ``C = I`` and ``sigma = 2
w^2``; for ``B = D U`` (``U`` symmetric positive definite, detailed balance) ``C = U^{-1}`` and ``sigma = 0``.

:func:`gaussian_reversal_kl` is the KL divergence between a Gaussian law of pairs ``(x_t, x_{t+tau})`` and the
law of the reversed pairs ``(E x_{t+tau}, E x_t)``: the path KL of the chain sampled every ``tau`` (divided by
``tau``, a rate; a lower bound on ``sigma`` by data processing when ``E = I``, tending to it as ``tau -> 0``).
:func:`transition_reversal_kl_rate` evaluates it exactly for a linear system, so the data-driven estimator in
:mod:`causal_ext.hamiltonian.entropy` can be checked against the sampling bias it should have.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import expm, solve_continuous_lyapunov

__all__ = [
    "LinearSystem",
    "gaussian_kl",
    "gaussian_reversal_kl",
    "linear_entropy_production",
    "noisy_coordinates",
    "stationary_moments",
    "transition_moments",
    "transition_reversal_kl_rate",
]

_NOISE_TOL = 1e-12


@dataclass(frozen=True)
class LinearSystem:
    """``dx = (A x + b) dt + sqrt(2 D) dW`` with coordinate parities ``parity`` (``+1`` even, ``-1`` odd)."""

    A: np.ndarray
    D: np.ndarray
    b: np.ndarray
    parity: np.ndarray

    @classmethod
    def make(cls, A: object, D: object, b: object | None = None,
             parity: object | None = None) -> LinearSystem:
        """Validated system; ``b`` defaults to zero and ``parity`` to all ``+1`` (overdamped)."""
        A = np.atleast_2d(np.asarray(A, dtype=float))
        n = A.shape[0]
        if A.shape != (n, n):
            raise ValueError(f"A (drift matrix) must be square, got shape {A.shape}")
        D = np.atleast_2d(np.asarray(D, dtype=float))
        if D.shape != (n, n):
            raise ValueError(f"D (diffusion matrix) must have shape {(n, n)} to match A, got {D.shape}")
        if not np.allclose(D, D.T, atol=1e-12):
            raise ValueError("D (diffusion matrix) must be symmetric")
        if np.linalg.eigvalsh(D).min() < -1e-10 * max(1.0, np.abs(D).max()):
            raise ValueError("D (diffusion matrix) must be positive semi-definite")
        b = np.zeros(n) if b is None else np.asarray(b, dtype=float).reshape(-1)
        if b.shape != (n,):
            raise ValueError(f"b (drift offset) must have length {n}, got shape {b.shape}")
        parity = check_parity(parity, n)
        if not np.all(np.isfinite(A)) or not np.all(np.isfinite(D)) or not np.all(np.isfinite(b)):
            raise ValueError("A, D and b must be finite")
        return cls(A, D, b, parity)

    @property
    def dim(self) -> int:
        """Number of coordinates ``n``."""
        return self.A.shape[0]

    def is_stable(self) -> bool:
        """Whether every eigenvalue of ``A`` has a negative real part (a steady state exists)."""
        return bool(np.linalg.eigvals(self.A).real.max() < 0)


def check_parity(parity: object | None, n: int) -> np.ndarray:
    """Parity vector of ``+1`` / ``-1`` entries (default all ``+1``)."""
    if parity is None:
        return np.ones(n)
    eps = np.asarray(parity, dtype=float).reshape(-1)
    if eps.shape != (n,) or not np.all(np.isin(eps, (-1.0, 1.0))):
        raise ValueError(f"parity must be a length-{n} vector of +1 (even, positions) and -1 (odd, momenta), "
                         f"got {parity!r}")
    return eps


def noisy_coordinates(D: np.ndarray, tol: float = _NOISE_TOL) -> np.ndarray:
    """Indices of coordinates with noise (``D_ii > tol * max D_jj``)."""
    diag = np.diag(D)
    return np.flatnonzero(diag > tol * max(diag.max(), 0.0))


def stationary_moments(system: LinearSystem) -> tuple[np.ndarray, np.ndarray]:
    """Steady-state mean ``mu = -A^{-1} b`` and covariance ``C`` solving ``A C + C A^T + 2 D = 0``."""
    if not system.is_stable():
        raise ValueError("A (drift matrix) is not stable (an eigenvalue has real part >= 0): no steady state")
    mu = -np.linalg.solve(system.A, system.b)
    C = solve_continuous_lyapunov(system.A, -2.0 * system.D)
    return mu, 0.5 * (C + C.T)


def linear_entropy_production(A: object, D: object, b: object | None = None,
                              parity: object | None = None) -> float:
    """Steady-state entropy production rate ``sigma`` of a linear Langevin system (module docstring formula).

    Returns ``inf`` when the irreversible velocity has a component along a noiseless coordinate.
    """
    system = LinearSystem.make(A, D, b, parity)
    mu, C = stationary_moments(system)
    E = np.diag(system.parity)
    A_irr = 0.5 * (system.A + E @ system.A @ E)
    b_irr = 0.5 * (system.b + E @ system.b)
    M = A_irr + system.D @ np.linalg.inv(C)
    c = A_irr @ mu + b_irr
    noisy = noisy_coordinates(system.D)
    quiet = np.setdiff1d(np.arange(system.dim), noisy)
    scale = max(1.0, np.abs(M).max())
    if quiet.size and (np.abs(M[quiet]).max() > 1e-9 * scale or np.abs(c[quiet]).max() > 1e-9 * scale):
        return float("inf")
    Dn_inv = np.linalg.inv(system.D[np.ix_(noisy, noisy)])
    Mn, cn = M[noisy], c[noisy]
    return float(np.trace(Mn.T @ Dn_inv @ Mn @ C) + cn @ Dn_inv @ cn)


def transition_moments(system: LinearSystem, tau: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact transition ``x_{t+tau} | x_t ~ N(F x_t + g, Q)``: returns ``(F, g, Q)``.

    ``F = exp(A tau)``, ``g = (I - F) mu`` (for stable ``A``) and ``Q = C - F C F^T``.
    """
    if tau <= 0:
        raise ValueError(f"tau (time step) must be > 0, got {tau}")
    mu, C = stationary_moments(system)
    F = expm(system.A * tau)
    Q = C - F @ C @ F.T
    return F, mu - F @ mu, 0.5 * (Q + Q.T)


def gaussian_kl(mean_p: np.ndarray, cov_p: np.ndarray, mean_q: np.ndarray, cov_q: np.ndarray) -> float:
    """``KL(N(mean_p, cov_p) || N(mean_q, cov_q))`` in nats (both covariances positive definite)."""
    k = len(mean_p)
    Lq = np.linalg.cholesky(cov_q)
    Lp = np.linalg.cholesky(cov_p)
    sol = np.linalg.solve(Lq, Lp)
    diff = np.linalg.solve(Lq, mean_q - mean_p)
    logdet = 2.0 * (np.log(np.diag(Lq)).sum() - np.log(np.diag(Lp)).sum())
    return float(0.5 * (np.sum(sol**2) + diff @ diff - k + logdet))


def gaussian_reversal_kl(mean: np.ndarray, cov: np.ndarray, parity: np.ndarray) -> float:
    """KL between a Gaussian pair law of ``z = (x_t, x_{t+tau})`` and the law of ``(E x_{t+tau}, E x_t)``.

    ``mean`` has length ``2 n`` and ``cov`` shape ``(2 n, 2 n)``; ``parity`` is ``diag(E)``.
    """
    n = len(parity)
    P = np.zeros((2 * n, 2 * n))
    P[:n, n:] = np.diag(parity)
    P[n:, :n] = np.diag(parity)
    return gaussian_kl(mean, cov, P @ mean, P @ cov @ P.T)


def transition_reversal_kl_rate(A: object, D: object, tau: float, b: object | None = None,
                                parity: object | None = None) -> float:
    """Exact time-reversal KL rate ``KL(pairs || reversed pairs) / tau`` of a linear system sampled at
    ``tau``.

    Needs full-rank noise over one step (always true for ``tau > 0`` in overdamped and underdamped systems).
    """
    system = LinearSystem.make(A, D, b, parity)
    mu, C = stationary_moments(system)
    F, _, _ = transition_moments(system, tau)
    cov = np.block([[C, C @ F.T], [F @ C, C]])
    mean = np.concatenate([mu, mu])
    return gaussian_reversal_kl(mean, cov, system.parity) / tau
