"""Conformal risk control (Angelopoulos, Bates, Fisch, Lei & Schuster, 2024) of a monotone loss.

Given calibration losses ``L_i(lambda)``, non-increasing in lambda and bounded by ``B``, with
``L_i(lambda_max) <= alpha`` feasible at ``lambda_max = 1`` (the full label set), CRC picks

    lambda_hat = inf{ lambda : n/(n+1) * R_n(lambda) + B/(n+1) <= alpha },   R_n = (1/n) sum_i L_i,

and guarantees, for a new exchangeable instance, ``E[L_{n+1}(lambda_hat)] <= alpha`` (expectation over
the calibration set and the new instance). When no lambda qualifies (``alpha < B/(n+1)``), lambda_hat =
``lambda_max``. ``R_n`` is a step function whose jumps all sit at the curves' breakpoints, so the
infimum is found exactly by bisection over the sorted breakpoints.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def check_level(name: str, value: float, *, low: float = 0.0, high: float = 1.0) -> float:
    """``value`` as a float in (low, high); a clear error naming ``name`` otherwise."""
    value = float(value)
    if not (low < value < high):
        raise ValueError(f"{name}={value} must lie strictly between {low} and {high}.")
    return value


def crc_threshold(risk: Callable[[float], float], n: int, alpha: float, candidates: np.ndarray,
                  bound: float = 1.0) -> float:
    """``lambda_hat`` of conformal risk control (module docstring).

    Args:
        risk: ``lambda -> R_n(lambda)``, the mean calibration loss, non-increasing in lambda.
        n: number of calibration instances.
        alpha: target risk level.
        candidates: sorted lambdas containing every jump of ``R_n`` and the ends of [0, 1].
        bound: ``B``, the largest value a loss can take.
    """
    if n < 1:
        raise ValueError("conformal risk control needs at least one calibration instance.")
    check_level("alpha", alpha)

    def ok(lam: float) -> bool:
        return n / (n + 1) * risk(lam) + bound / (n + 1) <= alpha + 1e-12

    cand = np.asarray(candidates, dtype=np.float64)
    if not ok(cand[-1]):
        return float(cand[-1])
    lo, hi = 0, len(cand) - 1  # invariant: ok(cand[hi]); find the first ok index
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(cand[mid]):
            hi = mid
        else:
            lo = mid + 1
    return float(cand[lo])


def crc_threshold_path(lams: np.ndarray, risks: np.ndarray, n: int, alpha: float, bound: float = 1.0
                       ) -> float:
    """``lambda_hat`` of CRC from the exact step function of ``R_n`` (:meth:`SeverityCurves.risk_path`):
    the first step where ``n/(n+1) R_n + B/(n+1) <= alpha``, or 1 (the full set) if none."""
    if n < 1:
        raise ValueError("conformal risk control needs at least one calibration instance.")
    check_level("alpha", alpha)
    ok = n / (n + 1) * np.asarray(risks) + bound / (n + 1) <= alpha + 1e-12
    return float(np.asarray(lams)[np.argmax(ok)]) if ok.any() else 1.0
