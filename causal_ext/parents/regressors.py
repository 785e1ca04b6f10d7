"""Pluggable regressors for E[Y | S] and cross-fitted (out-of-fold) residuals.

A regressor is anything with scikit-learn's ``fit(X, y)`` / ``predict(X)``; it
is cloned (:func:`sklearn.base.clone`) for every fold, so one instance can be
passed around. :func:`make_regressor` builds the named presets:

``"linear"``
    Ordinary least squares.
``"spline"`` (the default of :class:`~causal_ext.parents.indrm.IndRM`)
    Additive cubic regression splines: each regressor is expanded in a cubic
    B-spline basis (8 knots at quantiles, linear extrapolation), followed by a
    lightly penalised ridge. It fits smooth non-linear additive effects at the
    cost of a linear model, which is what makes a subset search affordable; it
    cannot represent interactions (then the residual stays dependent on S and
    the set is rejected, the conservative direction).
``"kernel_ridge"``
    Gaussian kernel ridge regression on standardised inputs, bandwidth by the
    median heuristic (the same rule as the HSIC kernels), ``alpha=0.1``. Fits
    interactions; O(n^3) per fold, so use it for n up to a few thousand.
``"gbm"``
    Histogram gradient boosting (scikit-learn), 200 iterations, early stopping off.
``"mlp"``
    A small multilayer perceptron (2 x 32 tanh units, L2 1e-3) on standardised
    inputs and target, trained by L-BFGS (scikit-learn's advice for small data
    sets; Adam with early stopping fitted x^2 on 400 rows to R^2 0.5 only).

Cross-fitting (:func:`crossfit_residuals`): the rows are split into K random
folds; each fold's residual is ``y - f_{-k}(X)`` with ``f_{-k}`` fitted on the
other folds, so no residual is computed with a model that saw its row. The
empty regressor set predicts the training folds' mean.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.compose import TransformedTargetRegressor
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.kernel_ridge import KernelRidge
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import SplineTransformer, StandardScaler

from causal_ext.parents.hsic import median_bandwidth


class Regressor(Protocol):
    """What IndRM needs from a regressor: scikit-learn's fit / predict."""

    def fit(self, X: np.ndarray, y: np.ndarray) -> Any: ...  # noqa: N803 (sklearn's argument name)

    def predict(self, X: np.ndarray) -> np.ndarray: ...  # noqa: N803


class MedianKernelRidge(RegressorMixin, BaseEstimator):
    """Gaussian kernel ridge regression with the median-heuristic bandwidth on standardised inputs.

    Args:
        alpha: ridge penalty (on the kernel scale; inputs are standardised and
            the target is centred, so 0.1 is a mild default).
    """

    def __init__(self, alpha: float = 0.1) -> None:
        self.alpha = alpha

    def fit(self, X: np.ndarray, y: np.ndarray) -> MedianKernelRidge:  # noqa: N803
        """Standardise X, set gamma = 1 / (2 sigma^2) from the median heuristic, fit."""
        self.scaler_ = StandardScaler().fit(X)
        z = self.scaler_.transform(X)
        sigma = median_bandwidth(z)
        self.y_mean_ = float(np.mean(y))
        self.model_ = KernelRidge(alpha=self.alpha, kernel="rbf", gamma=1.0 / (2.0 * sigma * sigma))
        self.model_.fit(z, np.asarray(y, dtype=float) - self.y_mean_)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:  # noqa: N803
        """Predictions for the rows of X."""
        return self.model_.predict(self.scaler_.transform(X)) + self.y_mean_


REGRESSORS = ("linear", "spline", "kernel_ridge", "gbm", "mlp")
"""Names accepted by :func:`make_regressor`."""


def make_regressor(name: str, random_state: int = 0) -> Regressor:
    """A fresh regressor preset by name (see the module docstring)."""
    if name == "linear":
        return LinearRegression()
    if name == "spline":
        return make_pipeline(
            SplineTransformer(n_knots=8, degree=3, knots="quantile", extrapolation="linear"),
            Ridge(alpha=1e-3),
        )
    if name == "kernel_ridge":
        return MedianKernelRidge(alpha=0.1)
    if name == "gbm":
        return HistGradientBoostingRegressor(max_iter=200, learning_rate=0.05, early_stopping=False,
                                             random_state=random_state)
    if name == "mlp":
        mlp = MLPRegressor(hidden_layer_sizes=(32, 32), activation="tanh", solver="lbfgs", alpha=1e-3,
                           max_iter=1000, random_state=random_state)
        return TransformedTargetRegressor(make_pipeline(StandardScaler(), mlp), transformer=StandardScaler())
    raise ValueError(f"regressor must be one of {', '.join(REGRESSORS)} or an object with fit/predict; "
                     f"got {name!r}.")


def resolve_regressor(regressor: str | Regressor, random_state: int = 0) -> Regressor:
    """A name becomes its preset; an object must have ``fit`` and ``predict`` and is returned as is."""
    if isinstance(regressor, str):
        return make_regressor(regressor, random_state)
    if not (hasattr(regressor, "fit") and hasattr(regressor, "predict")):
        raise ValueError(f"regressor must be a preset name ({', '.join(REGRESSORS)}) or an object with "
                         f"fit(X, y) and predict(X); got {type(regressor).__name__}.")
    return regressor


def fold_ids(n: int, n_folds: int, rng: np.random.Generator | int | None = None) -> np.ndarray:
    """A random assignment of ``n`` rows to ``n_folds`` folds of (almost) equal size."""
    if not 2 <= n_folds <= n:
        raise ValueError(f"n_folds must be between 2 and the number of rows ({n}); got {n_folds}.")
    rng = np.random.default_rng(rng)
    return rng.permutation(np.arange(n) % n_folds)


def crossfit_residuals(X: np.ndarray, y: np.ndarray, regressor: Regressor, folds: np.ndarray) -> np.ndarray:  # noqa: N803
    """Out-of-fold residuals ``y - f_{-k}(X)``; ``X`` with zero columns predicts the training mean.

    Args:
        X: (n, p) regressors (p may be 0).
        y: (n,) target.
        regressor: a scikit-learn-style regressor, cloned for every fold.
        folds: (n,) fold id of each row (from :func:`fold_ids`).
    """
    y = np.asarray(y, dtype=float)
    resid = np.empty_like(y)
    for k in np.unique(folds):
        test = folds == k
        train = ~test
        if X.shape[1] == 0:
            resid[test] = y[test] - y[train].mean()
            continue
        model = clone(regressor).fit(X[train], y[train])
        resid[test] = y[test] - np.asarray(model.predict(X[test]), dtype=float).ravel()
    return resid


__all__ = [
    "REGRESSORS",
    "MedianKernelRidge",
    "Regressor",
    "crossfit_residuals",
    "fold_ids",
    "make_regressor",
    "resolve_regressor",
]
