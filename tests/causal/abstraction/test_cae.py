"""CAE known answers: the adder conditions, a hand-computable system, directions, faithfulness,
convergence."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.abstraction import (
    SCM,
    Abstraction,
    Bernoulli,
    CausalAbstractionError,
    FaithfulnessTest,
    Identity,
    convergence_curve,
    sample_interventions,
)
from causal_ext.abstraction.systems import adder

DISTANCES = ("mse", "js", "mmd")


def _fit(case, faithful, n=60, seed=0):
    return CausalAbstractionError(n_interventions=n, faithful=faithful, seed=seed).fit(
        case.low, case.high, case.abstraction)


def test_adder_valid_is_zero_in_every_variant():
    case = adder.build("valid")
    for faithful in (False, True):
        est = _fit(case, faithful)
        for direction in ("top_down", "bottom_up"):
            assert est.scores_[direction] == {d: 0.0 for d in DISTANCES}


def test_adder_wrong_gate_is_positive_in_every_variant():
    case = adder.build("wrong_gate")
    for faithful in (False, True):
        est = _fit(case, faithful)
        for direction in ("top_down", "bottom_up"):
            assert all(est.scores_[direction][d] > 0.05 for d in DISTANCES), est.scores_
        assert est.by_variable_["top_down"]["mse"]["Sum"] > 0  # the OR gate sits in the sum bits
        assert est.by_variable_["top_down"]["mse"]["Cout"] == 0.0


def test_an_inverted_internal_variable_in_the_explanation_needs_interventions_not_faithfulness():
    est = _fit(adder.build("inverted_explanation"), faithful=False)
    for direction in ("top_down", "bottom_up"):
        assert all(est.scores_[direction][d] > 0.05 for d in DISTANCES), est.scores_
        assert est.by_variable_[direction]["js"]["Carry1"] == 1.0  # always the opposite bit


def test_only_the_faithful_cae_catches_the_inverted_internal_carry():
    case = adder.build("inverted_internal")
    plain, faithful = _fit(case, False), _fit(case, True)
    for direction in ("top_down", "bottom_up"):
        assert plain.scores_[direction] == {d: 0.0 for d in DISTANCES}
        assert all(faithful.scores_[direction][d] > 0.05 for d in DISTANCES), faithful.scores_
        split = faithful.phi_split_[direction]["mse"]
        assert split["unperturbed"] == 0.0 and split["perturbed"] > 0.1
    # remapping the carry to the wire bit 1 reads makes the same circuit valid again
    remapped = _fit(adder.build("inverted_remapped"), True)
    assert remapped.cae_ == {d: 0.0 for d in DISTANCES}


def test_faithfulness_test_names_the_leaking_wires():
    inv = FaithfulnessTest(n_interventions=40).fit(*_parts(adder.build("inverted_internal")))
    assert not inv.passed_ and inv.baseline_ == 0.0
    assert inv.leakage_["P"] == 0.0 and inv.leakage_["nC1"] > 0.3 and inv.leakage_["C1r"] > 0.3
    ok = FaithfulnessTest(n_interventions=40).fit(*_parts(adder.build("valid")))
    assert ok.passed_ and ok.leakage_ == {"P": 0.0, "all": 0.0}


def _parts(case):
    return case.low, case.high, case.abstraction


def _negation() -> tuple[SCM, SCM, Abstraction]:
    """Low level copies a bit, the explanation negates it: every scored outcome disagrees."""
    low = SCM("copy")
    low.exogenous("x", Bernoulli())
    low.node("y", ["x"], lambda x: x.copy(), Bernoulli())
    high = SCM("negate")
    high.exogenous("X", Bernoulli())
    high.node("Y", ["X"], lambda x: 1 - x, Bernoulli())
    return low, high, Abstraction({"X": ["x"], "Y": ["y"]}, {"X": Identity(), "Y": Identity()})


def test_hand_computed_cae_of_a_negated_copy():
    """Outcomes 1-x vs x: gap 1, pooled values half 0 half 1 (variance 1/4), so MSE = 4, JS = 1,
    MMD = 2 (1 - exp(-1/2)) with the median bandwidth 1; Y is never intervened (max_targets=0)."""
    est = CausalAbstractionError(n_interventions=50, max_targets=0, seed=3).fit(*_negation())
    for direction in ("top_down", "bottom_up"):
        assert est.scores_[direction]["mse"] == pytest.approx(4.0)
        assert est.scores_[direction]["js"] == pytest.approx(1.0)
        assert est.scores_[direction]["mmd"] == pytest.approx(2 * (1 - np.exp(-0.5)))
        assert est.se_[direction]["mse"] == pytest.approx(0.0)
    # with interventions on Y allowed, the rows that set Y have nothing to score and are dropped
    est = CausalAbstractionError(n_interventions=50, max_targets=1, seed=3).fit(*_negation())
    per = est.per_intervention_["top_down"]["js"]
    assert np.isnan(per).any() and np.all(per[np.isfinite(per)] == 1.0)


def test_interventions_follow_the_stated_distribution():
    case = adder.build("inverted_internal")
    batch = sample_interventions(case.low, case.high, case.abstraction, 2000, direction="top_down",
                                 max_targets=2, phi_prob=0.25, seed=0)
    assert all(batch.targets[r].all() for r in ("A", "B", "Cin"))
    k = sum(batch.targets[v].astype(int) for v in ("Carry1", "Sum", "Cout"))
    assert set(np.unique(k)) == {0, 1, 2} and abs((k == 0).mean() - 1 / 3) < 0.04
    assert abs(batch.phi.mean() - 0.25) < 0.03
    # top-down: the low-level clamps realise the high-level values through the value maps
    low_a = batch.low_do["A0"].values + 2 * batch.low_do["A1"].values
    np.testing.assert_array_equal(low_a, batch.high_do["A"].values)
    # faithful and plain runs share every draw except the perturbations
    plain = sample_interventions(case.low, case.high, case.abstraction, 2000, direction="top_down",
                                 max_targets=2, phi_prob=0.0, seed=0)
    np.testing.assert_array_equal(plain.high_do["A"].values, batch.high_do["A"].values)
    np.testing.assert_array_equal(plain.low_do["nC1"].values, batch.low_do["nC1"].values)
    assert not plain.phi.any()


def test_estimator_settings_are_validated():
    parts = _parts(adder.build("valid"))
    with pytest.raises(ValueError, match="directions"):
        CausalAbstractionError(directions=("sideways",)).fit(*parts)
    with pytest.raises(ValueError, match="unknown"):
        CausalAbstractionError(distances=("l1",)).fit(*parts)
    with pytest.raises(ValueError, match="n_interventions"):
        CausalAbstractionError(n_interventions=1).fit(*parts)
    with pytest.raises(ValueError, match="phi_prob"):
        CausalAbstractionError(phi_prob=2.0).fit(*parts)
    with pytest.raises(ValueError, match="outputs"):
        CausalAbstractionError(outputs=["A"]).fit(*parts)
    est = CausalAbstractionError(n_interventions=10, distances=("js",), directions=("bottom_up",)).fit(*parts)
    assert set(est.scores_) == {"bottom_up"} and set(est.cae_) == {"js"}
    report = est.report()
    assert report["cae"] == {"js": 0.0} and report["faithful"] is True


def test_convergence_curve_shrinks_with_more_interventions():
    case = adder.build("wrong_gate")
    curve = convergence_curve(case.low, case.high, case.abstraction, [5, 30, 200], n_repeats=8)
    assert curve.values["top_down"].shape == (3, 8)
    spread = curve.values["top_down"].std(1)
    assert spread[0] > spread[1] > spread[2]
    err = curve.relative_error()["top_down"]
    assert err[0] > err[1] > err[2] and err[1] < 0.3
    assert curve.to_dict()["ns"] == [5, 30, 200]
    with pytest.raises(ValueError, match="ns="):
        convergence_curve(case.low, case.high, case.abstraction, [1, 5])
