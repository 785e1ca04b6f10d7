"""Backdoor adjustment on the bottleneck of a high-dimensional confounder.

Setting: confounder ``C`` (``d_c``), treatment ``T``, outcome ``Y``, with the SCBM
outcome mechanism reading ``C`` only through ``b(C) = B C`` (``r`` dimensions):
``Y := tau T + A b(C) + N_Y``. Then ``b(C)`` is a valid adjustment set (the
residual ``N_Y`` is independent of ``(T, b(C))``), so least squares of ``Y`` on
``(T, b(C))`` is unbiased for ``tau``, as is least squares on ``(T, C)``.

Efficiency. With Gaussian errors, given the design, ``Var(tau_hat) = sigma_Y^2 /
RSS_T`` where ``RSS_T`` is the residual sum of squares of ``T`` on the
adjustment set (plus intercept), ``RSS_T ~ v chi^2_{n-p-1}`` with
``v = Var(T | adjustment)`` when the design is Gaussian, and ``E[1/chi^2_k] = 1/(k-2)``:

    Var(tau_hat) = sigma_Y^2 / (v (n - p - 3)),   p = dimension of the adjustment set.

Adjusting for ``b(C)`` instead of ``C`` replaces ``p = d_c`` by ``p = r`` and can
only raise ``v`` (``Var(T | b(C)) >= Var(T | C)``, equal when ``T`` also reads ``C``
through ``b``), so the variance ratio full / bottleneck is at least
``(n - r - 3) / (n - d_c - 3)``: an explicit finite-sample gain that grows as
``d_c`` approaches ``n``. A bottleneck known up to bijection (``G B``) gives the
identical estimate. Standard errors are the classical OLS ones, conditional on the map.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from causal_ext.bottleneck.arrays import as_bottleneck_map, as_matrix, check_rows
from causal_ext.bottleneck.ols import ols

__all__ = ["adjusted_effect", "theoretical_backdoor_variance", "BackdoorAdjustment"]


def adjusted_effect(T: np.ndarray, Y: np.ndarray, adjust: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Effect ``(d_y, d_t)`` of ``T`` on ``Y`` and its standard errors, by OLS on ``(T, adjust)``."""
    d_t = T.shape[1]
    fit = ols(np.hstack([T, adjust]), Y)
    return fit.coef[:, :d_t], fit.stderr[:, :d_t]


def theoretical_backdoor_variance(n: int, adjustment_dim: int, outcome_noise_var: float,
                                  treatment_residual_var: float) -> float:
    """Exact ``Var(tau_hat)`` for Gaussian designs: ``sigma_Y^2 / (v (n - p - 3))`` (module docstring)."""
    if n - adjustment_dim - 3 <= 0:
        raise ValueError(f"the variance is finite only for n > adjustment_dim + 3; got n={n}, "
                         f"adjustment_dim={adjustment_dim}")
    return outcome_noise_var / (treatment_residual_var * (n - adjustment_dim - 3))


class BackdoorAdjustment:
    """Effect of ``T`` on ``Y`` adjusting for the confounder ``C``, in full or through its bottleneck.

    Args:
        bottleneck: ``None`` to adjust for all of ``C``; otherwise the map ``B``
            ``(r, d_c)`` (or a fitted ``ReducedRankBottleneck``) through which the
            outcome mechanism reads ``C`` — the adjustment set becomes ``b(C) = B C``.

    Attributes (after :meth:`fit`):
        effect_: ``(d_y, d_t)`` effect of ``T`` on ``Y``.
        stderr_: its standard errors.
        adjustment_dim_: dimension of the adjustment set (``d_c`` or ``r``).
        bottleneck_: the ``(r, d_c)`` map used, or ``None``.
    """

    def __init__(self, bottleneck: Any = None) -> None:
        self.bottleneck = bottleneck

    def fit(self, T: np.ndarray, Y: np.ndarray, C: np.ndarray) -> BackdoorAdjustment:
        """Estimate the effect from treatment ``T``, outcome ``Y`` and confounder ``C`` (rows = samples)."""
        T, Y, C = as_matrix("T", T), as_matrix("Y", Y), as_matrix("C", C)
        check_rows(T=T, Y=Y, C=C)
        B = None if self.bottleneck is None else as_bottleneck_map("bottleneck", self.bottleneck, C.shape[1])
        adjust = C if B is None else C @ B.T
        self.effect_, self.stderr_ = adjusted_effect(T, Y, adjust)
        self.adjustment_dim_ = adjust.shape[1]
        self.bottleneck_ = B
        return self
