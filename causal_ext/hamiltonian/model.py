"""Hamiltonian causal models (HCMs): immutable equations of motion, local environment, intervenable controls.

A :class:`HamiltonianCausalModel` couples a Hamiltonian (:mod:`causal_ext.hamiltonian.systems`, never
intervened on) with a Langevin heat bath and a control mechanism ``u(q, t)``
(:mod:`causal_ext.hamiltonian.controls`). Its trajectory law is that of::

    underdamped:  dq = M^{-1} p dt,   dp = (-grad V(q) + u(q, t) - Gamma M^{-1} p) dt + sqrt(2 T Gamma) dW
    overdamped:   dq = Gamma^{-1} (-grad V(q) + u(q, t)) dt + sqrt(2 T Gamma^{-1}) dW

(the overdamped limit is the large-friction limit of the underdamped one on time scales ``>> M Gamma^{-1}``).
An intervention ``do(u)`` (:meth:`HamiltonianCausalModel.do`) is a new model with the control replaced; causal
effects are discrepancies between the path laws of such models (:mod:`causal_ext.hamiltonian.effects`), and
the entropy production of a path law is estimable from its trajectories
(:mod:`causal_ext.hamiltonian.entropy`).

Choices the abstract leaves open: the state is ``q`` (overdamped) or ``(q, p)`` (underdamped) with parities
``+1`` for ``q`` and ``-1`` for ``p``; initial laws are given explicitly (``init``): the steady state of the
*current* model (linear models, exact), the Boltzmann law of the Hamiltonian alone (the pre-intervention
equilibrium of a harmonic system), or given points; simulation is vectorised over paths and exact for linear
time-invariant models (:mod:`causal_ext.hamiltonian.integrators`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import numpy as np

from causal_ext.hamiltonian.controls import Control, LinearFeedback, NoControl
from causal_ext.hamiltonian.integrators import baoab, euler_maruyama, exact_linear
from causal_ext.hamiltonian.linear import (
    LinearSystem,
    linear_entropy_production,
    stationary_moments,
    transition_moments,
)
from causal_ext.hamiltonian.systems import Hamiltonian, LangevinBath, QuadraticHamiltonian

__all__ = ["HamiltonianCausalModel", "Trajectories"]

Regime = Literal["underdamped", "overdamped"]
Method = Literal["auto", "exact", "euler", "baoab"]


@dataclass(frozen=True, eq=False)
class Trajectories:
    """Sampled paths: times ``t`` ``(n_times,)``, positions ``q`` and (underdamped) momenta ``p``, each
    ``(n_paths, n_times, dim)``, on an equally spaced grid."""

    t: np.ndarray
    q: np.ndarray
    p: np.ndarray | None = None

    def __post_init__(self) -> None:
        t = np.asarray(self.t, dtype=float)
        q = np.asarray(self.q, dtype=float)
        if q.ndim == 2:
            q = q[:, :, None]
        if q.ndim != 3:
            raise ValueError(f"q must have shape (n_paths, n_times, dim), got {q.shape}")
        if t.shape != (q.shape[1],) or q.shape[1] < 2:
            raise ValueError(f"t must hold the {q.shape[1]} (>= 2) sampling times of q, got shape {t.shape}")
        steps = np.diff(t)
        if steps.min() <= 0 or not np.allclose(steps, steps[0], rtol=1e-6):
            raise ValueError("t must be increasing and equally spaced")
        p = None if self.p is None else np.asarray(self.p, dtype=float)
        if p is not None and p.ndim == 2:
            p = p[:, :, None]
        if p is not None and p.shape != q.shape:
            raise ValueError(f"p (momenta) must have the shape of q {q.shape}, got {p.shape}")
        if not np.all(np.isfinite(q)) or (p is not None and not np.all(np.isfinite(p))):
            raise ValueError("trajectories contain NaN or inf (unstable simulation? reduce dt)")
        object.__setattr__(self, "t", t)
        object.__setattr__(self, "q", q)
        object.__setattr__(self, "p", p)

    @property
    def dt(self) -> float:
        """Sampling interval."""
        return float(self.t[1] - self.t[0])

    @property
    def n_paths(self) -> int:
        return self.q.shape[0]

    @property
    def dim(self) -> int:
        """Number of positions."""
        return self.q.shape[2]

    @property
    def duration(self) -> float:
        return float(self.t[-1] - self.t[0])

    @property
    def regime(self) -> Regime:
        return "overdamped" if self.p is None else "underdamped"

    @property
    def state(self) -> np.ndarray:
        """``q`` (overdamped) or ``concat(q, p)`` (underdamped), shape ``(n_paths, n_times, state_dim)``."""
        return self.q if self.p is None else np.concatenate([self.q, self.p], axis=2)

    @property
    def parity(self) -> np.ndarray:
        """Time-reversal parity of the state coordinates (``+1`` positions, ``-1`` momenta)."""
        ones = np.ones(self.dim)
        return ones if self.p is None else np.concatenate([ones, -ones])

    def subsample(self, every: int) -> Trajectories:
        """Every ``every``-th sample (a coarser observation grid)."""
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        p = None if self.p is None else self.p[:, ::every]
        return Trajectories(self.t[::every], self.q[:, ::every], p)

    def select(self, paths: np.ndarray) -> Trajectories:
        """A subset of the paths (index array or boolean mask)."""
        return Trajectories(self.t, self.q[paths], None if self.p is None else self.p[paths])


@dataclass(frozen=True, eq=False)
class HamiltonianCausalModel:
    """Hamiltonian mechanism + Langevin environment + intervenable control (module docstring)."""

    hamiltonian: Hamiltonian
    bath: LangevinBath = dataclasses.field(default_factory=LangevinBath)
    control: Control = dataclasses.field(default_factory=NoControl)
    regime: Regime = "underdamped"

    def __post_init__(self) -> None:
        if not isinstance(self.hamiltonian, Hamiltonian):
            raise TypeError("hamiltonian must be a Hamiltonian (QuadraticHamiltonian or "
                            "PotentialHamiltonian)")
        if not isinstance(self.bath, LangevinBath):
            raise TypeError("bath must be a LangevinBath(friction, temperature)")
        if not isinstance(self.control, Control):
            raise TypeError("control must be a Control (see causal_ext.hamiltonian.controls)")
        if self.regime not in ("underdamped", "overdamped"):
            raise ValueError(f"regime must be 'underdamped' or 'overdamped', got {self.regime!r}")
        self.bath.friction_matrix(self.dim)  # validates the friction against the dimension now

    # ------------------------------------------------------------------ structure
    @classmethod
    def from_ou(cls, B: object, D: object) -> HamiltonianCausalModel:
        """The overdamped HCM whose law is ``dx = -B x dt + sqrt(2 D) dW`` (``T = 1``, ``Gamma = D^{-1}``).

        ``D^{-1} B = K - G`` splits into a harmonic Hamiltonian ``K`` (symmetric part, must be positive
        definite) and a circulating linear control ``G`` (minus the antisymmetric part). ``G = 0`` iff ``B = D
        U`` with ``U`` symmetric: detailed balance.
        """
        B = np.atleast_2d(np.asarray(B, dtype=float))
        D = np.atleast_2d(np.asarray(D, dtype=float))
        if B.shape != D.shape or B.shape[0] != B.shape[1]:
            raise ValueError(f"B and D must be square matrices of one shape, got {B.shape} and {D.shape}")
        S = np.linalg.solve(D, B)
        K, G = 0.5 * (S + S.T), -0.5 * (S - S.T)
        if np.linalg.eigvalsh(K).min() <= 0:
            raise ValueError("the symmetric part of D^{-1} B must be positive definite to be a harmonic "
                             "potential")
        hamiltonian = QuadraticHamiltonian(stiffness=K, mass=1.0, dim=B.shape[0])
        control = NoControl() if np.allclose(G, 0) else LinearFeedback(G)
        bath = LangevinBath(friction=np.linalg.inv(D), temperature=1.0)
        return cls(hamiltonian, bath, control, "overdamped")

    def do(self, control: Control) -> HamiltonianCausalModel:
        """The intervened model ``do(u = control)``: same Hamiltonian and bath, new control mechanism."""
        if not isinstance(control, Control):
            raise TypeError("control must be a Control (see causal_ext.hamiltonian.controls)")
        return dataclasses.replace(self, control=control)

    @property
    def dim(self) -> int:
        """Number of positions."""
        return int(self.hamiltonian.dim)

    @property
    def state_dim(self) -> int:
        return self.dim if self.regime == "overdamped" else 2 * self.dim

    @property
    def parity(self) -> np.ndarray:
        """Time-reversal parity of the state (``+1`` positions, ``-1`` momenta)."""
        ones = np.ones(self.dim)
        return ones if self.regime == "overdamped" else np.r_[ones, -ones]

    @property
    def friction(self) -> np.ndarray:
        return self.bath.friction_matrix(self.dim)

    @property
    def temperature(self) -> float:
        return float(self.bath.temperature)

    def force(self, q: np.ndarray, t: float) -> np.ndarray:
        """Total force ``-grad V(q) + u(q, t)`` on positions of shape ``(n_paths, dim)``."""
        return self.hamiltonian.force(q) + self.control(q, t)

    def diffusion(self) -> np.ndarray:
        """State diffusion matrix ``D`` (noise covariance ``2 D dt``)."""
        T, Gamma = self.temperature, self.friction
        if self.regime == "overdamped":
            return T * np.linalg.inv(Gamma)
        D = np.zeros((2 * self.dim, 2 * self.dim))
        D[self.dim:, self.dim:] = T * Gamma
        return D

    def drift(self, x: np.ndarray, t: float) -> np.ndarray:
        """State drift at ``x`` of shape ``(n_paths, state_dim)``."""
        d = self.dim
        if self.regime == "overdamped":
            return self.force(x, t) @ np.linalg.inv(self.friction).T
        q, p = x[:, :d], x[:, d:]
        v = self.hamiltonian.velocity(p)
        return np.concatenate([v, self.force(q, t) - v @ self.friction.T], axis=1)

    def linear_system(self) -> LinearSystem | None:
        """The state SDE as :class:`~causal_ext.hamiltonian.linear.LinearSystem` when the Hamiltonian is
        quadratic and the control affine and time-independent; ``None`` otherwise."""
        K = self.hamiltonian.stiffness_matrix
        affine = self.control.affine_part(self.dim)
        if K is None or affine is None:
            return None
        G, f = affine
        d, Gamma = self.dim, self.friction
        if self.regime == "overdamped":
            mob = np.linalg.inv(Gamma)
            return LinearSystem.make(mob @ (G - K), self.diffusion(), mob @ f)
        inv_mass = np.linalg.inv(self.hamiltonian.mass)
        A = np.zeros((2 * d, 2 * d))
        A[:d, d:] = inv_mass
        A[d:, :d] = G - K
        A[d:, d:] = -Gamma @ inv_mass
        return LinearSystem.make(A, self.diffusion(), np.r_[np.zeros(d), f], self.parity)

    def _require_linear(self, what: str) -> LinearSystem:
        system = self.linear_system()
        if system is None:
            raise ValueError(f"{what} needs a QuadraticHamiltonian and an affine time-independent control; "
                             "estimate it from simulated trajectories instead "
                             "(causal_ext.hamiltonian.entropy)")
        return system

    def stationary_moments(self) -> tuple[np.ndarray, np.ndarray]:
        """Steady-state mean and covariance of the state (linear models)."""
        return stationary_moments(self._require_linear("stationary_moments"))

    def entropy_production_rate(self) -> float:
        """Analytic steady-state entropy production rate (linear models, :mod:`~.linear`)."""
        s = self._require_linear("entropy_production_rate")
        return linear_entropy_production(s.A, s.D, s.b, s.parity)

    # ------------------------------------------------------------------ simulation
    def _resolve_method(self, method: str) -> str:
        integrator = "euler" if self.regime == "overdamped" else "baoab"
        if method == "auto":
            system = self.linear_system()
            return "exact" if system is not None and system.is_stable() else integrator
        if method not in ("exact", integrator):
            raise ValueError(f"method must be 'auto', 'exact' or {integrator!r} for a {self.regime} "
                             f"model, got {method!r}")
        return method

    def _initial_state(self, init: object, n_paths: int, rng: np.random.Generator) -> np.ndarray:
        n = self.state_dim
        if isinstance(init, str):
            if init == "stationary":
                mu, C = self.stationary_moments()
            elif init == "equilibrium":
                K = self.hamiltonian.stiffness_matrix
                if K is None:
                    raise ValueError("init='equilibrium' needs a QuadraticHamiltonian; pass points and "
                                     "burn_in")
                T, d = self.temperature, self.dim
                C = np.zeros((n, n))
                C[:d, :d] = T * np.linalg.inv(K)
                if self.regime == "underdamped":
                    C[d:, d:] = T * self.hamiltonian.mass
                mu = np.zeros(n)
            else:
                raise ValueError(f"init must be 'stationary', 'equilibrium' or an array of states, "
                                 f"got {init!r}")
            w, V = np.linalg.eigh(C)
            return mu + rng.standard_normal((n_paths, n)) @ (V * np.sqrt(np.clip(w, 0, None))).T
        x0 = np.asarray(init, dtype=float)
        if x0.shape == (n,):
            x0 = np.broadcast_to(x0, (n_paths, n))
        if x0.shape != (n_paths, n):
            raise ValueError(f"init as an array must have shape ({n},) or ({n_paths}, {n}) (state = "
                             f"{'q' if self.regime == 'overdamped' else '(q, p)'}), got {x0.shape}")
        return np.array(x0)

    def simulate(self, n_paths: int, duration: float, dt: float, *, init: object = "stationary",
                 burn_in: float = 0.0, record_every: int = 1, seed: int | np.random.Generator | None = None,
                 t0: float = 0.0, method: Method = "auto") -> Trajectories:
        """Simulate ``n_paths`` independent paths on ``[t0, t0 + duration]`` with step ``dt``.

        ``burn_in`` time is simulated first (the control clock runs from ``t0 - burn_in``) and discarded;
        ``record_every`` keeps every k-th step. ``method``: ``"exact"`` (linear time-invariant models: exact
        Gaussian transitions), ``"euler"`` (overdamped Euler–Maruyama), ``"baoab"`` (underdamped splitting),
        or ``"auto"``: exact when the model is linear, time-invariant and stable, else the regime's scheme.
        """
        if n_paths < 1:
            raise ValueError(f"n_paths must be >= 1, got {n_paths}")
        if not (dt > 0 and duration >= dt):
            raise ValueError(f"need dt > 0 and duration >= dt, got dt={dt}, duration={duration}")
        if burn_in < 0 or record_every < 1:
            raise ValueError("burn_in must be >= 0 and record_every >= 1")
        method = self._resolve_method(method)
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        x0 = self._initial_state(init, n_paths, rng)
        n_steps = int(round(duration / dt))
        n_steps -= n_steps % record_every
        if n_steps < 1:
            raise ValueError(f"duration={duration} must span at least record_every={record_every} steps")
        n_burn = int(round(burn_in / dt))
        start = t0 - n_burn * dt
        d = self.dim
        if method == "exact":
            F, g, Q = transition_moments(self._require_linear("method='exact'"), dt)
            if n_burn:
                x0 = exact_linear(F, g, Q, x0, n_burn, rng, n_burn)[:, -1]
            x = exact_linear(F, g, Q, x0, n_steps, rng, record_every)
            q, p = (x, None) if self.regime == "overdamped" else (x[:, :, :d], x[:, :, d:])
        elif method == "euler":
            if n_burn:
                x0 = euler_maruyama(self.force, x0, self.friction, self.temperature, dt, n_burn, rng, start,
                                    n_burn)[:, -1]
            q = euler_maruyama(self.force, x0, self.friction, self.temperature, dt, n_steps, rng, t0,
                               record_every)
            p = None
        else:
            q0, p0 = x0[:, :d], x0[:, d:]
            mass = self.hamiltonian.mass
            if n_burn:
                qb, pb = baoab(self.force, q0, p0, mass, self.friction, self.temperature, dt, n_burn, rng,
                               start, n_burn)
                q0, p0 = qb[:, -1], pb[:, -1]
            q, p = baoab(self.force, q0, p0, mass, self.friction, self.temperature, dt, n_steps, rng, t0,
                         record_every)
        t = t0 + dt * record_every * np.arange(q.shape[1])
        return Trajectories(t, q, p)
