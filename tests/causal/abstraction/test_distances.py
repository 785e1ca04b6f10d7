"""The three CAE distances against hand computations and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from causal_ext.abstraction.distances import discretize, get_distance, js, median_bandwidth, mmd, mse


def test_mse_is_squared_gap_over_pooled_variance():
    hl = np.array([0.0, 1.0, 2.0, 3.0]).reshape(4, 1, 1)
    ll = np.array([0.0, 1.0, 2.0, 5.0]).reshape(4, 1, 1)
    pooled = np.r_[0, 1, 2, 3, 0, 1, 2, 5].astype(float)
    np.testing.assert_allclose(mse(hl, ll), np.r_[0, 0, 0, 4] / pooled.var())
    # replicate means are compared, and dimensions add up
    hl2 = np.stack([np.zeros((3, 2)), np.ones((3, 2))], axis=2)  # [3, 2, 2]
    ll2 = hl2[:, ::-1] + np.array([0.0, 2.0])  # same replicate means, dim 1 shifted by 2
    var = np.concatenate([hl2.mean(1), ll2.mean(1)]).var(0).sum()
    np.testing.assert_allclose(mse(hl2, ll2), np.full(3, 4.0 / var))
    assert np.all(mse(np.ones((3, 1, 1)), np.ones((3, 1, 1))) == 0)


def test_js_matches_scipy_and_hand_values():
    # categories: P = (1, 0) vs Q = (1/2, 1/2): JSD = H(3/4, 1/4) - 1/2 = 0.311278...
    hl = np.zeros((1, 4, 1))
    ll = np.array([0.0, 1.0, 0.0, 1.0]).reshape(1, 4, 1)
    expected = -(0.75 * np.log2(0.75) + 0.25 * np.log2(0.25)) - 0.5
    np.testing.assert_allclose(js(hl, ll), [expected])
    np.testing.assert_allclose(js(hl, ll), [jensenshannon([1, 0], [0.5, 0.5], base=2) ** 2])
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 5, (6, 40, 1)), rng.integers(1, 7, (6, 40, 1))
    ref = []
    for i in range(6):
        p = np.bincount(a[i, :, 0], minlength=7) / 40
        q = np.bincount(b[i, :, 0], minlength=7) / 40
        ref.append(jensenshannon(p, q, base=2) ** 2)
    np.testing.assert_allclose(js(a, b), ref, atol=1e-12)
    # point masses: 0 if same category, 1 otherwise; dimensions are averaged
    pm_h = np.array([[[0, 0]], [[1, 2]]], dtype=float)
    pm_l = np.array([[[0, 1]], [[1, 2]]], dtype=float)
    np.testing.assert_allclose(js(pm_h, pm_l), [0.5, 0.0])


def test_js_bins_continuous_values_and_rounds_integers():
    ch, cl, k = discretize(np.array([0.0, 0.05, 0.95]), np.array([1.0, 0.5, 0.49]), bins=2)
    assert k == 2 and ch.tolist() == [0, 0, 1] and cl.tolist() == [1, 1, 0]
    ch, cl, k = discretize(np.array([2.0 + 1e-9, 3.0]), np.array([2.0, 3.0 - 1e-9]))
    assert k == 2 and ch.tolist() == cl.tolist() == [0, 1]


def test_mmd_point_masses_and_symmetry():
    hl = np.array([0.0, 0.0]).reshape(2, 1, 1)
    ll = np.array([0.0, 1.0]).reshape(2, 1, 1)
    s = 2.0
    np.testing.assert_allclose(mmd(hl, ll, bandwidth=s), [0.0, 2 * (1 - np.exp(-1 / (2 * s * s)))])
    rng = np.random.default_rng(1)
    x, y = rng.normal(0, 1, (3, 20, 2)), rng.normal(1, 1, (3, 20, 2))
    np.testing.assert_allclose(mmd(x, y, 1.0), mmd(y, x, 1.0))
    # explicit V-statistic for the first intervention
    k = lambda a, b: np.exp(-((a[:, None] - b[None]) ** 2).sum(-1) / 2.0)  # noqa: E731
    v = k(x[0], x[0]).mean() + k(y[0], y[0]).mean() - 2 * k(x[0], y[0]).mean()
    np.testing.assert_allclose(mmd(x, y, 1.0)[0], v)
    assert median_bandwidth(np.array([[0.0], [0.0], [3.0]])) == 3.0
    assert median_bandwidth(np.zeros((4, 1))) == 1.0


def test_distance_lookup_and_shape_errors():
    assert get_distance("mse") is mse and get_distance(js) is js
    with pytest.raises(ValueError, match="unknown"):
        get_distance("wasserstein")
    with pytest.raises(ValueError, match="matching n and d"):
        mse(np.zeros((2, 1, 1)), np.zeros((3, 1, 1)))
