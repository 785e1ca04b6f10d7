"""Conformal Severity Control (seed paragraph 15): hierarchy-aware prediction sets for multi-label tasks.

* :mod:`~calib_ext.conformal.hierarchy` -- label trees from ATC codes or parent maps; tree distance.
* :mod:`~calib_ext.conformal.severity` -- mismatch severity and its exact curve over lambda.
* :mod:`~calib_ext.conformal.sets` -- nested flat and hierarchical prediction sets.
* :mod:`~calib_ext.conformal.risk_control` -- conformal risk control of the average loss.
* :mod:`~calib_ext.conformal.quantile` -- Learn-then-Test control of the upper quantile.
* :mod:`~calib_ext.conformal.estimator` -- :class:`ConformalSeverityControl` and the FNR baseline.
* :mod:`~calib_ext.conformal.data` -- synthetic EHR/ATC task and the ML-100K genre task.
"""

from calib_ext.conformal.estimator import ConformalSeverityControl, fnr_baseline
from calib_ext.conformal.hierarchy import ROOT, Hierarchy, HierarchyError
from calib_ext.conformal.quantile import ltt_threshold
from calib_ext.conformal.risk_control import crc_threshold
from calib_ext.conformal.sets import flat_entry_times, hierarchical_entry_times, prediction_sets
from calib_ext.conformal.severity import SeverityCurves, severity, true_label_matrix

__all__ = ["ConformalSeverityControl", "Hierarchy", "HierarchyError", "ROOT", "SeverityCurves",
           "crc_threshold", "flat_entry_times", "fnr_baseline", "hierarchical_entry_times", "ltt_threshold",
           "prediction_sets", "severity", "true_label_matrix"]
