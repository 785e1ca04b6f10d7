"""Estimate the bottleneck of one SCBM mechanism from observational data (estimator wrapper)."""

from __future__ import annotations

import numpy as np

from causal_ext.bottleneck.arrays import as_matrix, check_rows
from causal_ext.bottleneck.rank import RANK_RULES, RankSelection, select_rank
from causal_ext.bottleneck.rrr import regression_spectrum, truncate_spectrum

__all__ = ["ReducedRankBottleneck"]


class ReducedRankBottleneck:
    """Bottleneck ``b_j(x) = B x`` of the mechanism ``X_j := m_j(b_j(X_pa), N_j)``, up to bijection.

    Fits a reduced-rank regression of the child on its (stacked) parents, see
    :mod:`causal_ext.bottleneck.rrr`; the rank is ``rank`` when given, otherwise
    chosen by ``rank_rule`` (:mod:`causal_ext.bottleneck.rank`). Assumes the
    mechanism is not confounded (the parents are exogenous for the child), as
    the identification result does; with hidden confounding, fit it on data where
    the parents are randomised or transported from a source domain.

    Args:
        rank: fixed bottleneck dimension, or ``None`` to select it.
        rank_rule: ``"rsc"`` (singular-value threshold) or ``"cv"`` (cross-validation).
        whiten: weight the SVD by the inverse residual covariance (Gaussian MLE).
        threshold_scale: ``c`` of the ``"rsc"`` threshold.
        cv_folds: folds of the ``"cv"`` rule.
        max_rank: largest rank ``"cv"`` tries (default ``min(d_in, d_out)``).
        seed: fold assignment seed of ``"cv"``.

    Attributes (after :meth:`fit`):
        rank_: the bottleneck dimension used.
        bottleneck_: ``B_hat`` ``(rank_, d_in)``; scores ``transform(x)`` are standardised.
        loading_: ``A_hat`` ``(d_out, rank_)``.
        coef_: ``(d_out, d_in)`` reduced-rank coefficient ``A_hat B_hat``.
        singular_values_: singular values of the (whitened) fitted values.
        rank_selection_: the :class:`~causal_ext.bottleneck.rank.RankSelection`
            (``None`` if ``rank`` was fixed).
        mean_in_, mean_out_: training means used for centring.
        n_features_in_: ``d_in``.
    """

    def __init__(self, rank: int | None = None, rank_rule: str = "rsc", *, whiten: bool = True,
                 threshold_scale: float = 2.0, cv_folds: int = 5, max_rank: int | None = None,
                 seed: int = 0) -> None:
        self.rank = rank
        self.rank_rule = rank_rule
        self.whiten = whiten
        self.threshold_scale = threshold_scale
        self.cv_folds = cv_folds
        self.max_rank = max_rank
        self.seed = seed

    def fit(self, parents: np.ndarray, child: np.ndarray) -> ReducedRankBottleneck:
        """Learn the bottleneck from samples of the parents ``(n, d_in)`` and child ``(n, d_out)``."""
        if self.rank_rule not in RANK_RULES:
            raise ValueError(f"rank_rule must be one of {RANK_RULES}; got {self.rank_rule!r}")
        if self.rank is not None and self.rank < 0:
            raise ValueError(f"rank must be >= 0 or None (select it by rank_rule); got {self.rank}")
        X = as_matrix("parents", parents)
        Y = as_matrix("child", child)
        check_rows(parents=X, child=Y)
        selection: RankSelection | None = None
        rank = self.rank
        if rank is None:
            selection = select_rank(X, Y, self.rank_rule, whiten=self.whiten,
                                    threshold_scale=self.threshold_scale, folds=self.cv_folds,
                                    max_rank=self.max_rank, seed=self.seed)
            rank = selection.rank
        fit = truncate_spectrum(regression_spectrum(X, Y, whiten=self.whiten), rank)
        self.rank_ = rank
        self.bottleneck_ = fit.bottleneck
        self.loading_ = fit.loading
        self.coef_ = fit.coef
        self.singular_values_ = fit.spectrum.singular_values
        self.rank_selection_ = selection
        self.mean_in_ = X.mean(axis=0)
        self.mean_out_ = Y.mean(axis=0)
        self.n_features_in_ = X.shape[1]
        return self

    def _check_fitted(self, X: np.ndarray) -> np.ndarray:
        if not hasattr(self, "bottleneck_"):
            raise RuntimeError("ReducedRankBottleneck is not fitted; call fit(parents, child) first")
        X = as_matrix("parents", X, min_rows=1)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"parents must have {self.n_features_in_} columns; got {X.shape[1]}")
        return X

    def transform(self, parents: np.ndarray) -> np.ndarray:
        """Bottleneck scores ``b_hat(x) = B_hat (x - mean_in_)``, shape ``(n, rank_)``."""
        X = self._check_fitted(parents)
        return (X - self.mean_in_) @ self.bottleneck_.T

    def predict(self, parents: np.ndarray) -> np.ndarray:
        """Predicted child ``mean_out_ + A_hat b_hat(x)``, shape ``(n, d_out)``."""
        return self.mean_out_ + self.transform(parents) @ self.loading_.T
