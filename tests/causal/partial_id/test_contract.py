"""Estimator contract and input errors: constructors store, fit learns and returns self, bad input named."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.partial_id import (
    BinnedConditionalOTBounds,
    ConditionalOTBounds,
    OTBounds,
    effect_variance_bounds,
)
from causal_ext.partial_id.wavelets import NormalScoreScaler

RNG = np.random.default_rng(0)
Y1, Y0 = RNG.normal(size=60), RNG.normal(size=50)
X1, X0 = RNG.uniform(size=60), RNG.uniform(size=50)


def test_constructors_only_store_and_fit_returns_self() -> None:
    est = ConditionalOTBounds(level_x=-1, alpha=7.0)          # nonsense is only checked in fit
    assert est.level_x == -1 and not hasattr(est, "lower_")
    for est in (OTBounds(), ConditionalOTBounds(), BinnedConditionalOTBounds()):
        assert est.fit(Y1, Y0, X1, X0) is est
        assert est.lower_ <= est.upper_ and est.bounds_ == (est.lower_, est.upper_)
        assert est.n_used_ == 110 and est.ci_.shape == (2, 2) and est.se_.shape == (2,)


def test_unfitted_estimator_raises() -> None:
    with pytest.raises(RuntimeError, match="not fitted"):
        effect_variance_bounds(OTBounds())


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"y1": np.ones((4, 2))}, "y1 must be a 1-D array"),
    ({"y0": np.r_[Y0[:-1], np.nan]}, "y0 contains NaN"),
    ({"y1": np.ones(1)}, "y1 has 1 outcomes"),
    ({"x1": X1[:-1]}, "x1 has 59 rows but its outcome array has 60"),
    ({"x0": np.c_[X0, X0]}, "x1 has 1 covariates but x0 has 2"),
    ({"x1": None}, "x1 and x0 .* are both required"),
])
def test_bad_data_is_named(kwargs: dict, match: str) -> None:
    data = {"y1": Y1, "y0": Y0, "x1": X1, "x0": X0, **kwargs}
    with pytest.raises(ValueError, match=match):
        ConditionalOTBounds().fit(**data)


@pytest.mark.parametrize(("est", "match"), [
    (OTBounds(cost="cubic"), "cost='cubic' is unknown"),
    (OTBounds(alpha=1.5), "alpha=1.5"),
    (OTBounds(cost=lambda a, b: np.zeros(3)), "cost returned shape"),
    (ConditionalOTBounds(level_x=-1), "level_x=-1"),
    (ConditionalOTBounds(outcome_scale="log"), "outcome_scale='log'"),
    (ConditionalOTBounds(wavelet="sym4"), "wavelet='sym4'"),
    (BinnedConditionalOTBounds(neighbors=1), "neighbors=1"),
])
def test_bad_settings_are_named(est, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        est.fit(Y1, Y0, X1, X0)


def test_effect_variance_needs_the_quadratic_cost() -> None:
    with pytest.raises(ValueError, match="cost='quadratic'"):
        effect_variance_bounds(OTBounds(cost="absolute").fit(Y1, Y0))


def test_no_overlap_is_an_error_and_partial_overlap_is_counted() -> None:
    """Haar cells [0, .25), ..., [.75, 1]: treated only in the first two, controls only in the last two."""
    x1, x0 = np.linspace(0.0, 0.3, 60), np.linspace(0.7, 1.0, 50)
    haar = ConditionalOTBounds(wavelet="haar", level_x=2, level_y=3, grid_x=4)
    with pytest.raises(ValueError, match="positivity"):
        haar.fit(Y1, Y0, x1, x0)
    x0_overlap = np.r_[np.linspace(0.0, 0.2, 10), np.linspace(0.7, 1.0, 40)]
    haar.fit(Y1, Y0, x1, x0_overlap)
    assert 0 < haar.n_used_ < 110


def test_normal_score_scaler_round_trip() -> None:
    y = np.exp(RNG.normal(size=200))
    sc = NormalScoreScaler.fit(y)
    u = sc.transform(y)[:, 0]
    assert u.min() == 0.0 and u.max() == 1.0
    assert np.all(np.diff(u[np.argsort(y)]) > 0)                 # monotone
    np.testing.assert_allclose(sc.inverse(u)[:, 0], y, rtol=1e-12)
