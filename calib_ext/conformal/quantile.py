"""Upper-quantile severity control by Learn-then-Test (Angelopoulos, Bates, Candes, Jordan & Lei, 2021).

Goal: the ``(1 - beta)``-quantile of a new patient's severity is at most ``tolerance``, i.e. the
exceedance probability

    E(lambda) = P( L_{n+1}(lambda) > tolerance ) <= beta,

held with probability at least ``1 - delta`` over the calibration draw:

    P_cal( E(lambda_hat) <= beta ) >= 1 - delta.

Each lambda on a grid fixed in advance (``lambda_1 = 1 > lambda_2 > ... >= 0``) gets the null
hypothesis ``H_j : E(lambda_j) > beta``. With ``k_j`` calibration instances exceeding the tolerance at
``lambda_j``, the p-value is

* ``"binomial"`` (default, exact for a 0/1 loss): ``p_j = P(Binomial(n, beta) <= k_j)``;
* ``"hoeffding"``: ``p_j = exp(-2 n (beta - k_j/n)_+^2)`` (looser, distribution-free for bounded losses).

Fixed-sequence testing walks the grid from ``lambda_1`` (largest sets) down and rejects while
``p_j <= delta``; it controls the family-wise error at ``delta`` without a multiplicity correction, so
every rejected lambda -- in particular the smallest, ``lambda_hat`` -- has ``E <= beta`` with probability
``>= 1 - delta``. If even ``H_1`` is not rejected (``n`` too small: ``(1 - beta)^n > delta``), lambda_hat = 1,
the full label set, whose severity is 0. Exceedance is monotone in lambda here, so the sequence order
is the natural one and the walk loses nothing to the ordering.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

PVALUES = ("binomial", "hoeffding")


def exceedance_pvalues(exceed: np.ndarray, n: int, beta: float, method: str = "binomial") -> np.ndarray:
    """p-values of ``H: E > beta`` from exceedance counts ``exceed`` out of ``n`` (module docstring)."""
    k = np.asarray(exceed, dtype=np.float64)
    if method == "binomial":
        return stats.binom.cdf(k, n, beta)
    if method == "hoeffding":
        return np.exp(-2.0 * n * np.clip(beta - k / n, 0.0, None) ** 2)
    raise ValueError(f"pvalue={method!r}; use one of {PVALUES}.")


def ltt_threshold(critical: np.ndarray, beta: float, delta: float, *, grid: int = 1001,
                  method: str = "binomial") -> float:
    """``lambda_hat`` of Learn-then-Test with fixed-sequence testing on ``linspace(0, 1, grid)``.

    Args:
        critical: per calibration instance, ``c_i = inf{lambda : L_i(lambda) <= tolerance}``, so the
            instance exceeds the tolerance exactly when ``lambda < c_i``
            (:meth:`SeverityCurves.critical_lambdas`).
        beta: allowed exceedance probability (0.1 controls the 90th percentile).
        delta: allowed probability, over calibration draws, that the guarantee fails.
        grid: number of grid points (fixed before seeing data).
        method: ``"binomial"`` or ``"hoeffding"`` p-values.
    """
    c = np.sort(np.asarray(critical, dtype=np.float64))
    n = len(c)
    if n < 1:
        raise ValueError("Learn-then-Test needs at least one calibration instance.")
    lams = np.linspace(1.0, 0.0, int(grid))  # fixed sequence: largest sets first
    exceed = n - np.searchsorted(c, lams, side="right")  # #{c_i > lambda}
    p = exceedance_pvalues(exceed, n, beta, method)
    rejected = np.cumprod(p <= delta).astype(bool)
    if not rejected[0]:
        return 1.0
    return float(lams[rejected].min())
