"""HSIC test: statistic against a direct formula, level (uniform p-values), power, input errors."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.spatial.distance import pdist

from causal_ext.parents.hsic import (
    center_gram,
    gaussian_gram,
    hsic_gamma,
    hsic_permutation,
    hsic_test,
    median_bandwidth,
    standardize,
)


def test_statistic_matches_trace_formula_and_gram_is_gaussian():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(40, 2)), rng.normal(size=40)
    k, lmat = gaussian_gram(x), gaussian_gram(y)
    z = standardize(x)
    sigma = np.median(pdist(z))
    assert median_bandwidth(z) == pytest.approx(sigma)
    d2 = ((z[:, None, :] - z[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(k, np.exp(-d2 / (2 * sigma**2)), rtol=1e-10, atol=1e-12)
    n = 40
    h = np.eye(n) - 1.0 / n
    np.testing.assert_allclose(center_gram(k), h @ k @ h, atol=1e-12)
    expected = np.trace(k @ h @ lmat @ h) / n  # n * HSIC_b with HSIC_b = tr(KHLH) / n^2
    assert hsic_gamma(k, lmat).statistic == pytest.approx(expected, rel=1e-10)
    assert hsic_permutation(k, lmat, 10, rng=0).statistic == pytest.approx(expected, rel=1e-10)


def test_gamma_level_rejection_rate_within_binomial_band():
    """Under independence the gamma test rejects at alpha = 0.05 about 5% of the time (n = 100)."""
    rng = np.random.default_rng(1)
    reps = 400
    rejections = sum(hsic_test(rng.normal(size=100), rng.exponential(size=100)).pvalue < 0.05
                     for _ in range(reps))
    lo, hi = stats.binom.ppf([0.0005, 0.9995], reps, 0.05)  # 99.9% band
    assert lo <= rejections <= hi


def test_gamma_pvalues_uniform_under_independence():
    rng = np.random.default_rng(2)
    ps = [hsic_test(rng.normal(size=300), rng.exponential(size=300)).pvalue for _ in range(200)]
    assert stats.kstest(ps, "uniform").pvalue > 1e-3


def test_permutation_pvalues_uniform_under_independence():
    rng = np.random.default_rng(3)
    ps = [hsic_test(rng.normal(size=50), rng.uniform(size=(50, 2)), method="permutation", n_permutations=99,
                    rng=rng).pvalue for _ in range(200)]
    assert stats.kstest(ps, "uniform").pvalue > 1e-3


@pytest.mark.parametrize("method", ["gamma", "permutation"])
def test_power_x_against_x_squared(method):
    rng = np.random.default_rng(4)
    x = rng.uniform(-1, 1, 200)
    res = hsic_test(x, x**2, method=method, n_permutations=199, rng=0)
    assert res.pvalue <= (1e-6 if method == "gamma" else 1 / 200)
    assert np.corrcoef(x, x**2)[0, 1] ** 2 < 0.05  # uncorrelated: a linear test would miss it


def test_power_multivariate_interaction():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 2))
    assert hsic_test(x, x[:, 0] * x[:, 1]).pvalue < 1e-4


def test_subsample_and_log_pvalue():
    rng = np.random.default_rng(6)
    x = rng.normal(size=500)
    res = hsic_test(x, x + rng.normal(size=500), max_samples=120, rng=0)
    assert res.n == 120
    assert res.log_pvalue == pytest.approx(np.log(res.pvalue)) or res.pvalue == 0.0
    z = rng.normal(size=2000)
    strong = hsic_test(z, z + 0.3 * rng.normal(size=2000))
    assert strong.pvalue == 0.0  # underflows, but the log p-value stays finite, so sets can be ranked
    assert -np.inf < strong.log_pvalue < -745
    weaker = hsic_test(z[:1000], z[:1000] + 0.3 * rng.normal(size=1000))
    assert strong.log_pvalue < weaker.log_pvalue < -300
    assert hsic_test(x, np.ones(500)).pvalue == 1.0  # a constant carries no dependence


def test_bad_input_raises():
    x = np.zeros(10)
    with pytest.raises(ValueError, match="same number of rows"):
        hsic_test(x, np.zeros(11))
    with pytest.raises(ValueError, match="NaN"):
        hsic_test(np.r_[x[:-1], np.nan], x)
    with pytest.raises(ValueError, match="method"):
        hsic_test(x, x, method="kci")
    with pytest.raises(ValueError, match="max_samples"):
        hsic_test(x, x, max_samples=3)
