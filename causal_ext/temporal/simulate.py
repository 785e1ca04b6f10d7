"""Simulated structural VAR (SVAR) data, stationary and regime-switching.

The model is DYNOTEARS's: ``X_t = X_t W + sum_{l=1..p} X_{t-l} A_l + E_t`` with a contemporaneous DAG
``W`` and lagged matrices ``A_l`` (row = cause, column = effect, see :mod:`causal_ext.temporal.graphs`),
so ``X_t = (sum_l X_{t-l} A_l + E_t) (I - W)^{-1}``.

Graph generation (choices the abstract leaves open, following the NOTEARS/DYNOTEARS simulations):

* ``W``: a random causal order; each forward pair gets an edge with probability
  ``w_edges / (d (d-1) / 2)``; weights uniform on ``+-[0.5, 1.5]``.
* ``A_l``: lag-1 self-loops (autoregression, weight ``U[0.2, 0.5]``) when ``self_loops``; off-diagonal
  edges with expected count ``a_edges`` per lag, a ``backward_fraction`` of them against the causal
  order (these make the *summary* graph cyclic, the case path prohibition must handle); off-diagonal
  weights ``+-U[0.3, 0.6] / l``. If the VAR is not stable (companion spectral radius > 0.9), all
  ``A_l`` of that regime are shrunk by a common factor until it is.
* Noise: ``gaussian``, ``laplace`` or ``exponential`` (centred), unit variance times a per-variable
  scale (1 in the stationary case).

Regime switching (:func:`simulate_regime_switching`): the *graph* (support and signs) is shared, so
the summary graph and every order prior stay true across regimes; each regime redraws all
magnitudes from the same ranges and the noise scale of every variable from ``U[0.5, 2]``. The process
runs on through change points (the state carries over), which lie at given or equally spaced times.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["SVARData", "simulate_svar", "simulate_regime_switching", "random_svar_graph"]

Noise = Literal["gaussian", "laplace", "exponential"]
_MAX_RADIUS = 0.9
_BURN_IN = 200


@dataclass(frozen=True)
class SVARData:
    """A simulated series and its ground truth.

    ``X`` is ``(n, d)``; ``W`` ``(d, d)`` and ``A`` ``(p, d, d)`` are the weights of regime 0 (their
    support is the true graph of every regime); ``W_regimes`` ``(r, d, d)``, ``A_regimes``
    ``(r, p, d, d)`` and ``noise_scales`` ``(r, d)`` hold all regimes; ``regimes`` ``(n,)`` labels
    each time step and ``change_points`` lists the first index of regimes ``1..r-1``.
    """

    X: np.ndarray
    W: np.ndarray
    A: np.ndarray
    W_regimes: np.ndarray
    A_regimes: np.ndarray
    noise_scales: np.ndarray
    regimes: np.ndarray
    change_points: tuple[int, ...]


def _check_sizes(d: int, p: int, n: int) -> None:
    if d < 2:
        raise ValueError(f"d (number of variables) must be >= 2, got {d}")
    if p < 1:
        raise ValueError(f"p (number of lags) must be >= 1, got {p}")
    if n < 2 * p + 2:
        raise ValueError(f"n (time steps) must be >= 2p + 2 = {2 * p + 2}, got {n}")


def random_svar_graph(
    d: int, p: int, rng: np.random.Generator, w_edges: float | None = None, a_edges: float | None = None,
    backward_fraction: float = 0.1, self_loops: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Signed supports ``(W_sign, A_sign)`` in ``{-1, 0, 1}``: a DAG for ``W``, lagged edges for ``A``.

    ``w_edges`` defaults to ``d`` and ``a_edges`` (off-diagonal, per lag) to ``d / 2``.
    """
    w_edges = float(d) if w_edges is None else w_edges
    a_edges = d / 2 if a_edges is None else a_edges
    if not 0.0 <= backward_fraction <= 1.0:
        raise ValueError(f"backward_fraction must lie in [0, 1], got {backward_fraction}")
    if w_edges < 0 or a_edges < 0:
        raise ValueError(f"w_edges and a_edges must be >= 0, got {w_edges}, {a_edges}")
    pairs = d * (d - 1) / 2
    order = rng.permutation(d)
    pos = np.empty(d, dtype=int)
    pos[order] = np.arange(d)
    forward = pos[:, None] < pos[None, :]  # forward[a, b]: a precedes b in the causal order
    signs = lambda shape: rng.choice([-1.0, 1.0], size=shape)  # noqa: E731
    W = (forward & (rng.random((d, d)) < min(1.0, w_edges / pairs))) * signs((d, d))
    p_fwd = min(1.0, a_edges * (1 - backward_fraction) / pairs)
    p_bwd = min(1.0, a_edges * backward_fraction / pairs)
    A = np.zeros((p, d, d))
    for lag in range(p):
        u = rng.random((d, d))
        A[lag] = ((forward & (u < p_fwd)) | (forward.T & (u < p_bwd))) * signs((d, d))
    if self_loops:
        A[0][np.diag_indices(d)] = 1.0
    return W, A


def _magnitudes(W_sign: np.ndarray, A_sign: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Weights on the given signed supports (ranges in the module doc), shrunk until the VAR is stable."""
    p, d, _ = A_sign.shape
    W = W_sign * rng.uniform(0.5, 1.5, size=W_sign.shape)
    lag_scale = 1.0 / np.arange(1, p + 1)[:, None, None]
    A = A_sign * rng.uniform(0.3, 0.6, size=A_sign.shape) * lag_scale
    diag = np.arange(d)
    A[0, diag, diag] = np.abs(A_sign[0, diag, diag]) * rng.uniform(0.2, 0.5, size=d)
    inv = np.linalg.inv(np.eye(d) - W)
    while _companion_radius(A, inv) > _MAX_RADIUS:
        A *= 0.95
    return W, A


def _companion_radius(A: np.ndarray, inv: np.ndarray) -> float:
    p, d, _ = A.shape
    comp = np.zeros((p * d, p * d))
    comp[:d, :] = np.concatenate([(A[lag] @ inv).T for lag in range(p)], axis=1)
    comp[d:, :-d] = np.eye((p - 1) * d)
    return float(np.max(np.abs(np.linalg.eigvals(comp))))


def _noise(kind: str, size: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    if kind == "gaussian":
        return rng.standard_normal(size)
    if kind == "laplace":
        return rng.laplace(0.0, 1.0 / np.sqrt(2.0), size)
    if kind == "exponential":
        return rng.exponential(1.0, size) - 1.0
    raise ValueError(f"noise must be 'gaussian', 'laplace' or 'exponential', got {kind!r}")


def _run(W_r: np.ndarray, A_r: np.ndarray, scales: np.ndarray, regimes: np.ndarray, noise: str,
         rng: np.random.Generator) -> np.ndarray:
    """Iterate the reduced form through the regime labels (after a burn-in in regime 0)."""
    r, p, d, _ = A_r.shape
    inv = np.linalg.inv(np.eye(d)[None] - W_r)  # (r, d, d)
    B = np.einsum("rlab,rbc->rlac", A_r, inv)  # reduced-form lag matrices
    labels = np.concatenate([np.zeros(_BURN_IN, dtype=int), regimes])
    E = _noise(noise, (labels.size, d), rng) * scales[labels]
    E = np.einsum("ta,tab->tb", E, inv[labels])
    X = np.zeros((labels.size + p, d))
    for t in range(labels.size):
        k = labels[t]
        X[t + p] = E[t] + sum(X[t + p - 1 - lag] @ B[k, lag] for lag in range(p))
    return X[p + _BURN_IN:]


def simulate_svar(
    d: int, p: int, n: int, seed: int | np.random.Generator = 0, noise: Noise = "gaussian",
    w_edges: float | None = None, a_edges: float | None = None, backward_fraction: float = 0.1,
    self_loops: bool = True,
) -> SVARData:
    """A stationary SVAR(p) series of ``n`` steps on ``d`` variables (graph and weights: module doc)."""
    _check_sizes(d, p, n)
    rng = np.random.default_rng(seed)
    W_s, A_s = random_svar_graph(d, p, rng, w_edges, a_edges, backward_fraction, self_loops)
    W, A = _magnitudes(W_s, A_s, rng)
    scales = np.ones((1, d))
    X = _run(W[None], A[None], scales, np.zeros(n, dtype=int), noise, rng)
    return SVARData(X, W, A, W[None], A[None], scales, np.zeros(n, dtype=int), ())


def simulate_regime_switching(
    d: int, p: int, n: int, n_regimes: int = 3, seed: int | np.random.Generator = 0,
    noise: Noise = "gaussian", change_points: tuple[int, ...] | None = None, w_edges: float | None = None,
    a_edges: float | None = None, backward_fraction: float = 0.1, self_loops: bool = True,
) -> SVARData:
    """A regime-switching SVAR(p) series: shared graph, per-regime weights and noise scales.

    ``change_points`` (strictly increasing, inside ``(0, n)``, ``n_regimes - 1`` of them) default to
    equal spacing. Regimes follow each other in order ``0, 1, ..., n_regimes - 1``.
    """
    _check_sizes(d, p, n)
    if n_regimes < 1:
        raise ValueError(f"n_regimes must be >= 1, got {n_regimes}")
    if change_points is None:
        change_points = tuple(int(round(k * n / n_regimes)) for k in range(1, n_regimes))
    cps = tuple(int(c) for c in change_points)
    if len(cps) != n_regimes - 1 or any(b <= a for a, b in zip((0, *cps), (*cps, n))):
        raise ValueError(f"change_points must be {n_regimes - 1} strictly increasing times inside (0, {n}), "
                         f"got {change_points}")
    rng = np.random.default_rng(seed)
    W_s, A_s = random_svar_graph(d, p, rng, w_edges, a_edges, backward_fraction, self_loops)
    draws = [_magnitudes(W_s, A_s, rng) for _ in range(n_regimes)]
    W_r = np.stack([w for w, _ in draws])
    A_r = np.stack([a for _, a in draws])
    scales = rng.uniform(0.5, 2.0, size=(n_regimes, d))
    regimes = np.searchsorted(np.asarray(cps), np.arange(n), side="right")
    X = _run(W_r, A_r, scales, regimes, noise, rng)
    return SVARData(X, W_r[0], A_r[0], W_r, A_r, scales, regimes, cps)
