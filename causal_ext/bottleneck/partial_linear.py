"""Backdoor adjustment through a learned (possibly nonlinear) bottleneck: cross-fitted partialling out.

Setting: confounder ``C`` (``d_c``), treatment ``T`` (``d_t``), outcome ``Y`` (``d_y``) with

    Y = tau T + g(b(C)) + eps,   E[eps | T, C] = 0,      T = m(b(C)) + v,

where ``b`` is the bottleneck through which the mechanisms read ``C`` (linear or not).
``tau`` is identified by Robinson's (1988) partialling out:

    R_T = T - E[T | C],   R_Y = Y - E[Y | C],   tau = E[R_Y R_T^T] E[R_T R_T^T]^{-1},

and ``E[. | C] = E[. | b(C)]``, so the two conditional means are functions of the
low-dimensional ``b(C)`` only — which is what a bottleneck learner (a
:class:`~causal_ext.bottleneck.neural.NeuralBottleneck` predicting ``(T, Y)`` from ``C``
through ``k`` units, or a linear :class:`~causal_ext.bottleneck.reduced_rank.ReducedRankBottleneck`)
fits. The conditional means are *cross-fitted* (Chernozhukov et al. 2018, "double/debiased
machine learning"): rows are split into ``K`` folds and fold ``f``'s residuals use a learner
fitted on the other folds, so the learner's overfitting does not leak into ``tau_hat``.

Estimate and standard errors (per outcome coordinate ``i``; ``J = sum_n R_T,n R_T,n^T``)::

    tau_hat[i] = J^{-1} sum_n R_T,n R_Y,n[i]
    Var(tau_hat[i]) = J^{-1} (sum_n R_T,n R_T,n^T e_n[i]^2) J^{-1},   e = R_Y - R_T tau_hat^T

(the heteroskedasticity-robust sandwich; it is valid when the learner's error is
small enough, the usual product-rate condition of double ML). When the learner
misses part of ``b(C)`` — a bottleneck layer narrower than ``r``, or too few samples
— ``R_T`` and ``R_Y`` keep a common confounded component and ``tau_hat`` is biased;
the interval does not know that.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

import numpy as np

from causal_ext.bottleneck.arrays import as_matrix, check_rows

__all__ = ["ConditionalMeanLearner", "crossfit_predictions", "partialling_out", "PartiallyLinearBackdoor"]


class ConditionalMeanLearner(Protocol):
    """What the adjustment needs: ``fit(parents, child)`` and ``predict(parents)`` (unfitted, copyable)."""

    def fit(self, parents: np.ndarray, child: np.ndarray) -> Any: ...

    def predict(self, parents: np.ndarray) -> np.ndarray: ...


def crossfit_predictions(learner: ConditionalMeanLearner, X: np.ndarray, Y: np.ndarray, n_folds: int,
                         rng: np.random.Generator) -> np.ndarray:
    """Out-of-fold predictions of ``Y`` from ``X``: fold ``f`` by a copy fitted on the other folds."""
    n = X.shape[0]
    folds = rng.permutation(n) % n_folds
    out = np.empty_like(Y)
    for f in range(n_folds):
        test = folds == f
        model = copy.deepcopy(learner).fit(X[~test], Y[~test])
        out[test] = model.predict(X[test])
    return out


def partialling_out(R_T: np.ndarray, R_Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(tau_hat, stderr)``, each ``(d_y, d_t)``, from residualised treatment and outcome (see module)."""
    J = R_T.T @ R_T
    if np.linalg.matrix_rank(J) < R_T.shape[1]:
        raise ValueError("the residualised treatment is collinear (the learner predicts T exactly from C): "
                         "the effect is not identified by partialling out on this sample")
    J_inv = np.linalg.inv(J)
    tau = (J_inv @ R_T.T @ R_Y).T
    resid = R_Y - R_T @ tau.T
    stderr = np.empty_like(tau)
    for i in range(R_Y.shape[1]):
        meat = (R_T * resid[:, [i]] ** 2).T @ R_T
        stderr[i] = np.sqrt(np.diag(J_inv @ meat @ J_inv))
    return tau, stderr


class PartiallyLinearBackdoor:
    """Effect of ``T`` on ``Y`` adjusting for ``C`` through a learned conditional mean (cross-fitted).

    Args:
        learner: an unfitted conditional-mean learner of ``(T, Y)`` given ``C``, copied
            per fold (e.g. ``NeuralBottleneck(rank=2)`` or ``ReducedRankBottleneck(whiten=False)``).
        n_folds: cross-fitting folds (>= 2).
        seed: seed of the fold assignment.

    Attributes (after :meth:`fit`):
        effect_: ``(d_y, d_t)`` effect.
        stderr_: robust standard errors.
        treatment_residual_var_: mean of ``R_T^2`` per treatment coordinate (small: weak overlap).
    """

    def __init__(self, learner: ConditionalMeanLearner, n_folds: int = 5, seed: int = 0) -> None:
        self.learner = learner
        self.n_folds = n_folds
        self.seed = seed

    def fit(self, T: np.ndarray, Y: np.ndarray, C: np.ndarray) -> PartiallyLinearBackdoor:
        """Estimate the effect from treatment ``T``, outcome ``Y`` and confounder ``C`` (rows = samples)."""
        T, Y, C = as_matrix("T", T), as_matrix("Y", Y), as_matrix("C", C)
        n = check_rows(T=T, Y=Y, C=C)
        if int(self.n_folds) != self.n_folds or not 2 <= self.n_folds <= n // 2:
            raise ValueError(f"n_folds must be an integer between 2 and n/2 = {n // 2}; got {self.n_folds!r}")
        for method in ("fit", "predict"):
            if not callable(getattr(self.learner, method, None)):
                raise ValueError(f"learner must have fit(parents, child) and predict(parents); "
                                 f"{type(self.learner).__name__} has no {method}()")
        d_t = T.shape[1]
        TY = np.hstack([T, Y])
        rng = np.random.default_rng(self.seed)
        fitted = crossfit_predictions(self.learner, C, TY, int(self.n_folds), rng)
        R = TY - fitted
        self.effect_, self.stderr_ = partialling_out(R[:, :d_t], R[:, d_t:])
        self.treatment_residual_var_ = np.mean(R[:, :d_t] ** 2, axis=0)
        return self
