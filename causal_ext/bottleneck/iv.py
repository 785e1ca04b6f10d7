"""Instrumental variables in SCBMs: naïve 2SLS is not identified; 2SLS on the bottleneck is.

Setting: instrument ``Z`` (``d_z``), treatment ``X`` (``d_x``), outcome ``Y``
(``d_y``), hidden confounding of ``X`` and ``Y``, and an SCBM outcome mechanism
``Y := A b(X) + ...`` with ``b(X) = B X`` of dimension ``r``. The 2SLS moment
``Cov(Y, Z) = E Cov(X, Z)`` pins down the ``(d_y, d_x)`` effect ``E = A B``
only on the column space of the first stage ``Pi = Cov(X, Z) Var(Z)^{-1}``. When
``rank(Pi) < d_x`` — always when ``d_z < d_x``, and also when ``X`` itself reads
``Z`` through a low-dimensional bottleneck — naïve 2SLS is not identified at the
population level, whatever ``n``. Taking the treatment to be the bottleneck
``b(X)`` leaves only ``A`` (``d_y x r``) unknown; it is identified as soon as the
first stage of ``b(X)`` on ``Z`` has rank ``r`` (order condition ``d_z >= r``),
and the full effect is ``E = A B``. A bottleneck ``G B`` with ``G`` invertible
gives the same ``E``, so a bottleneck known up to bijection suffices.

Identification is checked on the first stage: its rank is the number of
singular values of the fitted first stage above the noise threshold of
:func:`causal_ext.bottleneck.rank.select_rank` (exactly ``<= d_z``, so fewer
instruments than treatments is always caught). Standard errors are the classical
homoskedastic 2SLS ones, conditional on the bottleneck map.

Where the bottleneck comes from: the outcome mechanism is confounded, so ``B``
cannot be read off the IV sample itself; use one learned where ``X`` is not
confounded (randomised, or a source domain, with
:class:`~causal_ext.bottleneck.reduced_rank.ReducedRankBottleneck`) or known from
the domain.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from causal_ext.bottleneck.arrays import as_bottleneck_map, as_matrix, center, check_rows
from causal_ext.bottleneck.rank import RANK_RULES, RankSelection, numerical_rank, select_rank

__all__ = ["NotIdentifiedError", "TSLSFit", "first_stage_rank", "two_stage_least_squares",
           "TwoStageLeastSquares"]

_ON_DEFICIENCY = ("raise", "report")


class NotIdentifiedError(ValueError):
    """The instruments do not identify the effect (first-stage rank below the treatment dimension)."""


@dataclass(frozen=True)
class TSLSFit:
    """2SLS fit ``Y ≈ T coef^T`` with instruments ``Z``.

    Attributes:
        coef: ``(d_y, d_t)`` effect of the treatment ``T`` on ``Y``.
        stderr: classical standard errors of ``coef``.
        residual_cov: ``(d_y, d_y)`` structural residual covariance (divided by ``n - d_t - 1``).
        gram_inv: ``(d_t, d_t)`` inverse Gram matrix of the first-stage fitted treatment.
    """

    coef: np.ndarray
    stderr: np.ndarray
    residual_cov: np.ndarray
    gram_inv: np.ndarray


def first_stage_rank(Z: np.ndarray, T: np.ndarray, rule: str = "rsc", *, whiten: bool = True,
                     threshold_scale: float = 2.0) -> RankSelection:
    """Rank of the first stage (regression of ``T`` on ``Z``), chosen by ``rule``.

    Never exceeds ``min(d_z, d_t)``. ``whiten`` falls back to ``False`` when
    ``n <= d_z + d_t + 2`` (too few samples to whiten ``d_t`` responses).
    """
    n, d_z = Z.shape
    whiten = whiten and n - d_z - 1 >= T.shape[1] + 2
    sel = select_rank(Z, T, rule, whiten=whiten, threshold_scale=threshold_scale)
    structural = min(numerical_rank(center(Z)[0]), T.shape[1])
    if sel.rank > structural:
        sel = RankSelection(structural, sel.rule, sel.singular_values, sel.threshold, sel.cv_errors,
                            sel.cv_stderr)
    return sel


def _not_identified_message(rank: int, d_t: int, d_z: int, what: str) -> str:
    why = (f"fewer instruments ({d_z}) than treatment dimensions ({d_t})" if d_z < d_t
           else "the instruments move the treatment in fewer directions than it has, or too weakly")
    fix = (f"Pass bottleneck=B (an (r, d_x) map with r <= {rank} through which X acts on Y) to estimate "
           "the effect through the bottleneck b(X) = B X" if what == "X" else
           f"Use stronger or more instruments, or a bottleneck of dimension <= {rank}")
    return (f"effect not identified: first-stage rank {rank} < {d_t} = dimension of the treatment {what} "
            f"({why}); 2SLS pins the effect only on the {rank}-dimensional span the instruments move. "
            + fix)


def two_stage_least_squares(Z: np.ndarray, T: np.ndarray, Y: np.ndarray) -> TSLSFit:
    """2SLS of ``Y (n, d_y)`` on treatment ``T (n, d_t)`` with instruments ``Z (n, d_z)``, with intercepts.

    Raises :class:`NotIdentifiedError` when the first-stage fitted treatment is
    numerically rank-deficient (use :func:`first_stage_rank` for the statistical check).
    """
    n, d_t = T.shape
    Zc, Tc, Yc = center(Z, T, Y)
    t_hat = Zc @ np.linalg.lstsq(Zc, Tc, rcond=None)[0]
    gram = t_hat.T @ t_hat
    rank = numerical_rank(gram, rtol=1e-10)
    if rank < d_t:
        raise NotIdentifiedError(_not_identified_message(rank, d_t, Z.shape[1], "T (numerically)"))
    gram_inv = np.linalg.inv(gram)
    coef = (gram_inv @ (t_hat.T @ Yc)).T
    resid = Yc - Tc @ coef.T
    residual_cov = resid.T @ resid / (n - d_t - 1)
    stderr = np.sqrt(np.outer(np.diag(residual_cov), np.diag(gram_inv)))
    return TSLSFit(coef, stderr, residual_cov, gram_inv)


class TwoStageLeastSquares:
    """Effect of a high-dimensional treatment ``X`` on ``Y`` by 2SLS, naïve or through a bottleneck.

    Args:
        bottleneck: ``None`` for naïve 2SLS on all of ``X``; otherwise the map
            ``B`` ``(r, d_x)`` (or a fitted ``ReducedRankBottleneck``) through which
            ``X`` acts on ``Y`` — the treatment becomes ``b(X) = B X``.
        rank_rule: rule for the first-stage rank check (``"rsc"`` or ``"cv"``).
        on_rank_deficiency: ``"raise"`` a :class:`NotIdentifiedError`, or
            ``"report"``: warn, set ``identified_ = False``, and store the
            minimum-norm 2SLS solution in ``effect_`` (right only on the span the
            instruments move) with NaN standard errors.
        whiten: whiten the first-stage residuals in the rank check.
        threshold_scale: ``c`` of the ``"rsc"`` threshold.

    Attributes (after :meth:`fit`):
        effect_: ``(d_y, d_x)`` effect of ``X`` on ``Y`` (``E[Y|do(x)] - E[Y|do(x')] = effect_ (x - x')``).
        stderr_: its standard errors (conditional on the bottleneck map).
        bottleneck_effect_: ``(d_y, r)`` effect of ``b(X)`` on ``Y`` (bottleneck mode), else ``None``.
        bottleneck_: the ``(r, d_x)`` map used, or ``None``.
        treatment_dim_: dimension of the 2SLS treatment (``d_x`` naïve, ``r`` with a bottleneck).
        first_stage_rank_: estimated first-stage rank.
        first_stage_: the :class:`~causal_ext.bottleneck.rank.RankSelection` behind it.
        identified_: ``first_stage_rank_ == treatment_dim_``.
    """

    def __init__(self, bottleneck: Any = None, *, rank_rule: str = "rsc", on_rank_deficiency: str = "raise",
                 whiten: bool = True, threshold_scale: float = 2.0) -> None:
        self.bottleneck = bottleneck
        self.rank_rule = rank_rule
        self.on_rank_deficiency = on_rank_deficiency
        self.whiten = whiten
        self.threshold_scale = threshold_scale

    def fit(self, Z: np.ndarray, X: np.ndarray, Y: np.ndarray) -> TwoStageLeastSquares:
        """Estimate the effect from instruments ``Z``, treatment ``X`` and outcome ``Y`` (rows = samples)."""
        if self.on_rank_deficiency not in _ON_DEFICIENCY:
            raise ValueError(f"on_rank_deficiency must be one of {_ON_DEFICIENCY}; "
                             f"got {self.on_rank_deficiency!r}")
        if self.rank_rule not in RANK_RULES:
            raise ValueError(f"rank_rule must be one of {RANK_RULES}; got {self.rank_rule!r}")
        Z, X, Y = as_matrix("Z", Z), as_matrix("X", X), as_matrix("Y", Y)
        check_rows(Z=Z, X=X, Y=Y)
        B = None if self.bottleneck is None else as_bottleneck_map("bottleneck", self.bottleneck, X.shape[1])
        T = X if B is None else X @ B.T
        sel = first_stage_rank(Z, T, self.rank_rule, whiten=self.whiten, threshold_scale=self.threshold_scale)
        self.bottleneck_ = B
        self.treatment_dim_ = T.shape[1]
        self.first_stage_ = sel
        self.first_stage_rank_ = sel.rank
        self.identified_ = sel.rank == T.shape[1]
        lift = np.eye(X.shape[1]) if B is None else B
        if not self.identified_:
            msg = _not_identified_message(sel.rank, T.shape[1], Z.shape[1], "X" if B is None else "b(X)")
            if self.on_rank_deficiency == "raise":
                raise NotIdentifiedError(msg)
            warnings.warn(msg, RuntimeWarning, stacklevel=2)
            Zc, Tc, Yc = center(Z, T, Y)
            t_hat = Zc @ np.linalg.lstsq(Zc, Tc, rcond=None)[0]
            coef = np.linalg.lstsq(t_hat, Yc, rcond=None)[0].T  # minimum-norm solution
            self.bottleneck_effect_ = coef if B is not None else None
            self.effect_ = coef @ lift
            self.stderr_ = np.full_like(self.effect_, np.nan)
            return self
        fit = two_stage_least_squares(Z, T, Y)
        self.bottleneck_effect_ = fit.coef if B is not None else None
        self.effect_ = fit.coef @ lift
        lifted_var = np.einsum("kj,kl,lj->j", lift, fit.gram_inv, lift)
        self.stderr_ = np.sqrt(np.outer(np.diag(fit.residual_cov), lifted_var))
        return self
