"""Conformal Severity Control (CSC): post-hoc calibration of multi-label prediction sets under a
hierarchy-aware mismatch severity, and the plain CRC-on-false-negatives baseline.

Estimator contract (scikit-learn style): the constructor stores settings; :meth:`fit` takes calibration
scores ``[n, L]`` (per-label probabilities of any fixed predictor, never retrained) and true label sets,
and sets ``lambda_``; :meth:`predict` returns the sets ``S_lambda_`` for new scores.

Two guarantees (exchangeable calibration and test instances):

* ``mode="mean"`` -- conformal risk control of the average severity
  (:mod:`calib_ext.conformal.risk_control`): ``E[L_{n+1}(lambda_)] <= alpha``.
* ``mode="quantile"`` -- Learn-then-Test with binomial p-values and fixed-sequence testing
  (:mod:`calib_ext.conformal.quantile`): with probability ``>= 1 - delta`` over the calibration draw,
  ``P(L_{n+1}(lambda_) > alpha) <= beta`` -- the ``(1 - beta)``-quantile of severity is at most ``alpha``.

Choices the method description leaves open, and what is taken here:

* severity: each missed true label costs its tree distance to the nearest predicted label over the
  label set's largest distance, averaged over the patient's true labels (``aggregate="mean"``; ``"max"``
  is available) -- :mod:`calib_ext.conformal.severity`. The mean keeps severity on the false-negative
  scale (flat tree => FNR), the quantity clinicians already read as "share of medications missed".
* sets: ``sets="hierarchical"`` lets a likely ATC node contribute its best substance (noisy-OR node
  probability; :mod:`calib_ext.conformal.sets`); ``"flat"`` thresholds per-label probabilities.
* ``loss="fnr"`` with ``sets="flat"`` is the baseline: plain CRC on the false-negative rate, no hierarchy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from calib_ext.conformal.hierarchy import Hierarchy
from calib_ext.conformal.quantile import PVALUES, ltt_threshold
from calib_ext.conformal.risk_control import check_level, crc_threshold, crc_threshold_path
from calib_ext.conformal.sets import check_scores, flat_entry_times, hierarchical_entry_times, prediction_sets
from calib_ext.conformal.severity import AGGREGATES, SeverityCurves, hierarchy_distances, true_label_matrix

MODES = ("mean", "quantile")
SETS = ("hierarchical", "flat")
LOSSES = ("severity", "fnr")


class ConformalSeverityControl:
    """CSC (module docstring).

    Args:
        hierarchy: the label tree.
        labels: label names, one per score column (each a node of ``hierarchy``).
        alpha: target average severity (``mode="mean"``) or severity tolerance (``mode="quantile"``).
        mode: ``"mean"`` (CRC) or ``"quantile"`` (Learn-then-Test).
        beta: allowed share of patients above ``alpha`` (``mode="quantile"``).
        delta: allowed failure probability of the quantile guarantee over calibration draws.
        aggregate: ``"mean"`` or ``"max"`` over a patient's true labels.
        sets: ``"hierarchical"`` or ``"flat"`` set family.
        loss: ``"severity"``, or ``"fnr"`` (the no-hierarchy baseline's loss).
        pvalue: ``"binomial"`` or ``"hoeffding"`` (``mode="quantile"``).
        grid: Learn-then-Test grid size on [0, 1].

    Attributes:
        lambda_: the calibrated threshold.
        n_calibration_: number of calibration instances.
        calibration_risk_: mean calibration loss at ``lambda_`` (``mode="mean"``) or share of calibration
            instances above ``alpha`` (``mode="quantile"``).
    """

    def __init__(self, hierarchy: Hierarchy, labels: Sequence[str], alpha: float = 0.1, *, mode: str = "mean",
                 beta: float = 0.1, delta: float = 0.1, aggregate: str = "mean", sets: str = "hierarchical",
                 loss: str = "severity", pvalue: str = "binomial", grid: int = 1001) -> None:
        self.hierarchy = hierarchy
        self.labels = list(labels)
        self.alpha, self.mode, self.beta, self.delta = alpha, mode, beta, delta
        self.aggregate, self.sets, self.loss, self.pvalue, self.grid = aggregate, sets, loss, pvalue, grid

    def _validate(self) -> None:
        for key, value, allowed in (("mode", self.mode, MODES), ("sets", self.sets, SETS),
                                    ("loss", self.loss, LOSSES), ("aggregate", self.aggregate, AGGREGATES),
                                    ("pvalue", self.pvalue, PVALUES)):
            if value not in allowed:
                raise ValueError(f"{key}={value!r}; use one of {allowed}.")
        check_level("alpha", self.alpha)
        if self.mode == "quantile":
            check_level("beta", self.beta)
            check_level("delta", self.delta)
            if self.loss != "severity":
                raise ValueError("mode='quantile' controls the severity's upper quantile; "
                                 "use loss='severity'.")
        if len(set(self.labels)) != len(self.labels):
            raise ValueError("labels must be distinct (one per score column).")
        self.hierarchy.check_labels(self.labels)

    def entry_times(self, scores: np.ndarray) -> np.ndarray:
        """Entry times ``[n, L]`` of this estimator's set family (:mod:`calib_ext.conformal.sets`)."""
        check_scores(scores, len(self.labels))
        if self.sets == "flat":
            return flat_entry_times(scores)
        return hierarchical_entry_times(scores, self.hierarchy, self.labels)

    def curves(self, scores: np.ndarray, true_sets: Any) -> SeverityCurves:
        """:class:`SeverityCurves` of ``scores`` against ``true_sets`` (label lists or a 0/1 matrix)."""
        self._validate()
        true = true_label_matrix(true_sets, self.labels)
        if len(true) != len(np.asarray(scores)):
            raise ValueError(f"scores have {len(np.asarray(scores))} rows but true_sets {len(true)}; "
                             "pass one true set per scored instance.")
        dist = hierarchy_distances(self.hierarchy, self.labels)
        return SeverityCurves(self.entry_times(scores), true, dist, self.aggregate)

    def fit(self, scores: np.ndarray, true_sets: Any) -> ConformalSeverityControl:
        """Calibrate ``lambda_`` on calibration ``scores`` and their true label sets."""
        return self.fit_curves(self.curves(scores, true_sets))

    def fit_curves(self, curves: SeverityCurves) -> ConformalSeverityControl:
        """Calibrate from precomputed curves (e.g. a :meth:`SeverityCurves.subset` of a pool)."""
        self._validate()
        n = len(curves)
        if self.mode == "mean":
            losses = curves.fnr_losses if self.loss == "fnr" else curves.losses
            if self.loss == "fnr" or self.aggregate == "mean":  # exact step function in one sort
                self.lambda_ = crc_threshold_path(*curves.risk_path(self.loss), n, self.alpha)
            else:
                self.lambda_ = crc_threshold(lambda lam: float(losses(lam).mean()), n, self.alpha,
                                             curves.breakpoints(), bound=1.0)
            self.calibration_risk_ = float(losses(self.lambda_).mean())
        else:
            critical = curves.critical_lambdas(self.alpha)
            self.lambda_ = ltt_threshold(critical, self.beta, self.delta, grid=self.grid, method=self.pvalue)
            self.calibration_risk_ = float((critical > self.lambda_).mean())
        self.n_calibration_ = n
        return self

    def predict(self, scores: np.ndarray) -> np.ndarray:
        """Boolean prediction sets ``[n, L]`` at ``lambda_``."""
        if not hasattr(self, "lambda_"):
            raise RuntimeError("ConformalSeverityControl is not fitted; call fit(scores, true_sets) first.")
        return prediction_sets(self.entry_times(scores), self.lambda_)

    def predict_labels(self, scores: np.ndarray) -> list[list[str]]:
        """Prediction sets as label-name lists."""
        return [[self.labels[j] for j in np.flatnonzero(row)] for row in self.predict(scores)]


def fnr_baseline(hierarchy: Hierarchy, labels: Sequence[str], alpha: float = 0.1) -> ConformalSeverityControl:
    """Plain conformal risk control of the false-negative rate on flat threshold sets (no hierarchy)."""
    return ConformalSeverityControl(hierarchy, labels, alpha, mode="mean", sets="flat", loss="fnr")
