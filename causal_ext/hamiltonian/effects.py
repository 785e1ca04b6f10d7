"""Causal effects of interventions on Hamiltonian causal models: path-law discrepancies and the standard ATEs.

A causal effect of ``do(u1)`` against ``do(u0)`` is a discrepancy between the two interventional path laws
``P1``, ``P0``. Two families are given here:

* the path KL divergence ``KL(P1 || P0)`` (both models share the Hamiltonian, the bath and the initial law, so
  their noises agree and the laws are equivalent). Girsanov's theorem gives ``KL = E_1 int (1/2) Db^T (2 D)^+
  Db dt`` with ``Db`` the drift difference; for controls this is ``E_1 int Du^T Gamma^{-1} Du dt / (4 T)`` in
  both the overdamped and underdamped regimes (:func:`path_kl`). :func:`path_log_likelihood_ratio` is the
  data-driven counterpart: the log ratio of the Euler–Maruyama transition densities of observed paths under
  the two models (noisy coordinates only), whose mean over paths from ``P1`` estimates the same KL.
* the average treatment effects that compare only marginals of the laws: the endpoint ATE ``E_1[g(x_T)] -
  E_0[g(x_T)]`` and the cumulative ATE ``E_1[int_0^T g(x_t) dt] - E_0[...]`` (:func:`endpoint_ate`,
  :func:`cumulative_ate`), from independent samples of the two arms with normal (Welch) intervals. A
  circulating control that leaves every one-time marginal unchanged has zero endpoint and cumulative ATE for
  every ``g``, yet a positive path KL and a changed entropy production (``benchmarks/entropy_production.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from causal_ext.hamiltonian._common import check_alpha
from causal_ext.hamiltonian.model import HamiltonianCausalModel, Trajectories

__all__ = [
    "EffectEstimate",
    "cumulative_ate",
    "difference_in_means",
    "endpoint_ate",
    "mean_estimate",
    "path_kl",
    "path_log_likelihood_ratio",
]


@dataclass(frozen=True)
class EffectEstimate:
    """Estimates with standard errors and ``1 - alpha`` normal intervals (arrays of one shape)."""

    estimate: np.ndarray
    stderr: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray

    def covers(self, value: float = 0.0) -> np.ndarray:
        """Whether each interval contains ``value``."""
        return (self.ci_low <= value) & (value <= self.ci_high)


def _interval(est: np.ndarray, se: np.ndarray, alpha: float) -> EffectEstimate:
    z = norm.ppf(1 - check_alpha(alpha) / 2)
    return EffectEstimate(est, se, est - z * se, est + z * se)


def mean_estimate(values: object, alpha: float = 0.05) -> EffectEstimate:
    """Mean over independent units (axis 0) with its standard error and normal interval."""
    v = np.asarray(values, dtype=float)
    if v.shape[0] < 2:
        raise ValueError("need at least two independent units to estimate a standard error")
    return _interval(v.mean(axis=0), v.std(axis=0, ddof=1) / np.sqrt(v.shape[0]), alpha)


def difference_in_means(y1: object, y0: object, alpha: float = 0.05) -> EffectEstimate:
    """``mean(y1) - mean(y0)`` over independent units (axis 0) with the Welch standard error."""
    a, b = np.asarray(y1, dtype=float), np.asarray(y0, dtype=float)
    if a.shape[1:] != b.shape[1:]:
        raise ValueError(f"y1 and y0 must have the same trailing shape, got {a.shape} and {b.shape}")
    if a.shape[0] < 2 or b.shape[0] < 2:
        raise ValueError("each arm needs at least two independent units")
    se = np.sqrt(a.var(axis=0, ddof=1) / a.shape[0] + b.var(axis=0, ddof=1) / b.shape[0])
    return _interval(a.mean(axis=0) - b.mean(axis=0), se, alpha)


Statistic = Callable[[np.ndarray], np.ndarray]


def _default_statistic(x: np.ndarray) -> np.ndarray:
    return x


def _check_arms(treated: Trajectories, control: Trajectories) -> None:
    for name, arm in (("treated", treated), ("control", control)):
        if not isinstance(arm, Trajectories):
            raise TypeError(f"{name} must be Trajectories (HamiltonianCausalModel.simulate output)")
    if treated.regime != control.regime or treated.dim != control.dim:
        raise ValueError("treated and control trajectories must have the same regime and dimension")
    if treated.t.shape != control.t.shape or not np.allclose(treated.t, control.t):
        raise ValueError("treated and control trajectories must share their time grid")


def _apply(fn: Statistic, x: np.ndarray) -> np.ndarray:
    out = np.asarray(fn(x), dtype=float)
    return out[..., None] if out.ndim == x.ndim - 1 else out


def endpoint_ate(treated: Trajectories, control: Trajectories, statistic: Statistic | None = None,
                 alpha: float = 0.05) -> EffectEstimate:
    """Endpoint ATE ``E[g(x_T) | do(u1)] - E[g(x_T) | do(u0)]`` (``g`` of the state, default identity)."""
    _check_arms(treated, control)
    fn = statistic or _default_statistic
    return difference_in_means(_apply(fn, treated.state[:, -1]), _apply(fn, control.state[:, -1]), alpha)


def cumulative_ate(treated: Trajectories, control: Trajectories, statistic: Statistic | None = None,
                   alpha: float = 0.05) -> EffectEstimate:
    """Cumulative ATE ``E[int_0^T g(x_t) dt | do(u1)] - E[... | do(u0)]`` (trapezoid rule in time)."""
    _check_arms(treated, control)
    fn = statistic or _default_statistic

    def integral(traj: Trajectories) -> np.ndarray:
        return np.trapezoid(_apply(fn, traj.state), traj.t, axis=1)

    return difference_in_means(integral(treated), integral(control), alpha)


def _check_models(p: HamiltonianCausalModel, q: HamiltonianCausalModel) -> None:
    if p.regime != q.regime or p.dim != q.dim:
        raise ValueError("both models must have the same regime and dimension")
    if p.hamiltonian is not q.hamiltonian or not np.allclose(p.friction, q.friction) or \
            not np.isclose(p.temperature, q.temperature):
        raise ValueError("path laws are compared between interventions on one model: the Hamiltonian, "
                         "friction and temperature must be shared (build both with model.do(...)); otherwise "
                         "the diffusions may differ and the laws be mutually singular")


def _control_gap(p: HamiltonianCausalModel, q: HamiltonianCausalModel, traj: Trajectories) -> np.ndarray:
    """``u_p(q_t, t) - u_q(q_t, t)`` at every sample: shape ``(n_paths, n_times, dim)``."""
    return np.stack([p.control(traj.q[:, k], float(t)) - q.control(traj.q[:, k], float(t))
                     for k, t in enumerate(traj.t)], axis=1)


def path_kl(p: HamiltonianCausalModel, q: HamiltonianCausalModel, traj: Trajectories,
            alpha: float = 0.05) -> EffectEstimate:
    """Girsanov ``KL(P_p || P_q)`` over the horizon of ``traj`` (paths drawn from ``p``; shared initial law).

    ``int Du^T Gamma^{-1} Du dt / (4 T)`` per path by the left Riemann sum (the Itô convention of the
    likelihood), averaged over paths with a standard error.
    """
    _check_models(p, q)
    gap = _control_gap(p, q, traj)[:, :-1]
    integrand = np.einsum("nti,ij,ntj->nt", gap, np.linalg.inv(p.friction), gap) / (4.0 * p.temperature)
    return mean_estimate(integrand.sum(axis=1) * traj.dt, alpha)


def path_log_likelihood_ratio(p: HamiltonianCausalModel, q: HamiltonianCausalModel,
                              traj: Trajectories) -> np.ndarray:
    """Per-path ``log dP_p / dP_q`` of observed paths from Euler–Maruyama transition densities.

    Noisy coordinates only: ``q`` overdamped, ``p`` underdamped (the position update is the shared Hamiltonian
    flow). Its mean over paths drawn from ``p`` estimates ``KL(P_p || P_q)``; over paths from ``q``, ``-KL(P_q
    || P_p)``.
    """
    _check_models(p, q)
    if traj.regime != p.regime or traj.dim != p.dim:
        raise ValueError(f"trajectories ({traj.regime}, dim {traj.dim}) do not match the models "
                         f"({p.regime}, dim {p.dim})")
    x, dt, d = traj.state, traj.dt, p.dim
    noisy = slice(0, d) if p.regime == "overdamped" else slice(d, 2 * d)
    D_inv = np.linalg.inv(p.diffusion()[noisy, noisy])
    llr = np.zeros(traj.n_paths)
    for k in range(len(traj.t) - 1):
        t = float(traj.t[k])
        dx = x[:, k + 1, noisy] - x[:, k, noisy]
        rp = dx - p.drift(x[:, k], t)[:, noisy] * dt
        rq = dx - q.drift(x[:, k], t)[:, noisy] * dt
        quad_q = np.einsum("ni,ij,nj->n", rq, D_inv, rq)
        quad_p = np.einsum("ni,ij,nj->n", rp, D_inv, rp)
        llr += (quad_q - quad_p) / (4.0 * dt)
    return llr
