"""Mediation through the bottleneck of a high-dimensional mediator.

Setting: treatment ``T`` (exogenous, or unconfounded given what is adjusted for),
mediator ``M`` (``d_m``), outcome ``Y``, with the SCBM outcome mechanism reading
``M`` only through ``b(M) = B M``: ``Y := c T + A b(M) + N_Y``, ``M := alpha T + N_M``.
In a linear SCBM the indirect (mediated) effect is ``A B alpha`` and the direct
effect is ``c``. It is estimated by the product of coefficients (Baron & Kenny
1986; the linear-SEM identity ``total = direct + indirect`` holds exactly in
sample), with the mediator replaced by its bottleneck:

    Delta = coefficient of b(M) on T            (r x d_t)
    Gamma, c_hat = coefficients of Y on (b(M), T) (d_y x r, d_y x d_t)
    indirect_hat = Gamma Delta,   direct_hat = c_hat.

Using ``b(M)`` is valid because ``N_Y`` is independent of ``(T, b(M))``; using all of
``M`` is valid too, but spends ``d_m`` instead of ``r`` degrees of freedom and, for
the part ``alpha' Var(beta_hat) alpha`` of the variance, keeps the component of
``alpha`` outside the row space of ``B`` that ``b(M)`` discards, so the bottleneck
estimate has smaller variance. Standard errors are first-order delta-method
(multivariate Sobel 1982) ones, treating the two regressions as independent
(their errors are orthogonal), conditional on the bottleneck map.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from causal_ext.bottleneck.arrays import as_bottleneck_map, as_matrix, check_rows
from causal_ext.bottleneck.ols import ols

__all__ = ["MediationFit", "product_of_coefficients", "MediationEffect"]


@dataclass(frozen=True)
class MediationFit:
    """Indirect and direct effects ``(d_y, d_t)`` with standard errors."""

    indirect: np.ndarray
    indirect_stderr: np.ndarray
    direct: np.ndarray
    direct_stderr: np.ndarray


def product_of_coefficients(T: np.ndarray, W: np.ndarray, Y: np.ndarray) -> MediationFit:
    """Indirect effect of ``T`` on ``Y`` through the mediator (summary) ``W``, and the direct effect."""
    d_t = T.shape[1]
    med = ols(T, W)                      # W on T: Delta (r, d_t)
    out = ols(np.hstack([T, W]), Y)      # Y on (T, W): [c_hat | Gamma]
    delta, gamma = med.coef, out.coef[:, d_t:]
    var_gamma_block = out.gram_inv[d_t:, d_t:]
    term_gamma = np.outer(np.diag(out.residual_cov), np.diag(delta.T @ var_gamma_block @ delta))
    term_delta = np.outer(np.diag(gamma @ med.residual_cov @ gamma.T), np.diag(med.gram_inv))
    return MediationFit(indirect=gamma @ delta, indirect_stderr=np.sqrt(term_gamma + term_delta),
                        direct=out.coef[:, :d_t], direct_stderr=out.stderr[:, :d_t])


class MediationEffect:
    """Effect of ``T`` on ``Y`` through the mediator ``M``, in full or through its bottleneck.

    Args:
        bottleneck: ``None`` to use all of ``M``; otherwise the map ``B`` ``(r, d_m)``
            (or a fitted ``ReducedRankBottleneck``) through which the outcome reads ``M``.

    Attributes (after :meth:`fit`):
        effect_: ``(d_y, d_t)`` indirect effect through the mediator.
        stderr_: its delta-method standard errors.
        direct_effect_, direct_stderr_: the direct effect ``T -> Y`` and its standard errors.
        total_effect_: ``direct_effect_ + effect_``.
        mediator_dim_: dimension of the mediator used (``d_m`` or ``r``).
        bottleneck_: the ``(r, d_m)`` map used, or ``None``.
    """

    def __init__(self, bottleneck: Any = None) -> None:
        self.bottleneck = bottleneck

    def fit(self, T: np.ndarray, M: np.ndarray, Y: np.ndarray) -> MediationEffect:
        """Estimate the effects from treatment ``T``, mediator ``M`` and outcome ``Y`` (rows = samples)."""
        T, M, Y = as_matrix("T", T), as_matrix("M", M), as_matrix("Y", Y)
        check_rows(T=T, M=M, Y=Y)
        B = None if self.bottleneck is None else as_bottleneck_map("bottleneck", self.bottleneck, M.shape[1])
        W = M if B is None else M @ B.T
        fit = product_of_coefficients(T, W, Y)
        self.effect_, self.stderr_ = fit.indirect, fit.indirect_stderr
        self.direct_effect_, self.direct_stderr_ = fit.direct, fit.direct_stderr
        self.total_effect_ = fit.direct + fit.indirect
        self.mediator_dim_ = W.shape[1]
        self.bottleneck_ = B
        return self
