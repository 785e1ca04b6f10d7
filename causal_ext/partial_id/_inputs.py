"""Input checks shared by the partial-identification estimators (one clear ValueError each)."""

from __future__ import annotations

import numpy as np

__all__ = ["check_alpha", "check_covariates", "check_outcomes", "pool"]


def check_outcomes(y1: object, y0: object, min_size: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Treated and control outcomes as finite 1-D float arrays of at least ``min_size`` values."""
    out = []
    for name, y in (("y1", y1), ("y0", y0)):
        arr = np.asarray(y, dtype=float)
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if arr.ndim != 1:
            raise ValueError(f"{name} must be a 1-D array of scalar outcomes, got shape {arr.shape}")
        if len(arr) < min_size:
            raise ValueError(f"{name} has {len(arr)} outcomes; need at least {min_size}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or inf; drop or impute those units first")
        out.append(arr)
    return out[0], out[1]


def check_covariates(x1: object, x0: object, n1: int, n0: int) -> tuple[np.ndarray, np.ndarray]:
    """Treated and control covariates as finite ``(n, d)`` arrays matching the outcomes."""
    if x1 is None or x0 is None:
        raise ValueError("x1 and x0 (covariates of the treated and control units) are both required; "
                         "for bounds without covariates use OTBounds")
    out = []
    for name, x, n in (("x1", x1, n1), ("x0", x0, n0)):
        arr = np.asarray(x, dtype=float)
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.ndim != 2:
            raise ValueError(f"{name} must be 1-D or 2-D (units x covariates), got shape {arr.shape}")
        if arr.shape[0] != n:
            raise ValueError(f"{name} has {arr.shape[0]} rows but its outcome array has {n}; "
                             "pass one covariate row per unit")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or inf; drop or impute those units first")
        out.append(arr)
    if out[0].shape[1] != out[1].shape[1]:
        raise ValueError(f"x1 has {out[0].shape[1]} covariates but x0 has {out[1].shape[1]}; they must match")
    return out[0], out[1]


def check_alpha(alpha: float) -> float:
    """Interval level parameter in (0, 1)."""
    if not 0.0 < float(alpha) < 1.0:
        raise ValueError(f"alpha={alpha} must lie in (0, 1), e.g. 0.05 for 95% intervals")
    return float(alpha)


def pool(y1: np.ndarray, y0: np.ndarray, x1: np.ndarray, x0: np.ndarray
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pooled outcomes, treatment indicator and covariates (treated first)."""
    y = np.concatenate([y1, y0])
    treated = np.r_[np.ones(len(y1), bool), np.zeros(len(y0), bool)]
    return y, treated, np.vstack([x1, x0])
