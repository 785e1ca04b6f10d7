"""Interchange-intervention accuracy: known answers on the adder and a hand-built two-step chain."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.abstraction import SCM, Abstraction, InterchangeInterventionAccuracy, systems
from causal_ext.abstraction.domains import Bernoulli
from causal_ext.abstraction.valuemaps import Identity


def _chain(second: str) -> tuple[SCM, SCM, Abstraction]:
    """Low: x -> m = x -> y = f(m); high: X -> M = X -> Y = M. ``second`` picks f: ``copy`` or ``const``."""
    low = SCM("low").exogenous("x", Bernoulli())
    low.node("m", ["x"], lambda x: x.copy(), Bernoulli())
    f = (lambda m: m.copy()) if second == "copy" else (lambda m: np.zeros_like(m))
    low.node("y", ["m"], f, Bernoulli())
    high = SCM("high").exogenous("X", Bernoulli())
    high.node("M", ["X"], lambda x: x.copy(), Bernoulli())
    high.node("Y", ["M"], lambda m: m.copy(), Bernoulli())
    ab = Abstraction({"X": ["x"], "M": ["m"], "Y": ["y"]}, {k: Identity() for k in "XMY"})
    return low, high, ab


def test_valid_chain_scores_one_and_a_dead_output_scores_the_agreement_rate():
    low, high, ab = _chain("copy")
    est = InterchangeInterventionAccuracy(n_pairs=400, seed=1).fit(low, high, ab)
    assert est.iia_ == 1.0 and est.aligned_ == "intermediate" and list(est.per_variable_) == ["M"]
    # y = 0 always: a pair succeeds exactly when the high-level answer M(source) is 0, i.e. half the time
    low, high, ab = _chain("const")
    est = InterchangeInterventionAccuracy(n_pairs=4000, seed=1).fit(low, high, ab)
    assert est.iia_ == pytest.approx(0.5, abs=0.03)


def test_adder_known_answers():
    """Valid: 1. Wrong gate: < 1. IIA copies activations and never perturbs unmapped wires, so it is blind
    to the unmapped inverter pair and to the relabelled carry (both 1), unlike the faithful CAE."""
    def iia(cond: str) -> float:
        case = systems.build("adder", cond)
        return InterchangeInterventionAccuracy(n_pairs=300, seed=0).fit(case.low, case.high,
                                                                       case.abstraction).iia_
    assert iia("valid") == 1.0 and iia("inverted_remapped") == 1.0
    assert iia("wrong_gate") < 0.8
    assert iia("inverted_internal") == 1.0 and iia("inverted_explanation") == 1.0


def test_bad_settings():
    low, high, ab = _chain("copy")
    with pytest.raises(ValueError, match="n_pairs"):
        InterchangeInterventionAccuracy(n_pairs=0).fit(low, high, ab)
    with pytest.raises(ValueError, match="not high-level variables"):
        InterchangeInterventionAccuracy(variables=["Q"]).fit(low, high, ab)
