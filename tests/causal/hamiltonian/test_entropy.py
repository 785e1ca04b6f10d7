"""Entropy production from trajectory data: known answers (OU, equilibrium, underdamped) and planted
nonlinearity."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.hamiltonian import (
    HamiltonianCausalModel,
    LangevinBath,
    PathKLEntropyProduction,
    PolynomialBasis,
    PotentialHamiltonian,
    QuadraticHamiltonian,
    TransitionKLEntropyProduction,
    rotational,
)
from tests.causal.hamiltonian.conftest import OMEGA

TRUE_ROT = 2 * OMEGA**2
ESTIMATORS = [PathKLEntropyProduction(n_boot=50), TransitionKLEntropyProduction(n_boot=50)]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=["path-kl-drift", "transition-kl"])
def test_rotational_ou_entropy_production_from_data(rotational_ou, estimator) -> None:
    """Must-show: the data-driven estimate of 2 w^2 within 10% (measured: within 2 standard errors of it)."""
    model, traj = rotational_ou
    assert model.entropy_production_rate() == pytest.approx(TRUE_ROT, rel=1e-12)
    est = estimator.fit(traj)
    assert est.entropy_production_ == pytest.approx(TRUE_ROT, rel=0.10)
    assert 0 < est.stderr_ < 0.05 * TRUE_ROT
    assert est.ci_[0] < TRUE_ROT * 1.02 and est.ci_[1] > TRUE_ROT * 0.98  # O(dt) = 1% discretisation bias
    assert est.ci_[0] > 0.5 * TRUE_ROT


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=["path-kl-drift", "transition-kl"])
def test_equilibrium_ou_entropy_production_is_zero(equilibrium_ou, estimator) -> None:
    model, traj = equilibrium_ou
    assert model.entropy_production_rate() == pytest.approx(0.0, abs=1e-12)
    est = estimator.fit(traj)
    assert abs(est.entropy_production_) < 0.01 * TRUE_ROT
    assert est.ci_[0] <= 0.002 and est.ci_[1] < 0.02


def test_path_kl_recovers_the_fitted_langevin_model(rotational_ou) -> None:
    _, traj = rotational_ou
    est = PathKLEntropyProduction(n_boot=0).fit(traj)
    # features (1, x1, x2): drift = -B x, so W = [0; -B^T]
    expected = np.vstack([np.zeros(2), -np.array([[1, OMEGA], [-OMEGA, 1]])])
    np.testing.assert_allclose(est.drift_coef_, expected, atol=0.05)
    np.testing.assert_allclose(est.diffusion_, np.eye(2), atol=0.02)
    assert est.regime_ == "overdamped" and est.friction_ is None and est.total_time_ == pytest.approx(20_000)
    assert np.isnan(est.stderr_)


@pytest.mark.parametrize("gamma,kappa", [(1.0, 0.5), (2.0, 1.0), (1.0, 0.0)])
def test_underdamped_entropy_production_with_momentum_reversal(gamma: float, kappa: float) -> None:
    model = HamiltonianCausalModel(QuadraticHamiltonian(stiffness=1.0, mass=1.0, dim=2),
                                   LangevinBath(gamma, 1.0), rotational(kappa), "underdamped")
    truth = model.entropy_production_rate()
    traj = model.simulate(600, 20.0, 0.01, seed=int(10 * gamma + kappa))
    est = PathKLEntropyProduction(n_boot=30).fit(traj)
    np.testing.assert_allclose(est.friction_, gamma * np.eye(2), atol=0.05 * gamma + 0.02)
    if kappa:
        assert est.entropy_production_ == pytest.approx(truth, rel=0.10)
    else:
        assert abs(truth) < 1e-12 and abs(est.entropy_production_) < 0.01
    assert est.regime_ == "underdamped"


def test_nonlinear_force_needs_a_richer_basis() -> None:
    """Planted structure: double well + circulating control. The cubic basis spans the true force, so its
    estimate matches the model-based Stratonovich heat; the linear projection misses part of the
    irreversibility."""
    H = PotentialHamiltonian(lambda q: ((q**2 - 1) ** 2).sum(-1), lambda q: 4 * q * (q**2 - 1), dim=2)
    model = HamiltonianCausalModel(H, LangevinBath(1.0, 1.0), rotational(1.0), "overdamped")
    traj = model.simulate(300, 30.0, 0.005, init=np.zeros(2), burn_in=5.0, seed=0)
    mid = 0.5 * (traj.q[:, 1:] + traj.q[:, :-1])
    force = model.force(mid.reshape(-1, 2), 0.0).reshape(mid.shape)
    # model-based Stratonovich heat with the true force (D = I)
    heat = float((force * np.diff(traj.q, axis=1)).sum() / (traj.n_paths * traj.duration))
    cubic = PathKLEntropyProduction(basis=PolynomialBasis(3), n_boot=20).fit(traj)
    linear = PathKLEntropyProduction(n_boot=0).fit(traj)
    assert cubic.entropy_production_ == pytest.approx(heat, rel=0.05)
    assert cubic.ci_[0] < heat < cubic.ci_[1] or abs(cubic.entropy_production_ - heat) < 2 * cubic.stderr_
    assert linear.entropy_production_ < 0.85 * heat


def test_subsampling_biases_transition_kl_downwards_as_predicted(rotational_ou) -> None:
    from causal_ext.hamiltonian import transition_reversal_kl_rate

    model, traj = rotational_ou
    s = model.linear_system()
    coarse = TransitionKLEntropyProduction(lag=20, n_boot=0).fit(traj)  # tau = 0.2
    exact = transition_reversal_kl_rate(s.A, s.D, 0.2)
    assert exact < 0.85 * TRUE_ROT
    assert coarse.entropy_production_ == pytest.approx(exact, rel=0.08)
    assert coarse.tau_ == pytest.approx(0.2)


def test_estimators_reject_bad_input(rotational_ou) -> None:
    model = HamiltonianCausalModel(QuadraticHamiltonian(1.0, 1.0, 2), LangevinBath(1.0, 1.0), rotational(0.5))
    under = model.simulate(10, 1.0, 0.1, seed=0)
    with pytest.raises(ValueError, match="PathKLEntropyProduction"):
        TransitionKLEntropyProduction().fit(under)
    with pytest.raises(ValueError, match="dt"):
        PathKLEntropyProduction().fit(np.zeros((4, 10, 2)))
    with pytest.raises(ValueError, match="contradicts"):
        PathKLEntropyProduction().fit(rotational_ou[1], dt=0.5)
    with pytest.raises(ValueError, match="ballistic"):
        # (q, p) passed as if all were positions
        PathKLEntropyProduction(n_boot=0).fit(under.state, dt=under.dt)
    with pytest.raises(ValueError, match="singular diffusion"):
        PathKLEntropyProduction(n_boot=0).fit(np.repeat(rotational_ou[1].q[:50, :, :1], 2, axis=2), dt=0.01)
    with pytest.raises(ValueError, match="lag"):
        TransitionKLEntropyProduction(lag=0).fit(rotational_ou[1])
    with pytest.raises(ValueError, match="n_folds"):
        PathKLEntropyProduction(n_folds=3).fit(under.q[:4], dt=0.1, p=under.p[:4])
    with pytest.raises(TypeError, match="PolynomialBasis"):
        PathKLEntropyProduction(basis=3).fit(rotational_ou[1])
    with pytest.raises(ValueError, match="degree"):
        PolynomialBasis(0)
