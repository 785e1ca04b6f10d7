"""Every benchmark system: the valid abstraction beats each contrastive one, with the right CAE variant."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.abstraction import CausalAbstractionError, ObservationalBaselines, systems
from causal_ext.abstraction.systems import ising

FAITHFULNESS_ONLY = {"adder": "inverted_internal", "lotka_volterra": "ageing", "heat": "hidden_heater",
                     "grn": "mirna", "transformer": "backup_head"}


def _cae(case, faithful, n=40, seed=0):
    est = CausalAbstractionError(n_interventions=n, faithful=faithful, seed=seed,
                                 n_replicates=case.settings.get("n_replicates", 1))
    return est.fit(case.low, case.high, case.abstraction).cae_


@pytest.mark.parametrize("system", sorted(systems.SYSTEMS))
def test_valid_abstraction_has_the_smallest_faithful_cae(system):
    conds = systems.conditions(system)
    assert conds[0] == "valid"
    cases = {c: systems.build(system, c) for c in conds}
    assert all(cases[c].valid == (c in ("valid", "inverted_remapped")) for c in conds)
    scores = {c: _cae(case, faithful=True) for c, case in cases.items()}
    for c, case in cases.items():
        if case.valid:
            continue
        for d in ("mse", "js", "mmd"):
            assert scores[c][d] > scores["valid"][d], (system, c, d, scores)
    if system in FAITHFULNESS_ONLY:
        hidden = cases[FAITHFULNESS_ONLY[system]]
        # the plain CAE cannot tell the hidden pathway from the valid system (common random numbers)
        assert _cae(hidden, faithful=False) == _cae(cases["valid"], faithful=False)
        base = ObservationalBaselines(n_samples=40, n_replicates=hidden.settings.get("n_replicates", 1))
        blind = base.fit(hidden.low, hidden.high, hidden.abstraction).report()
        valid = base.fit(cases["valid"].low, cases["valid"].high, cases["valid"].abstraction).report()
        assert blind == valid


def test_exact_systems_score_zero_and_ising_is_calibrated():
    for system in ("adder", "grn", "transformer"):
        case = systems.build(system)
        assert _cae(case, faithful=True) == pytest.approx({"mse": 0.0, "js": 0.0, "mmd": 0.0}, abs=1e-12)
    j, c = ising.calibrate()
    assert 0.3 < j < 1.5 and 1.0 < c < 3.5  # ferromagnetic coupling; field gain about the block size
    with pytest.raises(ValueError, match="unknown"):
        systems.build("ising", "ferro")
    with pytest.raises(ValueError, match="unknown"):
        systems.build("galaxy")


def test_ising_chain_samples_the_exact_conditional_law():
    chain = ising.Chain(2, 1, 0.0, 1.0)  # two spins, coupling 1
    rng = np.random.default_rng(0)
    s = chain.sample(np.zeros(20000), {}, rng)
    agree = (s[:, 0] == s[:, 1]).mean()
    assert abs(agree - np.exp(1) / (np.exp(1) + np.exp(-1))) < 0.01
    from causal_ext.abstraction import Clamp
    clamped = chain.sample(np.full(20000, 0.5), {0: Clamp(np.full((20000, 1), -1))}, rng)
    assert np.all(clamped[:, 0] == -1)
    # p(s1 = +1 | s0 = -1) = e^{-1 + 0.5} / (e^{-1 + 0.5} + e^{1 - 0.5})
    assert abs((clamped[:, 1] == 1).mean() - np.exp(-0.5) / (np.exp(-0.5) + np.exp(0.5))) < 0.01
