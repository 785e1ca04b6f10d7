"""Input checks shared by the bottleneck estimators: one clear error per bad argument."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["as_matrix", "check_rows", "center", "as_bottleneck_map"]


def as_matrix(name: str, value: Any, *, min_rows: int = 2) -> np.ndarray:
    """Return ``value`` as a finite float matrix ``(n, d)``; a 1-D array becomes one column.

    Raises :class:`ValueError` naming ``name`` when the array is not 1-D/2-D, has
    too few rows, no columns, or contains NaN/inf.
    """
    arr = np.asarray(value, dtype=float)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 1-D or 2-D array of shape (n_samples, n_features); "
                         f"got shape {arr.shape}")
    if arr.shape[0] < min_rows or arr.shape[1] == 0:
        raise ValueError(f"{name} needs at least {min_rows} rows and 1 column; got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or inf; drop or impute those rows first")
    return arr


def check_rows(**arrays: np.ndarray) -> int:
    """Check that all named arrays have the same number of rows and return it."""
    counts = {name: a.shape[0] for name, a in arrays.items()}
    if len(set(counts.values())) != 1:
        raise ValueError(f"all inputs must have the same number of rows (samples); got {counts}")
    return next(iter(counts.values()))


def center(*arrays: np.ndarray) -> list[np.ndarray]:
    """Subtract column means (every regression here carries an intercept this way)."""
    return [a - a.mean(axis=0, keepdims=True) for a in arrays]


def as_bottleneck_map(name: str, bottleneck: Any, input_dim: int) -> np.ndarray:
    """A linear bottleneck map as an ``(r, input_dim)`` matrix.

    Accepts the matrix itself (``b(x) = B x``) or a fitted
    :class:`~causal_ext.bottleneck.reduced_rank.ReducedRankBottleneck` (its
    ``bottleneck_``). Intercepts do not matter: every estimator centres its inputs.
    """
    mat = getattr(bottleneck, "bottleneck_", bottleneck)
    mat = np.asarray(mat, dtype=float)
    if mat.ndim == 1:
        mat = mat[None, :]
    if mat.ndim != 2 or mat.shape[1] != input_dim:
        raise ValueError(f"{name} must be an (r, {input_dim}) matrix B with b(x) = B x (or a fitted "
                         f"ReducedRankBottleneck on {input_dim} inputs); got shape {mat.shape}")
    if mat.shape[0] == 0 or not np.all(np.isfinite(mat)):
        raise ValueError(f"{name} must have at least one finite row; got shape {mat.shape}")
    return mat
