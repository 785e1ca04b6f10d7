"""DYNOTEARS with partial-order priors: recovery, zero violations, acyclic W, estimator contract."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from threadpoolctl import threadpool_limits

from causal_ext.temporal import DYNOTEARS, fit_dynotears, lagged_design, sample_order_priors
from causal_ext.temporal.dynotears import _Objective
from causal_ext.temporal.graphs import is_dag, prior_violations, summary_weights, transitive_closure
from causal_ext.temporal.metrics import structure_metrics
from causal_ext.temporal.priors import prior_mask
from causal_ext.temporal.simulate import simulate_regime_switching, simulate_svar


@pytest.fixture(scope="module")
def planted():
    """d=5, p=1, n=500, Gaussian noise, raw scale (3 contemporaneous + 8 lagged edges)."""
    return simulate_svar(5, 1, 500, seed=0)


@pytest.mark.parametrize("kind", ["resolvent", "expm"])
def test_objective_gradient_matches_finite_differences(kind: str) -> None:
    sim = simulate_svar(3, 2, 200, seed=1)
    Z = lagged_design(sim.X, 2)
    obj = _Objective(Z.T @ Z / len(Z), 3, 2, 0.1, 0.1, prior_mask(np.array([[0, 1], [2, 0]]), 3), kind, 0.1)
    x = np.random.default_rng(0).uniform(0.0, 0.3, 2 * 9 + 2 * 18)
    args = (10.0, 1.0, 100.0, 2.0)
    with threadpool_limits(limits=1):
        value, grad = obj.value_and_grad(x, *args)
        num = approx_fprime(x, lambda v: obj.value_and_grad(v, *args)[0], 1e-7)
    np.testing.assert_allclose(grad, num, rtol=1e-4, atol=1e-4 * np.abs(num).max())


def test_recovers_planted_structure(planted) -> None:
    model = DYNOTEARS(p=1).fit(planted.X)
    m = structure_metrics(planted.W, planted.A, model.W_, model.A_)
    assert m["shd_w"] <= 1 and m["shd_a"] <= 2 and m["shd_summary"] <= 1
    assert is_dag(model.W_) and model.h_ <= 1e-8
    # and the estimated weights are close to the truth on the true support (L1 shrinks them a little)
    true = planted.W[planted.W != 0]
    est = model.W_raw_[planted.W != 0]
    assert np.all(np.sign(est) == np.sign(true)) and np.abs(est - true).max() < 0.25


def test_priors_on_planted_structure_keep_recovery(planted) -> None:
    priors = sample_order_priors(planted.W, planted.A, 0.3, np.random.default_rng(0))
    model = DYNOTEARS(p=1).fit(planted.X, priors)
    m = structure_metrics(planted.W, planted.A, model.W_, model.A_, priors)
    assert m["violations"] == 0 and m["shd_w"] <= 1 and m["shd_a"] <= 2
    assert is_dag(model.W_)


def test_priors_remove_violations_the_plain_fit_makes() -> None:
    """Standardised data (no variance cue): the plain fit reverses ordered pairs, the prior fit cannot."""
    sim = simulate_svar(6, 1, 500, seed=3, backward_fraction=0.2)
    priors = sample_order_priors(sim.W, sim.A, 0.3, np.random.default_rng(3))
    plain = DYNOTEARS(p=1, standardize=True).fit(sim.X)
    with_p = DYNOTEARS(p=1, standardize=True).fit(sim.X, priors)
    m0 = structure_metrics(sim.W, sim.A, plain.W_, plain.A_, priors)
    m1 = structure_metrics(sim.W, sim.A, with_p.W_, with_p.A_, priors)
    assert m0["violations"] >= 2
    assert m1["violations"] == 0
    assert with_p.pruned_edges_ == []  # the augmented Lagrangian did it, not the post-hoc pruning
    assert with_p.order_penalty_ <= 1e-6 and with_p.h_ <= 1e-8
    assert is_dag(with_p.W_)
    assert m1["shd_summary"] < m0["shd_summary"]


def test_wrong_priors_are_still_enforced_on_a_cyclic_summary() -> None:
    """Priors contradicting every true contemporaneous edge, on a cyclic summary graph: all prohibited
    paths must vanish, and the optimisation must stay finite."""
    sim = simulate_svar(5, 1, 500, seed=3, backward_fraction=0.5, a_edges=4)
    assert np.any(np.diag(transitive_closure(summary_weights(sim.W, sim.A))))  # cyclic truth
    plain = DYNOTEARS(p=1).fit(sim.X)
    assert np.any(np.diag(transitive_closure(plain.summary_)))  # and a cyclic estimate
    edges = np.argwhere(sim.W != 0)
    wrong = np.array([[b, a] for a, b in edges])  # forbid every true contemporaneous edge a -> b
    model = DYNOTEARS(p=1).fit(sim.X, wrong)
    S = summary_weights(model.W_, model.A_)
    assert prior_violations(S, model.priors_) == []
    assert all(not transitive_closure(S)[a, b] for a, b in edges)
    assert model.order_penalty_ <= 1e-6
    assert np.all(np.isfinite(model.W_raw_)) and np.all(np.isfinite(model.A_raw_))
    assert is_dag(model.W_)


def test_regime_switching_segments_and_pooled_fit() -> None:
    sim = simulate_regime_switching(5, 1, 600, n_regimes=2, seed=4)
    segments = [sim.X[sim.regimes == r] for r in range(2)]
    Z = lagged_design(segments, 1)
    assert Z.shape == (600 - 2, 10)  # no lag window crosses the change point
    pooled = DYNOTEARS(p=1).fit(sim.X)
    known = DYNOTEARS(p=1).fit(segments)
    for model in (pooled, known):
        m = structure_metrics(sim.W, sim.A, model.W_, model.A_)
        assert m["shd_summary"] <= 3 and is_dag(model.W_)


def test_estimator_contract_and_result_fields(planted) -> None:
    est = DYNOTEARS(p=1, lambda_w=0.2, reachability="expm")
    assert est.lambda_w == 0.2 and not hasattr(est, "W_")
    assert est.fit(planted.X, [(0, 1)]) is est
    for attr in ("W_", "A_", "W_raw_", "A_raw_", "summary_", "h_", "order_penalty_", "priors_",
                 "pruned_edges_", "cut_cycle_edges_", "n_outer_", "n_evals_", "fit_seconds_", "history_"):
        assert hasattr(est, attr), attr
    assert est.A_.shape == (1, 5, 5) and est.summary_.dtype == bool
    res = fit_dynotears(planted.X, 1, lambda_w=0.2, reachability="expm", priors=[(0, 1)])
    np.testing.assert_allclose(res.W, est.W_)


def test_bad_input_raises_clear_errors(planted) -> None:
    X = planted.X.copy()
    X[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        DYNOTEARS().fit(X)
    with pytest.raises(ValueError, match="2-D"):
        DYNOTEARS().fit(planted.X[:, 0])
    with pytest.raises(ValueError, match="p \\(number of lags\\)"):
        DYNOTEARS(p=0).fit(planted.X)
    with pytest.raises(ValueError, match="contradictory"):
        DYNOTEARS().fit(planted.X, [(0, 1), (1, 0)])
    with pytest.raises(ValueError, match="lambda_w"):
        DYNOTEARS(lambda_w=-1.0).fit(planted.X)
    with pytest.raises(ValueError, match="margin=None"):
        DYNOTEARS(margin=None).fit(planted.X, [(0, 1)])
    with pytest.raises(ValueError, match="constant variables"):
        DYNOTEARS(standardize=True).fit(np.c_[planted.X, np.ones(len(planted.X))])


@pytest.mark.slow
def test_priors_improve_mean_summary_shd_over_seeds() -> None:
    """Benchmark-sized check (d=10, p=2, n=1000, standardised): priors lower the mean summary SHD."""
    gains = []
    for seed in range(20, 26):
        sim = simulate_regime_switching(10, 2, 1000, seed=seed)
        priors = sample_order_priors(sim.W, sim.A, 0.25, np.random.default_rng(seed))
        plain = DYNOTEARS(p=2, standardize=True).fit(sim.X)
        with_p = DYNOTEARS(p=2, standardize=True).fit(sim.X, priors)
        m0 = structure_metrics(sim.W, sim.A, plain.W_, plain.A_, priors)
        m1 = structure_metrics(sim.W, sim.A, with_p.W_, with_p.A_, priors)
        assert m1["violations"] == 0
        gains.append(m0["shd_summary"] - m1["shd_summary"])
    assert np.mean(gains) > 0
