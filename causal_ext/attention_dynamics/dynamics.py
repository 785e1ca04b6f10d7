"""Estimator for the causal-attention token ODE: integrate many initialisations, then read the clusters.

Open choices, fixed here (all constructor arguments):

* ``beta = 1.0``: inverse temperature of the softmax; ``Q = K = I`` when not given.
* ``horizon = 30.0`` time units, output on ``n_save = 61`` equally spaced times in ``[0, horizon]``. The
  analysis gives exponential convergence with rates set by spectral gaps of ``V`` and by the attention
  weights, so the horizon must be long against ``1 / gap``; whether it was is checked, not assumed, by
* the **convergence criterion**: a run counts as converged when the largest token speed
  ``max_k |dx_k/dt|`` at the final time is below ``speed_tol = 1e-4``. (Speeds, not distances, because a
  limit point is a zero of the velocity; a slow metastable configuration can also have a small speed, which
  is why a finite-horizon result is reported with its horizon.)
* Integration: the batched torch Dormand-Prince 5(4) engine with ``rtol = 1e-7``, ``atol = 1e-9``,
  ``max_step = 1.0`` (see :mod:`~causal_ext.attention_dynamics.integrate`); tokens are renormalised onto the
  sphere after each accepted step as a drift correction only.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from causal_ext.attention_dynamics.clusters import TwoClusterVerdict, two_cluster_verdict
from causal_ext.attention_dynamics.flow import (
    DTYPE,
    MatrixLike,
    MatrixParam,
    as_parameter,
    as_tokens,
    causal_attention_velocity,
    token_speeds,
)
from causal_ext.attention_dynamics.integrate import METHODS, SphereSolution, integrate_on_sphere


def uniform_sphere(batch: int, n: int, d: int, seed: int = 0) -> Tensor:
    """``[batch, n, d]`` tokens drawn independently and uniformly on ``S^{d-1}`` (normalised Gaussians)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, n, d, generator=g, dtype=DTYPE)
    return x / x.norm(dim=-1, keepdim=True)


def simulate_causal_attention(X0: MatrixLike, V: MatrixParam, Q: MatrixParam | None = None,
                              K: MatrixParam | None = None, *, beta: float = 1.0, horizon: float = 30.0,
                              n_save: int = 61, method: str = "dopri5", rtol: float = 1e-7,
                              atol: float = 1e-9, max_step: float = 1.0) -> SphereSolution:
    """Functional core of :class:`CausalAttentionFlow`: integrate from ``X0 [n, d]`` or ``[B, n, d]``."""
    x0 = as_tokens(X0)
    d = x0.shape[-1]
    if not np.isfinite(beta) or beta < 0:
        raise ValueError(f"beta must be a finite number >= 0, got {beta}")
    if not (np.isfinite(horizon) and horizon > 0):
        raise ValueError(f"horizon must be a positive time, got {horizon}")
    if int(n_save) != n_save or n_save < 2:
        raise ValueError(f"n_save must be an integer >= 2 (output times including 0 and horizon), "
                         f"got {n_save}")
    q, k, v = as_parameter(Q, "Q", d), as_parameter(K, "K", d), as_parameter(V, "V", d)

    def rhs(t: float, x: Tensor) -> Tensor:
        return causal_attention_velocity(x, q(t), k(t), v(t), beta)

    return integrate_on_sphere(rhs, x0, np.linspace(0.0, horizon, int(n_save)), method=method, rtol=rtol,
                               atol=atol, max_step=max_step)


class CausalAttentionFlow:
    """The ODE ``dx_k/dt = P_{x_k}(sum_{j<=k} softmax_j(beta <Q x_k, K x_j>) V x_j)`` on the sphere.

    Args:
        V: value matrix ``[d, d]``, or a callable ``t -> [d, d]`` for a time-dependent ``V(t)``.
        Q: query matrix or callable; ``None`` is the identity.
        K: key matrix or callable; ``None`` is the identity.
        beta: softmax inverse temperature (>= 0).
        horizon: integrate over ``[0, horizon]``.
        n_save: output times, equally spaced, including ``0`` and ``horizon``.
        method: ``"dopri5"`` (batched torch), ``"RK45"`` or ``"DOP853"`` (scipy ``solve_ivp``).
        rtol, atol: integration tolerances.
        max_step: longest integration step.
        speed_tol: convergence criterion on the final largest token speed.

    Attributes (after :meth:`fit`; a batch axis ``B`` is always present, ``B = 1`` for an ``[n, d]`` input):
        times_: ``[S]`` output times.
        trajectory_: ``[S, B, n, d]`` tokens at those times.
        final_: ``[B, n, d]`` tokens at ``horizon``.
        speed_: ``[B]`` largest token speed at ``horizon``.
        converged_: ``[B]`` ``speed_ < speed_tol``.
        n_steps_, n_rejected_, n_evals_: integrator work (``-1`` where the engine does not report it).
        max_drift_: largest norm deviation removed by the drift correction.

    See the module docstring for the reasons behind the defaults.
    """

    def __init__(self, V: MatrixParam, Q: MatrixParam | None = None, K: MatrixParam | None = None, *,
                 beta: float = 1.0, horizon: float = 30.0, n_save: int = 61, method: str = "dopri5",
                 rtol: float = 1e-7, atol: float = 1e-9, max_step: float = 1.0,
                 speed_tol: float = 1e-4) -> None:
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        self.V, self.Q, self.K = V, Q, K
        self.beta, self.horizon, self.n_save = beta, horizon, n_save
        self.method, self.rtol, self.atol, self.max_step = method, rtol, atol, max_step
        self.speed_tol = speed_tol

    def velocity(self, t: float, X: MatrixLike) -> Tensor:
        """The right-hand side at time ``t`` for tokens ``X [n, d]`` or ``[B, n, d]`` (put on the sphere)."""
        x = as_tokens(X, "X")
        d = x.shape[-1]
        q, k, v = (as_parameter(p, name, d)(t) for p, name in ((self.Q, "Q"), (self.K, "K"), (self.V, "V")))
        return causal_attention_velocity(x, q, k, v, self.beta)

    def fit(self, X0: MatrixLike) -> CausalAttentionFlow:
        """Integrate from ``X0`` (``[n, d]`` or ``[B, n, d]``; rows are normalised onto the sphere)."""
        sol = simulate_causal_attention(X0, self.V, self.Q, self.K, beta=self.beta, horizon=self.horizon,
                                        n_save=self.n_save, method=self.method, rtol=self.rtol,
                                        atol=self.atol, max_step=self.max_step)
        self.times_ = sol.times
        self.trajectory_ = sol.states.numpy()
        self.final_ = self.trajectory_[-1]
        self.speed_ = token_speeds(self.velocity(float(sol.times[-1]), sol.states[-1])).numpy()
        self.converged_ = self.speed_ < self.speed_tol
        self.n_steps_, self.n_rejected_, self.n_evals_ = sol.n_steps, sol.n_rejected, sol.n_evals
        self.max_drift_ = sol.max_drift
        return self

    def verdicts(self, u: np.ndarray, angle_tol: float = 0.05,
                 threshold: float = 0.05) -> list[TwoClusterVerdict]:
        """:func:`~causal_ext.attention_dynamics.clusters.two_cluster_verdict` of every run's final tokens."""
        if not hasattr(self, "final_"):
            raise RuntimeError("call fit(X0) before verdicts()")
        return [two_cluster_verdict(x, u, angle_tol, threshold) for x in self.final_]
