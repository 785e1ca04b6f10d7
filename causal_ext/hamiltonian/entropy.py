"""Entropy production from trajectory data: path KL divergence between forward and time-reversed paths.

Entropy production (``k_B = 1``, per unit time, in a steady state) is the KL divergence rate between the law
of forward paths and the law of their time reversals (momenta flipped): ``sigma = lim KL(P[x_{0:t}] || P[E
x_{t:0}]) / t``. It is zero exactly at equilibrium (detailed balance) and is the thermodynamic witness of a
non-conservative intervention. Two estimators, both model-free within their stated class:

:class:`PathKLEntropyProduction` (drift-based; overdamped and underdamped)
    For a Langevin diffusion the log ratio of forward to reversed path densities is the medium entropy along
    the path (Seifert 2005; Spinney & Ford 2012), a Stratonovich integral of the fitted force field::

        overdamped:   ln P[x] / P[E x~] = int F(x)^T D^{-1} o dx                                  (+ boundary)
        underdamped:  ln P[x] / P[E x~] = int (A_irr(x))^T D_p^{-1} o (dp - A_rev(x) dt)          (+ boundary)

    with ``A_irr = -R p`` (friction: the part of the momentum drift that is odd in ``p``) and ``A_rev = f(q)``
    (the even part: conservative and control forces). The boundary term ``ln p(x_0) / p(E x_t)`` does not
    grow with ``t`` (and the system entropy ``-ln p(x_t)`` has a constant mean in a steady state), so the
    time-average of the integral estimates ``sigma``. Steps: (1) regress
    increments on features (overdamped: ``phi(x)``; underdamped: ``dp`` on ``[phi(q), p]``, since ``dq =
    M^{-1} p dt`` is the immutable Hamiltonian flow and carries no noise) by least squares; (2) ``D`` from the
    residual quadratic variation ``sum (dx - F dt)(dx - F dt)^T / (2 t)``; (3) the Stratonovich sum with
    midpoint features. Choices: a polynomial force basis
    (:class:`~causal_ext.hamiltonian.basis.PolynomialBasis`, linear by default: exact for Ornstein–Uhlenbeck
    processes, a projection otherwise, as in stochastic force inference, Frishman & Ronceray 2020);
    ``n_folds=2`` cross-fitting (forces fitted on one half of the paths, the integral evaluated on the other,
    as NEEP-style estimators hold out data) so that the fit's overfitting does not bias ``sigma`` upwards at
    equilibrium; standard errors by the path bootstrap (whole paths are the independent units). Discretisation
    bias is ``O(dt)``.

:class:`TransitionKLEntropyProduction` (transition statistics; overdamped only)
    The KL divergence between the pair law of ``(x_t, x_{t+tau})`` and that of the reversed pairs
    ``(x_{t+tau}, x_t)``, divided by ``tau``: the path KL rate of the chain observed every ``tau``. Pair laws
    are fitted as Gaussians (exact for linear systems; for non-Gaussian processes it measures only the
    second-order irreversibility, the lag-``tau`` cross-covariance asymmetry). By data processing it is ``<=
    sigma`` and tends to it as ``tau -> 0`` (for ``dx = -B x dt + sqrt 2 dW``, ``B = [[1, -w], [w, 1]]``: ``2
    w^2 (1 - tau) + O(tau^2)``). It is refused for underdamped data: with momenta flipped, the sampled pair KL
    of a Langevin oscillator grows like ``1 / tau`` as ``tau -> 0`` (exact values from
    :func:`~causal_ext.hamiltonian.linear.transition_reversal_kl_rate`; the position increments, whose
    conditional variance is only ``O(tau^3)``, separate forward from reversed pairs), so it does not estimate
    ``sigma``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from causal_ext.hamiltonian._common import as_trajectories, bootstrap, check_alpha, path_folds, percentile_ci
from causal_ext.hamiltonian.basis import PolynomialBasis
from causal_ext.hamiltonian.linear import gaussian_reversal_kl
from causal_ext.hamiltonian.model import Trajectories

__all__ = [
    "DriftStatistics",
    "check_diffusive",
    "PathKLEntropyProduction",
    "TransitionKLEntropyProduction",
    "drift_statistics",
    "fit_drift",
    "pair_statistics",
]

_CHUNK = 2_000_000  # floats per feature block when accumulating per-path statistics


@dataclass(frozen=True)
class DriftStatistics:
    """Per-path sufficient statistics of :class:`PathKLEntropyProduction` (leading axis: paths).

    ``gram = sum psi psi^T`` and ``cross = sum psi dy^T`` (left-point features ``psi`` and noisy increments
    ``dy``), ``square = sum dy dy^T``, ``steps``; evaluation sums: overdamped ``ev = sum phi(x_mid) dx^T``;
    underdamped ``ev = sum p_mid dp^T`` and ``ev2 = sum p_mid phi(q_mid)^T dt``.
    """

    gram: np.ndarray
    cross: np.ndarray
    square: np.ndarray
    steps: np.ndarray
    ev: np.ndarray
    ev2: np.ndarray | None
    dt: float
    n_force_features: int


def _chunks(n_paths: int, floats_per_path: int) -> list[slice]:
    size = max(1, _CHUNK // max(1, floats_per_path))
    return [slice(i, min(i + size, n_paths)) for i in range(0, n_paths, size)]


def drift_statistics(traj: Trajectories, basis: PolynomialBasis) -> DriftStatistics:
    """Per-path regression and evaluation sums for the drift-based path KL estimator."""
    dt, d = traj.dt, traj.dim
    k = basis.size(d)
    n_steps = traj.q.shape[1] - 1
    underdamped = traj.p is not None
    width = k + (d if underdamped else 0)
    stats: dict[str, list[np.ndarray]] = {key: [] for key in ("gram", "cross", "square", "ev", "ev2")}
    for sl in _chunks(traj.n_paths, n_steps * width):
        q = traj.q[sl]
        if underdamped:
            p = traj.p[sl]
            psi = np.concatenate([basis(q[:, :-1]), p[:, :-1]], axis=2)
            dy = np.diff(p, axis=1)
            p_mid = 0.5 * (p[:, 1:] + p[:, :-1])
            stats["ev"].append(np.einsum("nti,ntj->nij", p_mid, dy))
            stats["ev2"].append(np.einsum("nti,ntk->nik", p_mid, basis(0.5 * (q[:, 1:] + q[:, :-1]))) * dt)
        else:
            psi = basis(q[:, :-1])
            dy = np.diff(q, axis=1)
            stats["ev"].append(np.einsum("ntk,ntj->nkj", basis(0.5 * (q[:, 1:] + q[:, :-1])), dy))
        stats["gram"].append(np.einsum("nti,ntj->nij", psi, psi))
        stats["cross"].append(np.einsum("nti,ntj->nij", psi, dy))
        stats["square"].append(np.einsum("nti,ntj->nij", dy, dy))
    cat = {key: np.concatenate(v) if v else None for key, v in stats.items()}
    return DriftStatistics(cat["gram"], cat["cross"], cat["square"], np.full(traj.n_paths, float(n_steps)),
                           cat["ev"], cat["ev2"], dt, k)


def check_diffusive(increments: np.ndarray, names: str) -> None:
    """Raise if some coordinate moves ballistically (quadratic variation per unit time grows with the step).

    For a diffusion ``sum dx^2 / (2 n dt)`` is the same at steps ``dt`` and ``2 dt`` (up to ``O(dt)``); for a
    smooth coordinate (a position of an underdamped system) it doubles. ``increments``: ``(n_paths, n_steps,
    dim)``.
    """
    dy = increments[:, : 2 * (increments.shape[1] // 2)]
    if dy.shape[1] < 2:
        return
    one = np.mean(dy**2, axis=(0, 1))
    two = np.mean((dy[:, 0::2] + dy[:, 1::2]) ** 2, axis=(0, 1)) / 2.0
    bad = np.flatnonzero(two > 1.5 * one)
    if bad.size:
        raise ValueError(f"{names} coordinate(s) {bad.tolist()} move ballistically, not diffusively "
                         "(quadratic variation doubles when the step doubles): positions of an underdamped "
                         "system? pass momenta as p (or a Trajectories object) so that only they carry the "
                         "noise; otherwise the sampling interval is too coarse for the drift")


def fit_drift(stats: DriftStatistics, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares drift ``W`` (drift ``= W^T psi``) and diffusion ``D`` from weighted path sums."""
    G = np.tensordot(weights, stats.gram, axes=1)
    C = np.tensordot(weights, stats.cross, axes=1)
    S = np.tensordot(weights, stats.square, axes=1)
    n = float(weights @ stats.steps)
    ridge = 1e-12 * np.trace(G) / len(G)
    sol = np.linalg.solve(G + ridge * np.eye(len(G)), C)  # = W dt
    rss = S - C.T @ sol
    D = 0.5 * (rss + rss.T) / (2.0 * n * stats.dt)
    return sol / stats.dt, D


def _entropy_sum(stats: DriftStatistics, weights: np.ndarray, W: np.ndarray, D: np.ndarray) -> float:
    """Weighted sum over paths of the Stratonovich log path ratio under the fitted model (nats)."""
    D_inv = np.linalg.inv(D)
    ev = np.tensordot(weights, stats.ev, axes=1)
    if stats.ev2 is None:
        return float(np.sum((W @ D_inv) * ev))
    k = stats.n_force_features
    W_force, W_mom = W[:k], W[k:]  # momentum drift = W_force^T phi(q) + W_mom^T p, friction R = -W_mom^T
    ev2 = np.tensordot(weights, stats.ev2, axes=1)
    return float(np.sum((W_mom @ D_inv) * ev) - np.sum((W_mom @ D_inv @ W_force.T) * ev2))


def _cross_fitted_rate(stats: DriftStatistics, folds: np.ndarray, weights: np.ndarray) -> float:
    n_folds = int(folds.max()) + 1
    total, time = 0.0, 0.0
    for f in range(n_folds):
        held = (folds == f).astype(float) * weights
        train = weights - held if n_folds > 1 else weights
        if held.sum() == 0 or train.sum() == 0:
            continue
        W, D = fit_drift(stats, train)
        total += _entropy_sum(stats, held, W, D)
        time += float(held @ stats.steps) * stats.dt
    return total / time if time > 0 else float("nan")


class PathKLEntropyProduction:
    """Entropy production rate from the forward/reversed path log ratio under a fitted Langevin model.

    Parameters: ``basis`` (force features, default :class:`PolynomialBasis` of degree 1), ``n_folds``
    (cross-fitting folds over paths; 1 = fit and evaluate on all paths), ``n_boot`` (path-bootstrap replicates
    for the standard error; 0 = none), ``alpha`` (interval level), ``seed``.

    Fitted attributes: ``entropy_production_`` (rate, nats per unit time), ``stderr_``, ``ci_`` (percentile
    interval), ``drift_coef_`` and ``diffusion_`` (fitted on all paths), ``friction_`` (underdamped: ``R`` in
    ``-R p``; ``None`` overdamped), ``regime_``, ``n_paths_``, ``total_time_``.
    """

    def __init__(self, basis: PolynomialBasis | None = None, n_folds: int = 2, n_boot: int = 200,
                 alpha: float = 0.05, seed: int | None = 0) -> None:
        self.basis = basis
        self.n_folds = n_folds
        self.n_boot = n_boot
        self.alpha = alpha
        self.seed = seed

    def fit(self, X: object, dt: float | None = None, p: object | None = None) -> PathKLEntropyProduction:
        """Estimate from a :class:`Trajectories` or from arrays ``q`` (+ momenta ``p``) sampled every ``dt``.

        The paths should be in (or started from) the steady state; their increments must carry noise.
        """
        basis = PolynomialBasis(1) if self.basis is None else self.basis
        if not isinstance(basis, PolynomialBasis):
            raise TypeError("basis must be a PolynomialBasis")
        alpha = check_alpha(self.alpha)
        traj = as_trajectories(X, dt, p)
        rng = np.random.default_rng(self.seed)
        folds = path_folds(traj.n_paths, self.n_folds, rng)
        noisy = traj.q if traj.p is None else traj.p
        check_diffusive(np.diff(noisy[: min(traj.n_paths, 200)], axis=1),
                        "position" if traj.p is None else "momentum")
        stats = drift_statistics(traj, basis)
        ones = np.ones(traj.n_paths)
        W, D = fit_drift(stats, ones)
        eig = np.linalg.eigvalsh(D)
        if eig.min() <= 1e-10 * eig.max():
            raise ValueError("the increments carry no noise in some direction (singular diffusion); pass the "
                             "noisy coordinates only, or momenta p for underdamped data")
        if len(W) > stats.steps.sum():
            raise ValueError("too few increments for the number of force features; use more data or a lower "
                             "degree")
        self.entropy_production_ = _cross_fitted_rate(stats, folds, ones)
        reps = bootstrap(lambda w: _cross_fitted_rate(stats, folds, w), traj.n_paths, self.n_boot, rng)
        self.stderr_, low, high = percentile_ci(self.entropy_production_, reps, alpha)
        self.ci_ = (low, high)
        self.drift_coef_, self.diffusion_ = W, D
        self.friction_ = None if traj.p is None else -W[stats.n_force_features:].T
        self.regime_ = traj.regime
        self.n_paths_ = traj.n_paths
        self.total_time_ = float(stats.steps.sum() * traj.dt)
        return self


def pair_statistics(traj: Trajectories, lag: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-path ``sum z``, ``sum z z^T`` and counts of the pairs ``z = (x_t, x_{t+lag})``."""
    if lag < 1 or lag >= traj.q.shape[1]:
        raise ValueError(f"lag must be in [1, n_times - 1] = [1, {traj.q.shape[1] - 1}], got {lag}")
    x = traj.q
    z = np.concatenate([x[:, :-lag], x[:, lag:]], axis=2)
    return z.sum(axis=1), np.einsum("nti,ntj->nij", z, z), np.full(traj.n_paths, float(z.shape[1]))


def _pair_rate(s1: np.ndarray, s2: np.ndarray, count: np.ndarray, weights: np.ndarray, tau: float) -> float:
    n = float(weights @ count)
    mean = (weights @ s1) / n
    cov = np.tensordot(weights, s2, axes=1) / n - np.outer(mean, mean)
    d = len(mean) // 2
    try:
        return gaussian_reversal_kl(mean, 0.5 * (cov + cov.T), np.ones(d)) / tau
    except np.linalg.LinAlgError:
        return float("nan")


class TransitionKLEntropyProduction:
    """Entropy production rate as the time-reversal KL of Gaussian pair statistics at lag ``lag`` samples.

    Overdamped (all-even) data only; a lower bound on ``sigma`` with ``O(tau)`` bias (module docstring).
    Parameters ``n_boot``, ``alpha``, ``seed`` as in :class:`PathKLEntropyProduction`. Fitted attributes:
    ``entropy_production_``, ``stderr_``, ``ci_``, ``tau_`` (lag in time units), ``pair_mean_``,
    ``pair_cov_``.
    """

    def __init__(self, lag: int = 1, n_boot: int = 200, alpha: float = 0.05, seed: int | None = 0) -> None:
        self.lag = lag
        self.n_boot = n_boot
        self.alpha = alpha
        self.seed = seed

    def fit(self, X: object, dt: float | None = None) -> TransitionKLEntropyProduction:
        """Estimate from overdamped paths (:class:`Trajectories` without momenta, or an array and ``dt``)."""
        alpha = check_alpha(self.alpha)
        traj = as_trajectories(X, dt)
        if traj.p is not None:
            raise ValueError("TransitionKLEntropyProduction takes overdamped (position-only) data; for "
                             "(q, p) trajectories use PathKLEntropyProduction, which handles momentum "
                             "reversal")
        s1, s2, count = pair_statistics(traj, int(self.lag))
        tau = self.lag * traj.dt
        ones = np.ones(traj.n_paths)
        self.entropy_production_ = _pair_rate(s1, s2, count, ones, tau)
        if not np.isfinite(self.entropy_production_):
            raise ValueError("the pair covariance is singular (a constant or duplicated coordinate?)")
        rng = np.random.default_rng(self.seed)
        reps = bootstrap(lambda w: _pair_rate(s1, s2, count, w, tau), traj.n_paths, self.n_boot, rng)
        self.stderr_, low, high = percentile_ci(self.entropy_production_, reps, alpha)
        self.ci_ = (low, high)
        self.tau_ = tau
        n = count.sum()
        self.pair_mean_ = s1.sum(axis=0) / n
        self.pair_cov_ = s2.sum(axis=0) / n - np.outer(self.pair_mean_, self.pair_mean_)
        return self
