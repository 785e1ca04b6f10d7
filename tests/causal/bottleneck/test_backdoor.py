"""Backdoor adjustment on the bottleneck: unbiased, and less variable than full conditioning."""

import numpy as np
import pytest

from causal_ext.bottleneck import (
    BackdoorAdjustment,
    backdoor_scenario,
    monte_carlo,
    summarize,
    theoretical_backdoor_variance,
)
from causal_ext.bottleneck.ols import ols


def _arm(bottleneck=None):
    def run(d):
        est = BackdoorAdjustment(bottleneck).fit(d["treatment"], d["outcome"], d["confounder"])
        return est.effect_, est.stderr_
    return run


def test_monte_carlo_bottleneck_unbiased_and_more_efficient():
    """Cheap Monte Carlo: n = 60, d_c = 40, r = 2, 300 replicates, d_y = 5 outcome coordinates.

    Theory (Gaussian design, exact): Var = sigma^2 / (Var(T|adj) (n - p - 3)) with
    sigma = Var(T|adj) = 1, i.e. 1/17 for full C and 1/55 for b(C): ratio 0.31.
    Checks: both arms unbiased (max bias z over 5 coordinates < 4), the bottleneck
    arm's Monte Carlo variance is below 0.6 x the full arm's, each Monte Carlo
    variance is within 30 % of theory (relative sd of a 300-replicate variance
    estimate is ~8 %), and no adjustment is biased (so the bias check can fail).
    """
    sc = backdoor_scenario(d_c=40, d_y=5, rank=2, seed=1)
    g = np.random.default_rng(3).standard_normal((2, 2))
    unadjusted = lambda d: (lambda f: (f.coef, f.stderr))(ols(d["treatment"], d["outcome"]))  # noqa: E731
    arms = {"full": _arm(), "bottleneck": _arm(g @ sc.bottleneck), "none": unadjusted}
    res = monte_carlo(sc, 60, 300, arms, seed=0)
    full, bott, none = (summarize(*res[k], sc.effect) for k in ("full", "bottleneck", "none"))
    assert full.max_bias_z < 4 and bott.max_bias_z < 4
    assert none.max_bias_z > 10
    assert bott.variance < 0.6 * full.variance
    for arm, p in ((full, 40), (bott, 2)):
        theory = theoretical_backdoor_variance(60, p, 1.0, 1.0)
        assert abs(arm.variance / theory - 1) < 0.3, (arm, theory)
        assert abs(arm.mean_stderr_sq / theory - 1) < 0.3
        assert 0.9 < arm.coverage < 0.99


def test_single_fit_shapes_and_equivalence_to_ols():
    sc = backdoor_scenario(d_c=10, d_y=3, rank=2, d_t=2, seed=0)
    d = sc.sample(400, np.random.default_rng(0))
    est = BackdoorAdjustment(sc.bottleneck).fit(d["treatment"], d["outcome"], d["confounder"])
    assert est.effect_.shape == est.stderr_.shape == (3, 2) and est.adjustment_dim_ == 2
    ref = ols(np.hstack([d["treatment"], d["confounder"] @ sc.bottleneck.T]), d["outcome"])
    np.testing.assert_allclose(est.effect_, ref.coef[:, :2])
    assert np.max(np.abs(est.effect_ - sc.effect) / est.stderr_) < 4.5


def test_bad_inputs():
    rng = np.random.default_rng(0)
    t, y = rng.standard_normal(20), rng.standard_normal(20)
    with pytest.raises(ValueError, match="more samples than regressors"):
        BackdoorAdjustment().fit(t, y, rng.standard_normal((20, 30)))
    with pytest.raises(ValueError, match="n > adjustment_dim"):
        theoretical_backdoor_variance(10, 8, 1.0, 1.0)
    with pytest.raises(ValueError, match="same number of rows"):
        BackdoorAdjustment().fit(t, rng.standard_normal(21), rng.standard_normal((20, 3)))
