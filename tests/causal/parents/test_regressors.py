"""Regressor presets and cross-fitting."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.neighbors import KNeighborsRegressor
from threadpoolctl import threadpool_limits

from causal_ext.parents.regressors import (
    REGRESSORS,
    crossfit_residuals,
    fold_ids,
    make_regressor,
    resolve_regressor,
)


@pytest.mark.parametrize("name", REGRESSORS)
def test_presets_fit_a_smooth_function(name):
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, size=(400, 1))
    y = x[:, 0] ** 2 if name != "linear" else 2 * x[:, 0]
    y = y + 0.1 * rng.normal(size=400)
    with threadpool_limits(1):  # gbm's OpenMP threads oversubscribe a shared machine
        resid = crossfit_residuals(x, y, make_regressor(name), fold_ids(400, 5, 0))
    r2 = 1 - resid.var() / y.var()
    assert r2 > 0.9, f"{name}: out-of-fold R^2 {r2:.3f}"


def test_residuals_are_out_of_fold():
    """A 1-nearest-neighbour fit has zero in-sample residuals; cross-fitted ones are not zero."""
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(200, 1)), rng.normal(size=200)
    resid = crossfit_residuals(x, y, KNeighborsRegressor(n_neighbors=1), fold_ids(200, 4, 0))
    assert np.all(resid != 0)
    assert resid.var() > 1.5 * y.var()  # noise minus a neighbour's noise: about twice the variance


def test_empty_set_predicts_training_fold_mean():
    y = np.arange(10.0)
    folds = np.array([0, 1] * 5)
    resid = crossfit_residuals(np.empty((10, 0)), y, make_regressor("linear"), folds)
    expected = np.where(folds == 0, y - y[folds == 1].mean(), y - y[folds == 0].mean())
    np.testing.assert_allclose(resid, expected)


def test_fold_ids_balanced_and_seeded():
    f = fold_ids(103, 5, 7)
    assert sorted(np.bincount(f)) == [20, 20, 21, 21, 21]
    np.testing.assert_array_equal(f, fold_ids(103, 5, 7))


def test_bad_regressor_and_folds_raise():
    with pytest.raises(ValueError, match="regressor must be one of"):
        make_regressor("svm")
    with pytest.raises(ValueError, match="fit"):
        resolve_regressor(object())
    with pytest.raises(ValueError, match="n_folds"):
        fold_ids(10, 1)
