"""Input coercion, path folds and the path bootstrap shared by the trajectory estimators."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from causal_ext.hamiltonian.model import Trajectories

__all__ = ["as_trajectories", "bootstrap", "check_alpha", "path_folds", "percentile_ci"]


def as_trajectories(X: object, dt: float | None = None, p: object | None = None) -> Trajectories:
    """A :class:`Trajectories` as given, or built from arrays ``q`` (+ momenta ``p``) and ``dt``."""
    if isinstance(X, Trajectories):
        if dt is not None and not np.isclose(dt, X.dt):
            raise ValueError(f"dt={dt} contradicts the trajectories' sampling interval {X.dt}; omit dt")
        if p is not None:
            raise ValueError("p (momenta) is read from the Trajectories object; do not pass it separately")
        return X
    if dt is None or not np.isfinite(dt) or dt <= 0:
        raise ValueError("dt (sampling interval, > 0) is required when X is an array of paths")
    q = np.asarray(X, dtype=float)
    if q.ndim not in (2, 3):
        raise ValueError(f"X must have shape (n_paths, n_times) or (n_paths, n_times, dim), got {q.shape}")
    return Trajectories(dt * np.arange(q.shape[1]), q, p)


def check_alpha(alpha: float) -> float:
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha={alpha} must lie in (0, 1), e.g. 0.05 for 95% intervals")
    return float(alpha)


def path_folds(n_paths: int, n_folds: int, rng: np.random.Generator) -> np.ndarray:
    """Fold label of every path (a random balanced split); ``n_folds=1`` puts all paths in fold 0."""
    if n_folds < 1:
        raise ValueError(f"n_folds must be >= 1, got {n_folds}")
    if n_folds > 1 and n_paths < 2 * n_folds:
        raise ValueError(f"cross-fitting with n_folds={n_folds} needs at least {2 * n_folds} paths, "
                         f"got {n_paths}")
    return rng.permutation(np.arange(n_paths) % n_folds)


def bootstrap(statistic: Callable[[np.ndarray], float], n_paths: int, n_boot: int,
              rng: np.random.Generator) -> np.ndarray:
    """``statistic(weights)`` over ``n_boot`` resamples of whole paths (multinomial path weights).

    Paths are the independent units (time points within a path are correlated), so whole paths are resampled.
    """
    if n_boot < 0:
        raise ValueError(f"n_boot must be >= 0, got {n_boot}")
    weights = rng.multinomial(n_paths, np.full(n_paths, 1.0 / n_paths), size=n_boot).astype(float)
    return np.array([statistic(w) for w in weights])


def percentile_ci(estimate: float, replicates: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """``(stderr, low, high)``: bootstrap standard error and percentile interval (nan if no replicates)."""
    reps = replicates[np.isfinite(replicates)]
    if reps.size < 2:
        return float("nan"), float("nan"), float("nan")
    low, high = np.quantile(reps, [alpha / 2, 1 - alpha / 2])
    return float(reps.std(ddof=1)), float(low), float(high)
