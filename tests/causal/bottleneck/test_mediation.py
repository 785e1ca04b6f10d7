"""Mediation through the bottleneck of a high-dimensional mediator matches the analytic effect."""

import numpy as np
import pytest

from causal_ext.bottleneck import MediationEffect, mediation_scenario, monte_carlo, summarize


def test_mediation_estimate_matches_analytic_effect():
    """n = 2000, d_m = 30, r = 2, d_y = 5: indirect A_y B alpha, direct c and their sum.

    All 5 coordinates within 4 delta-method standard errors of the analytic
    values, and relative error below 10 %; the ``total_effect_`` equals direct +
    indirect and is within 4 standard errors' worth of the SCBM's total effect.
    """
    sc = mediation_scenario(d_m=30, d_y=5, rank=2, seed=1)
    d = sc.sample(2000, np.random.default_rng(11))
    g = np.random.default_rng(5).standard_normal((2, 2))
    est = MediationEffect(g @ sc.bottleneck).fit(d["treatment"], d["mediator"], d["outcome"])
    assert est.mediator_dim_ == 2
    assert np.max(np.abs(est.effect_ - sc.effect) / est.stderr_) < 4
    assert np.linalg.norm(est.effect_ - sc.effect) / np.linalg.norm(sc.effect) < 0.10
    assert np.max(np.abs(est.direct_effect_ - sc.extra["direct"]) / est.direct_stderr_) < 4
    np.testing.assert_allclose(est.total_effect_, est.direct_effect_ + est.effect_)
    scale = np.sqrt(est.stderr_ ** 2 + est.direct_stderr_ ** 2)
    assert np.max(np.abs(est.total_effect_ - sc.scm.total_effect("T", "Y")) / scale) < 4


def test_full_mediator_is_unbiased_but_noisier_than_bottleneck():
    """Monte Carlo, n = 100, d_m = 30, 200 replicates: both unbiased, bottleneck variance < 1/3 of full."""
    sc = mediation_scenario(d_m=30, d_y=5, rank=2, seed=1)

    def arm(bottleneck):
        def run(d):
            est = MediationEffect(bottleneck).fit(d["treatment"], d["mediator"], d["outcome"])
            return est.effect_, est.stderr_
        return run

    res = monte_carlo(sc, 100, 200, {"full": arm(None), "bottleneck": arm(sc.bottleneck)}, seed=0)
    full, bott = summarize(*res["full"], sc.effect), summarize(*res["bottleneck"], sc.effect)
    assert full.max_bias_z < 4 and bott.max_bias_z < 4
    assert bott.variance < full.variance / 3
    for arm_summary in (full, bott):
        assert abs(arm_summary.mean_stderr_sq / arm_summary.variance - 1) < 0.35  # delta method calibrated


def test_bad_inputs():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"bottleneck must be an \(r, 4\)"):
        MediationEffect(np.ones((2, 3))).fit(rng.standard_normal(50), rng.standard_normal((50, 4)),
                                             rng.standard_normal(50))
    with pytest.raises(ValueError, match="M must be a 1-D or 2-D"):
        MediationEffect().fit(rng.standard_normal(50), np.zeros((50, 4, 2)), rng.standard_normal(50))
