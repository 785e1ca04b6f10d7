"""Causal effects as path-law discrepancies (Girsanov KL, likelihood ratios) versus endpoint/cumulative
ATEs."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.hamiltonian import (
    ConstantForce,
    HamiltonianCausalModel,
    LangevinBath,
    PathKLEntropyProduction,
    QuadraticHamiltonian,
    cumulative_ate,
    difference_in_means,
    endpoint_ate,
    path_kl,
    path_log_likelihood_ratio,
    rotational,
)
from causal_ext.hamiltonian.effects import mean_estimate


@pytest.mark.parametrize("regime", ["overdamped", "underdamped"])
def test_girsanov_kl_of_a_constant_force_is_closed_form(regime: str) -> None:
    """KL(P_c || P_0) = |c|^2 t / (4 gamma T) in both regimes; the likelihood ratio of the data agrees."""
    gamma, T, c, t = 2.0, 0.5, np.array([0.6, -0.8]), 4.0
    base = HamiltonianCausalModel(QuadraticHamiltonian(stiffness=1.0, dim=2), LangevinBath(gamma, T),
                                  regime=regime)
    pushed = base.do(ConstantForce(c))
    traj = pushed.simulate(3000, t, 0.01, init="equilibrium", seed=4)
    exact = c @ c * t / (4 * gamma * T)
    kl = path_kl(pushed, base, traj)
    np.testing.assert_allclose(kl.estimate, exact, rtol=1e-10)
    llr = mean_estimate(path_log_likelihood_ratio(pushed, base, traj))
    assert abs(llr.estimate - exact) < 4 * llr.stderr + 0.02 * exact
    # paths of the base model: the mean log ratio is -KL(P_0 || P_c), the same number for a constant shift
    from_base = base.simulate(3000, t, 0.01, init="equilibrium", seed=5)
    back = mean_estimate(path_log_likelihood_ratio(pushed, base, from_base))
    assert abs(back.estimate + exact) < 4 * back.stderr + 0.02 * exact


def test_circulating_control_kl_rate(rotational_ou) -> None:
    """do(w R q) against do(0) on the unit oscillator: KL rate = w^2 <|q|^2> / 4 = w^2 / 2."""
    treated, traj = rotational_ou
    control = treated.do(treated.control + rotational(-1.0))  # cancels the circulation
    short = traj.select(np.arange(300))
    kl = path_kl(treated, control, short)
    assert kl.estimate == pytest.approx(0.5 * traj.duration, rel=0.05)
    assert kl.covers(0.5 * traj.duration)


def test_entropy_production_detects_an_effect_both_ates_miss() -> None:
    """The demonstration at test scale: a circulating control on an equilibrium oscillator leaves every
    one-time marginal N(0, I) unchanged (endpoint and cumulative ATEs ~ 0) while entropy production jumps 0 ->
    2 w^2."""
    base = HamiltonianCausalModel(QuadraticHamiltonian(stiffness=1.0, dim=2), LangevinBath(1.0, 1.0),
                                  regime="overdamped")
    treated_model = base.do(rotational(1.0))
    control = base.simulate(1500, 5.0, 0.01, init="equilibrium", seed=10)
    treated = treated_model.simulate(1500, 5.0, 0.01, init="equilibrium", seed=11)

    def square(x: np.ndarray) -> np.ndarray:
        return np.concatenate([x, (x**2).sum(-1, keepdims=True)], axis=-1)

    for effect in (endpoint_ate(treated, control, square), cumulative_ate(treated, control, square)):
        assert np.all(np.abs(effect.estimate) < 3.5 * effect.stderr)
        assert np.all(effect.stderr < 0.2)  # precise: a tenth of the entropy-production gap below
    displacement = difference_in_means(treated.q[:, -1] - treated.q[:, 0], control.q[:, -1] - control.q[:, 0])
    assert np.all(np.abs(displacement.estimate) < 3.5 * displacement.stderr)
    ep_t = PathKLEntropyProduction(n_boot=30).fit(treated)
    ep_c = PathKLEntropyProduction(n_boot=30).fit(control)
    gap = ep_t.entropy_production_ - ep_c.entropy_production_
    assert gap == pytest.approx(2.0, rel=0.15)
    assert gap > 10 * np.hypot(ep_t.stderr_, ep_c.stderr_)
    # a conservative tilt, by contrast, shows in the endpoint ATE and produces no entropy
    tilted = base.do(ConstantForce([0.5, 0.0])).simulate(1500, 5.0, 0.01, init="stationary", seed=12)
    tilt = endpoint_ate(tilted, control)
    assert tilt.ci_low[0] > 0.3 and tilt.covers(0.0)[1]
    assert abs(PathKLEntropyProduction(n_boot=0).fit(tilted).entropy_production_) < 0.05


def test_effect_inputs_are_checked(rotational_ou) -> None:
    model, traj = rotational_ou
    other = HamiltonianCausalModel(QuadraticHamiltonian(1.0, dim=2), LangevinBath(2.0, 1.0),
                                   regime="overdamped")
    with pytest.raises(ValueError, match="model.do"):
        path_kl(model, other, traj)
    with pytest.raises(ValueError, match="time grid"):
        endpoint_ate(traj, traj.subsample(2))
    with pytest.raises(TypeError, match="Trajectories"):
        cumulative_ate(traj.q, traj)
    with pytest.raises(ValueError, match="trailing shape"):
        difference_in_means(np.zeros((5, 2)), np.zeros((5, 3)))
    with pytest.raises(ValueError, match="alpha"):
        endpoint_ate(traj, traj, alpha=1.5)
