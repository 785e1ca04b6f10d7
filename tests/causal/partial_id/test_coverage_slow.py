"""Monte-Carlo coverage of the influence-function intervals (slow: many simulated data sets)."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.partial_id import ConditionalOTBounds, OTBounds

from .test_conditional import _design, _design_truth

pytestmark = pytest.mark.slow


def _coverage(intervals: np.ndarray, truth: tuple[float, float]) -> np.ndarray:
    """Share of (reps, 2, 2) intervals that contain the lower / upper truth."""
    t = np.asarray(truth)
    return np.mean((intervals[:, :, 0] <= t) & (t <= intervals[:, :, 1]), axis=0)


def test_unconditional_intervals_cover() -> None:
    """N(1, 4) vs N(0, 1), 300 per arm, 200 data sets: both 95% intervals cover 0.88-0.99 of the time.

    Finite-sample coverage of the delta-method interval is a little below nominal
    (measured 0.925 / 0.91 with these seeds); the band fails for a wrong variance
    (a factor 1.5 in the se moves coverage to about 0.80 or 0.99+).
    """
    truth = (1.0 + 1.0, 1.0 + 9.0)
    cis = []
    for r in range(200):
        rng = np.random.default_rng(r)
        cis.append(OTBounds().fit(rng.normal(1, 2, 300), rng.normal(0, 1, 300)).ci_)
    cover = _coverage(np.array(cis), truth)
    assert np.all((cover >= 0.88) & (cover <= 0.99)), cover


def test_wavelet_intervals_cover() -> None:
    """Heteroscedastic Gaussian design, confounded treatment, n = 1000 total, 200 data sets.

    The Monte-Carlo sd of a coverage estimate at 200 reps is 0.015; the band
    0.87-0.99 allows the small smoothing bias the benchmark reports (measured
    0.93 / 0.90 with these seeds).
    """
    truth = _design_truth()
    cis = np.array([ConditionalOTBounds().fit(*_design(1000, seed=100 + r)).ci_ for r in range(200)])
    cover = _coverage(cis, truth)
    assert np.all((cover >= 0.87) & (cover <= 0.99)), cover
