"""Bottleneck identification up to bijection by reduced-rank regression, and rank selection."""

import numpy as np
import pytest

from causal_ext.bottleneck import (
    ReducedRankBottleneck,
    bottleneck_alignment,
    canonical_correlations,
    linear_bijection,
    mechanism_scenario,
    principal_angles,
    reduced_rank_regression,
    select_rank,
)


@pytest.mark.parametrize("activation", ["linear", "tanh"])
@pytest.mark.parametrize("rank", [1, 3])
def test_rrr_recovers_rank_and_bottleneck_up_to_invertible_map(activation, rank):
    """Selected rank is the true one and all canonical correlations with the true bottleneck are ~1."""
    sc = mechanism_scenario(d_in=20, d_out=15, rank=rank, activation=activation, seed=rank)
    data = sc.sample(2000, np.random.default_rng(10 + rank))
    est = ReducedRankBottleneck().fit(data["parents"], data["child"])
    assert est.rank_ == rank
    cc = bottleneck_alignment(est.bottleneck_, sc.bottleneck)
    assert cc.min() > 0.99, cc
    assert np.max(principal_angles(est.bottleneck_, sc.bottleneck)) < 0.15
    g, residual = linear_bijection(est.bottleneck_, sc.bottleneck)
    assert residual < 0.1 and np.linalg.cond(g) < 1e3  # B_hat = G B with G invertible
    # sample canonical correlations of the scores agree with the population ones
    scores_true = data["parents"] @ sc.bottleneck.T
    assert canonical_correlations(est.transform(data["parents"]), scores_true).min() > 0.99


def test_alignment_improves_with_n_and_random_map_is_not_aligned():
    sc = mechanism_scenario(d_in=20, d_out=15, rank=3, seed=0)
    gaps = []
    for n in (300, 3000):
        data = sc.sample(n, np.random.default_rng(n))
        fit = reduced_rank_regression(data["parents"], data["child"], 3)
        gaps.append(1 - bottleneck_alignment(fit.bottleneck, sc.bottleneck).min())
    assert gaps[1] < gaps[0] / 3  # 1 - rho shrinks like 1/n
    random_map = np.random.default_rng(99).standard_normal((3, 20))
    assert bottleneck_alignment(random_map, sc.bottleneck).min() < 0.9


def test_bottleneck_scores_are_standardised_and_invariant_quantities_hold():
    sc = mechanism_scenario(d_in=10, d_out=8, rank=2, seed=5)
    data = sc.sample(1000, np.random.default_rng(0))
    est = ReducedRankBottleneck(rank=2).fit(data["parents"], data["child"])
    np.testing.assert_allclose(np.cov(est.transform(data["parents"]).T), np.eye(2), atol=1e-10)
    np.testing.assert_allclose(est.coef_, est.loading_ @ est.bottleneck_)
    assert est.predict(data["parents"][:4]).shape == (4, 8)
    assert est.rank_selection_ is None


@pytest.mark.parametrize("rule", ["rsc", "cv"])
@pytest.mark.parametrize("whiten", [True, False])
def test_rank_rules_recover_true_rank_and_zero_under_null(rule, whiten):
    for rank in (2, 4):
        sc = mechanism_scenario(d_in=15, d_out=12, rank=rank, seed=10 + rank)
        data = sc.sample(800, np.random.default_rng(rank))
        assert select_rank(data["parents"], data["child"], rule, whiten=whiten).rank == rank
    rng = np.random.default_rng(0)
    assert select_rank(rng.standard_normal((300, 15)), rng.standard_normal((300, 12)), rule,
                       whiten=whiten).rank == 0


def test_whitened_rank_rule_is_robust_to_correlated_noise():
    """A strong noise factor shared by all responses fools the isotropic threshold, not the whitened one."""
    sc = mechanism_scenario(d_in=30, d_out=30, rank=2, seed=3)
    rng = np.random.default_rng(3)
    data = sc.sample(600, rng)
    child = data["child"] + 4.0 * rng.standard_normal((600, 1)) * np.ones((1, 30))
    assert select_rank(data["parents"], child, "rsc", whiten=True).rank == 2
    assert select_rank(data["parents"], child, "rsc", whiten=False).rank > 2


def test_bad_inputs_raise_clear_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="rank_rule"):
        ReducedRankBottleneck(rank_rule="aic").fit(rng.standard_normal((50, 3)), rng.standard_normal((50, 2)))
    with pytest.raises(ValueError, match="too few samples"):
        ReducedRankBottleneck().fit(rng.standard_normal((20, 10)), rng.standard_normal((20, 12)))
    with pytest.raises(ValueError, match="same number of rows"):
        ReducedRankBottleneck().fit(rng.standard_normal((50, 3)), rng.standard_normal((40, 2)))
    with pytest.raises(ValueError, match="NaN"):
        ReducedRankBottleneck().fit(np.full((50, 3), np.nan), rng.standard_normal((50, 2)))
    with pytest.raises(ValueError, match="collinear"):
        x = rng.standard_normal((50, 2))
        ReducedRankBottleneck().fit(np.hstack([x, x[:, :1]]), rng.standard_normal((50, 2)))
    with pytest.raises(RuntimeError, match="not fitted"):
        ReducedRankBottleneck().transform(rng.standard_normal((5, 3)))
