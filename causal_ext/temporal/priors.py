"""Partial-order priors as path prohibition on the normalised summary graph (closed form + gradient).

A prior ``i < j`` ("``i`` may cause ``j``; ``j`` never causes ``i``, directly or indirectly") forbids
every directed path ``j -> ... -> i`` in the summary graph ``S = |W| + sum_l |A_l|`` (zero diagonal,
see :mod:`causal_ext.temporal.graphs`). Because lagged edges can point both ways, ``S`` may be cyclic,
so a topological order is not available; path prohibition is still well defined.

**Closed-form reachability.** With a normaliser ``rho`` the walk-sum measures

* ``resolvent``: ``R = (I - S/rho)^{-1} - I = sum_{k>=1} (S/rho)^k``
* ``expm``:      ``R = exp(S/rho) - I      = sum_{k>=1} (S/rho)^k / k!``

count every walk ``j -> i`` of every length with non-negative weights, so ``R[j, i] > 0`` exactly when a
path ``j -> ... -> i`` exists and ``R[j, i] = 0`` otherwise. The penalty is ``P = sum_{i<j} R[j, i]``.

**Why normalise (cycles).** On a cyclic summary graph the unnormalised sums accumulate repeated walks
around the cycles: ``sum_k S^k`` diverges as soon as the spectral radius ``lambda(S) >= 1`` (and
``(I - S)^{-1}`` then has meaningless, possibly negative entries), and ``exp(S)`` grows like
``e^{lambda(S)}``, so gradients explode with the weights. We divide by
``rho = (1 + margin) * ||r||_8 + eps`` where ``r`` is the vector of row sums of ``S``. Since ``S >= 0``,
``lambda(S) <= max_a r_a = ||S||_inf <= ||r||_8`` (``||r||_8`` is a smooth upper bound of the max row
sum, at most ``d^{1/8}`` times it), so ``||S/rho||_inf <= 1/(1 + margin) < 1``. Hence the Neumann series
converges geometrically and every entry of ``R`` is at most ``1/margin`` (resolvent), or at most
``e^{1/(1+margin)} - 1 < e - 1`` (expm), whatever the cycles. ``rho`` is differentiated like the rest
(no stop-gradient), so objective and gradient agree, which L-BFGS line searches need; the gradient is
closed-form (:func:`order_penalty_and_grad`).
``R`` is scale-free in ``S``: it measures the *relative* strength of prohibited walks, decoupled from
the magnitude of the lag-aware weights that fit the data.

Order priors are strict partial orders, so they are closed transitively (``i < j`` and ``j < k`` give
``i < k``) and must be irreflexive after closing; a contradiction raises ``ValueError``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import numpy as np
import scipy.linalg as sla

from causal_ext.temporal.graphs import summary_weights, transitive_closure

__all__ = [
    "Reachability",
    "normaliser",
    "reachability",
    "order_penalty",
    "order_penalty_and_grad",
    "close_priors",
    "prior_mask",
    "ancestral_pairs",
    "sample_order_priors",
]

Reachability = Literal["resolvent", "expm"]
_ROW_NORM = 8
_EPS = 1e-8


def _check_summary(S: np.ndarray) -> np.ndarray:
    S = np.asarray(S, dtype=float)
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"S must be a square (d, d) matrix, got shape {S.shape}")
    if np.any(S < 0) or not np.all(np.isfinite(S)):
        raise ValueError("S must be finite and non-negative (use the summary of absolute weights)")
    return S


def normaliser(S: np.ndarray, margin: float | None = 0.1) -> tuple[float, np.ndarray]:
    """``rho = (1 + margin) * ||r||_8 + eps`` (``r`` = row sums of ``S``) and ``d rho / d r``.

    ``||S / rho||_inf <= 1 / (1 + margin)``, so the spectral radius of ``S / rho`` is below 1.
    ``margin=None`` switches normalisation off (``rho = 1``): the *static* formulation, kept only as
    an ablation of the normalisation (meaningful with ``kind='expm'`` only).
    """
    if margin is None:
        return 1.0, np.zeros(S.shape[0])
    if not margin > 0:
        raise ValueError(f"margin must be > 0 (it keeps the walk series convergent) or None, got {margin}")
    r = S.sum(axis=1)
    top = r.max(initial=0.0)
    if top <= 0.0:  # S = 0 (where the optimiser starts): rho = eps, and the gradient of the norm is 0
        return _EPS, np.zeros_like(r)
    u = r / top  # scaled for overflow safety; the norm is homogeneous
    norm = top * float(np.sum(u**_ROW_NORM)) ** (1.0 / _ROW_NORM)
    return (1.0 + margin) * norm + _EPS, (1.0 + margin) * (r / norm) ** (_ROW_NORM - 1)


def reachability(S: np.ndarray, kind: Reachability = "resolvent", margin: float | None = 0.1) -> np.ndarray:
    """Closed-form walk-sum reachability ``R`` of the normalised summary graph (see module doc).

    ``R[a, b] > 0`` iff ``b`` is reachable from ``a`` by a directed path of length >= 1. ``S`` is a
    non-negative ``(d, d)`` array; its diagonal is used as given.
    """
    S = _check_summary(S)
    _check_kind(kind, margin)
    rho, _ = normaliser(S, margin)
    return _walk_sums(S / rho, kind)[0]


def _check_kind(kind: str, margin: float | None) -> None:
    if kind not in ("resolvent", "expm"):
        raise ValueError(f"kind must be 'resolvent' or 'expm', got {kind!r}")
    if kind == "resolvent" and margin is None:
        raise ValueError("the resolvent needs normalisation (its series diverges once the spectral radius "
                         "reaches 1); pass a margin > 0 or use kind='expm'")


def _walk_sums(T: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """``R(T)`` and the factor needed for its gradient (``(I - T)^{-1}`` or ``T`` itself)."""
    eye = np.eye(T.shape[0])
    if kind == "resolvent":
        N = np.linalg.inv(eye - T)
        return N - eye, N
    if kind == "expm":
        return sla.expm(T) - eye, T
    raise AssertionError(kind)  # checked by _check_kind


def order_penalty(S: np.ndarray, priors: np.ndarray, kind: Reachability = "resolvent",
                  margin: float | None = 0.1) -> float:
    """``P = sum_{i<j} R[j, i]``: zero iff no prior ``i < j`` is violated by a path ``j -> ... -> i``."""
    R = reachability(S, kind, margin)
    return float(np.sum(prior_mask(priors, R.shape[0]) * R))


def order_penalty_and_grad(S: np.ndarray, mask: np.ndarray, kind: Reachability = "resolvent",
                           margin: float | None = 0.1) -> tuple[float, np.ndarray]:
    """``P = <mask, R(S / rho(S))>`` and its exact gradient ``dP/dS`` (``rho`` differentiated too).

    With ``T = S / rho``: ``dP/dT = N^T mask N^T`` (``N = (I - T)^{-1}``) for the resolvent and the
    adjoint Frechet derivative ``L_exp(T^T, mask)`` for the exponential; then
    ``dP/dS = dP/dT / rho - <dP/dT, S> / rho^2 * d rho/dS``.
    """
    S = _check_summary(S)
    if np.shape(mask) != S.shape:
        raise ValueError(f"mask must have the shape of S {S.shape}, got {np.shape(mask)}; "
                         "build it with prior_mask")
    _check_kind(kind, margin)
    rho, drho_dr = normaliser(S, margin)
    T = S / rho
    R, aux = _walk_sums(T, kind)
    P = float(np.sum(mask * R))
    if kind == "resolvent":
        G_T = aux.T @ mask @ aux.T
    else:
        G_T = sla.expm_frechet(aux.T, mask, compute_expm=False)
    grad = G_T / rho - (float(np.sum(G_T * S)) / rho**2) * drho_dr[:, None]
    return P, grad


def prior_mask(priors: np.ndarray, d: int) -> np.ndarray:
    """``M[j, i] = 1`` for every prior ``i < j``: the entries of ``R`` that must vanish."""
    M = np.zeros((d, d))
    pr = np.asarray(priors, dtype=int).reshape(-1, 2)
    M[pr[:, 1], pr[:, 0]] = 1.0
    return M



def close_priors(priors: Iterable[tuple[int, int]] | np.ndarray, d: int) -> np.ndarray:
    """Validate order priors and return their transitive closure as a sorted ``(m, 2)`` int array.

    Each prior is a pair ``(i, j)`` meaning ``i < j``. Raises ``ValueError`` for indices outside
    ``[0, d)``, for ``i == j`` and for contradictory priors (a cycle such as ``i < j``, ``j < i``).
    """
    pr = np.asarray(list(priors) if not isinstance(priors, np.ndarray) else priors, dtype=int)
    if pr.size == 0:
        return np.zeros((0, 2), dtype=int)
    if pr.ndim != 2 or pr.shape[1] != 2:
        raise ValueError(f"priors must be (i, j) pairs meaning 'i precedes j', got shape {pr.shape}")
    if pr.min() < 0 or pr.max() >= d:
        raise ValueError(f"priors hold variable indices outside [0, {d}); got min {pr.min()}, max {pr.max()}")
    if np.any(pr[:, 0] == pr[:, 1]):
        raise ValueError("priors contain a pair (i, i); an order prior needs two different variables")
    rel = np.zeros((d, d), dtype=bool)
    rel[pr[:, 0], pr[:, 1]] = True
    closed = transitive_closure(rel)
    if np.any(np.diag(closed)):
        bad = np.flatnonzero(np.diag(closed)).tolist()
        raise ValueError(f"priors are contradictory: variables {bad} would have to precede themselves; "
                         "drop one of the conflicting pairs")
    return np.argwhere(closed).astype(int)


def ancestral_pairs(W: np.ndarray, A: np.ndarray | None = None) -> np.ndarray:
    """True order relations of a (possibly cyclic) summary graph: ``(i, j)`` with ``i`` an ancestor of
    ``j`` and ``j`` not an ancestor of ``i``. Every such pair is a correct prior ``i < j``."""
    C = transitive_closure(summary_weights(W, A))
    return np.argwhere(C & ~C.T).astype(int)


def sample_order_priors(
    W: np.ndarray, A: np.ndarray | None, fraction: float, rng: np.random.Generator
) -> np.ndarray:
    """A random ``fraction`` (rounded, at least one when any exist) of the true ancestral orderings."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction must lie in [0, 1], got {fraction}")
    pairs = ancestral_pairs(W, A)
    if len(pairs) == 0 or fraction == 0.0:
        return np.zeros((0, 2), dtype=int)
    k = max(1, int(round(fraction * len(pairs))))
    return pairs[np.sort(rng.choice(len(pairs), size=k, replace=False))]
