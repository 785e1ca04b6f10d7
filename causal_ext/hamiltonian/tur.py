"""Thermodynamic uncertainty relation (TUR): a lower bound on entropy production from fluctuating currents.

For a time-integrated current ``J_tau = int_0^tau d(x) o dx`` (Stratonovich; antisymmetric under time
reversal) of a steady state, the finite-time TUR (Barato & Seifert 2015; proved by Gingrich, Horowitz et al.
2016/2017 for Markov jump processes and by Dechant & Sasa 2018 for overdamped diffusions) states::

    sigma >= 2 <J_tau>^2 / (tau Var J_tau)        (= j^2 / D_J with j = <J_tau> / tau, D_J = Var J_tau / (2
    tau))

(with ``D_J = Var J_tau / tau`` instead, the same bound reads ``2 j^2 / D_J``). Any current gives a valid
bound, so the bound is estimable from data without a model. Choices:

* the current: a fixed one (a matrix ``G`` for ``d(x) = G x``, e.g. the angular current ``x_1 dx_2 - x_2
  dx_1``, or a callable ``d(x)``), or, with ``current=None``, the best combination of the linear currents
  ``int x_i o dx_j`` and displacements ``int dx_j``: the maximum of the bound over a linear span is the closed
  form ``2 mu^T Sigma^+ mu / tau`` (a generalised Rayleigh quotient; ``mu``, ``Sigma``: mean and covariance of
  the basis currents), the optimised-current estimator of Li et al. (2019) / Manikandan, Gupta & Krishnamurthy
  (2020). Its weights are fitted on one fold of paths and the bound is evaluated on the other (``n_folds=2``),
  so the estimate does not inherit the in-sample maximisation's upward bias; for short windows it approaches
  ``sigma`` itself (short-time TUR), exactly so for linear systems.
* windows: non-overlapping windows of length ``window`` cut from each path (paths in steady state);
* validity: the TUR holds for overdamped (all-even) dynamics; underdamped dynamics can violate it (Fischer et
  al. 2018), so momenta-carrying data are refused.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from causal_ext.hamiltonian._common import as_trajectories, bootstrap, check_alpha, path_folds, percentile_ci
from causal_ext.hamiltonian.model import Trajectories

__all__ = ["TURBound", "integrated_currents", "linear_current_basis", "tur_bound"]


def tur_bound(currents: object, duration: float) -> float:
    """``2 <J>^2 / (duration * Var J)`` from samples of one current integrated over ``duration``."""
    J = np.asarray(currents, dtype=float).reshape(-1)
    if J.size < 2 or duration <= 0:
        raise ValueError("need at least two current samples and duration > 0")
    var = J.var(ddof=1)
    return float(2.0 * J.mean() ** 2 / (duration * var)) if var > 0 else float("inf")


def _windows(x: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Midpoints and increments reshaped to ``(n_paths, n_windows, steps, dim)``."""
    n_paths, n_times, d = x.shape
    n_windows = (n_times - 1) // steps
    if n_windows < 1:
        raise ValueError(f"window of {steps} steps is longer than the paths ({n_times - 1} steps)")
    x = x[:, : n_windows * steps + 1]
    mid = 0.5 * (x[:, 1:] + x[:, :-1])
    dx = np.diff(x, axis=1)
    shape = (n_paths, n_windows, steps, d)
    return mid.reshape(shape), dx.reshape(shape)


def integrated_currents(traj: Trajectories, window_steps: int,
                        weight: np.ndarray | Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``J = sum d(x_mid) . dx`` over each window: shape ``(n_paths, n_windows)``.

    ``weight`` is a matrix ``G`` (``d(x) = G x``) or a callable ``x -> d(x)`` of the same shape.
    """
    mid, dx = _windows(traj.q, window_steps)
    if callable(weight):
        d = np.asarray(weight(mid), dtype=float)
        if d.shape != mid.shape:
            raise ValueError(f"current weight d(x) must return the shape of x {mid.shape}, got {d.shape}")
    else:
        G = np.asarray(weight, dtype=float)
        if G.shape != (traj.dim, traj.dim):
            raise ValueError(f"current matrix G must have shape {(traj.dim, traj.dim)}, got {G.shape}")
        d = mid @ G.T
    return np.einsum("nwsd,nwsd->nw", d, dx)


def linear_current_basis(traj: Trajectories, window_steps: int) -> np.ndarray:
    """Basis currents ``int x_i o dx_j`` (all ``i, j``) and ``int dx_j`` per window: ``(n_paths, n_windows,
    K)``."""
    mid, dx = _windows(traj.q, window_steps)
    quad = np.einsum("nwsi,nwsj->nwij", mid, dx).reshape(mid.shape[0], mid.shape[1], -1)
    return np.concatenate([quad, dx.sum(axis=2)], axis=2)


def _moments(s1: np.ndarray, s2: np.ndarray, count: np.ndarray,
             w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = float(w @ count)
    mu = (w @ s1) / n
    return mu, np.tensordot(w, s2, axes=1) / n - np.outer(mu, mu)


def _optimal_weights(mu: np.ndarray, cov: np.ndarray) -> np.ndarray:
    return np.linalg.pinv(cov, rcond=1e-10, hermitian=True) @ mu


def _bound(c: np.ndarray, mu: np.ndarray, cov: np.ndarray, tau: float) -> float:
    var = float(c @ cov @ c)
    return 2.0 * float(c @ mu) ** 2 / (tau * var) if var > 0 else float("nan")


class TURBound:
    """TUR lower bound on the entropy production rate from windows of length ``window`` (module docstring).

    Parameters: ``window`` (time units; rounded to whole samples), ``current`` (``None`` = optimised over
    linear currents; a ``(dim, dim)`` matrix ``G``; or a callable ``d(x)``), ``n_folds`` (cross-fitting of the
    optimised weights; ignored for a fixed current), ``n_boot``, ``alpha``, ``seed``.

    Fitted attributes: ``bound_`` (the lower bound on ``sigma``), ``stderr_``, ``ci_``, ``mean_current_``
    (rate ``j``), ``current_diffusion_`` (``D_J = Var J / (2 tau)``), ``weights_`` (the current's coefficients
    on the basis, fitted on all paths, defined up to scale; ``None`` for a fixed current), ``window_`` (time
    units), ``n_windows_``.
    """

    def __init__(self, window: float, current: object | None = None, n_folds: int = 2, n_boot: int = 200,
                 alpha: float = 0.05, seed: int | None = 0) -> None:
        self.window = window
        self.current = current
        self.n_folds = n_folds
        self.n_boot = n_boot
        self.alpha = alpha
        self.seed = seed

    def fit(self, X: object, dt: float | None = None) -> TURBound:
        """Bound from overdamped steady-state paths (a :class:`Trajectories` or an array with ``dt``)."""
        alpha = check_alpha(self.alpha)
        traj = as_trajectories(X, dt)
        if traj.p is not None:
            raise ValueError("the TUR can fail for underdamped (momentum-carrying) dynamics; pass overdamped "
                             "data, or use PathKLEntropyProduction for (q, p) trajectories")
        if not self.window > 0:
            raise ValueError(f"window must be > 0 (time units), got {self.window}")
        steps = max(1, int(round(self.window / traj.dt)))
        tau = steps * traj.dt
        rng = np.random.default_rng(self.seed)
        if self.current is None:
            J = linear_current_basis(traj, steps)
            folds = path_folds(traj.n_paths, self.n_folds, rng)
        else:
            J = integrated_currents(traj, steps, self.current)[:, :, None]
            folds = np.zeros(traj.n_paths, dtype=int)
        s1, s2 = J.sum(axis=1), np.einsum("nwi,nwj->nij", J, J)
        count = np.full(traj.n_paths, float(J.shape[1]))
        n_folds = int(folds.max()) + 1

        def estimate(w: np.ndarray) -> float:
            if self.current is not None:
                mu, cov = _moments(s1, s2, count, w)
                return _bound(np.ones(1), mu, cov, tau)
            total, weight = 0.0, 0.0
            for f in range(n_folds):
                held = (folds == f) * w
                train = w - held if n_folds > 1 else w
                if held.sum() == 0 or train.sum() == 0:
                    continue
                c = _optimal_weights(*_moments(s1, s2, count, train))
                value = _bound(c, *_moments(s1, s2, count, held), tau)
                n = float(held @ count)
                total, weight = total + n * value, weight + n
            return total / weight if weight > 0 else float("nan")

        ones = np.ones(traj.n_paths)
        self.bound_ = estimate(ones)
        reps = bootstrap(estimate, traj.n_paths, self.n_boot, rng)
        self.stderr_, low, high = percentile_ci(self.bound_, reps, alpha)
        self.ci_ = (low, high)
        mu, cov = _moments(s1, s2, count, ones)
        c = np.ones(1) if self.current is not None else _optimal_weights(mu, cov)
        self.weights_ = None if self.current is not None else c
        self.mean_current_ = float(c @ mu) / tau
        self.current_diffusion_ = float(c @ cov @ c) / (2.0 * tau)
        self.window_ = tau
        self.n_windows_ = int(count.sum())
        return self
