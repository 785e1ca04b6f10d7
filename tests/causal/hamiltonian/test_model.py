"""The Hamiltonian causal model: structure, interventions as controls, simulation against closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.hamiltonian import (
    ConstantForce,
    FeedbackControl,
    HamiltonianCausalModel,
    LangevinBath,
    LinearFeedback,
    NoControl,
    PotentialControl,
    PotentialHamiltonian,
    QuadraticHamiltonian,
    TimeDependentForce,
    Trajectories,
    rotational,
)


def test_from_ou_splits_drift_into_hamiltonian_and_circulating_control() -> None:
    B = np.array([[1.0, -0.5], [0.5, 2.0]])
    D = np.array([[1.0, 0.2], [0.2, 0.5]])
    model = HamiltonianCausalModel.from_ou(B, D)
    x = np.random.default_rng(0).normal(size=(7, 2))
    np.testing.assert_allclose(model.drift(x, 0.0), -x @ B.T, atol=1e-12)
    np.testing.assert_allclose(model.diffusion(), D, atol=1e-12)
    assert isinstance(model.control, LinearFeedback) and not model.control.is_conservative
    eq = HamiltonianCausalModel.from_ou(D @ np.diag([2.0, 1.0]), D)
    assert isinstance(eq.control, NoControl)
    with pytest.raises(ValueError, match="positive definite"):
        HamiltonianCausalModel.from_ou(-np.eye(2), np.eye(2))


def test_do_replaces_only_the_control_mechanism() -> None:
    H = QuadraticHamiltonian(stiffness=1.0, mass=2.0, dim=2)
    model = HamiltonianCausalModel(H, LangevinBath(0.5, 2.0))
    treated = model.do(rotational(1.0))
    assert treated.hamiltonian is H and treated.bath is model.bath and isinstance(model.control, NoControl)
    both = treated.do(treated.control + ConstantForce([1.0, 0.0]))
    q = np.array([[1.0, 2.0]])
    np.testing.assert_allclose(both.control(q, 0.0), [[3.0, -1.0]])
    G, f = both.control.affine_part(2)
    np.testing.assert_allclose(G, [[0.0, 1.0], [-1.0, 0.0]])
    np.testing.assert_allclose(f, [1.0, 0.0])
    with pytest.raises(TypeError, match="Control"):
        model.do(lambda q, t: q)


@pytest.mark.parametrize("regime,method", [("overdamped", "euler"), ("overdamped", "exact"),
                                           ("underdamped", "baoab"), ("underdamped", "exact")])
def test_simulated_steady_state_matches_lyapunov_covariance(regime: str, method: str) -> None:
    H = QuadraticHamiltonian(stiffness=[1.0, 2.0], mass=1.0)
    model = HamiltonianCausalModel(H, LangevinBath(2.0, 0.5), rotational(0.8), regime)
    _, C = model.stationary_moments()
    traj = model.simulate(400, 10.0, 0.01, init=np.zeros(model.state_dim), burn_in=10.0, seed=3,
                          record_every=10, method=method)
    x = traj.state[:, ::20].reshape(-1, model.state_dim)
    np.testing.assert_allclose(np.cov(x.T), C, atol=0.1 * np.abs(C).max())
    assert traj.t[0] == 0.0 and traj.dt == pytest.approx(0.1) and traj.q.shape == (400, 101, 2)


def test_time_dependent_control_moves_the_mean_as_the_linear_response_predicts() -> None:
    """Overdamped dq = (-k q + a sin(w t)) / gamma dt + noise: the mean solves the ODE, known in closed
    form."""
    k, gamma, a, w = 2.0, 0.5, 1.5, 3.0
    model = HamiltonianCausalModel(QuadraticHamiltonian(stiffness=k, dim=1), LangevinBath(gamma, 1.0),
                                   regime="overdamped")
    treated = model.do(TimeDependentForce(lambda t: np.array([a * np.sin(w * t)])))
    traj = treated.simulate(4000, 3.0, 0.002, init="equilibrium", seed=1, record_every=25)
    lam = k / gamma
    t = traj.t
    exact = a / gamma * (lam * np.sin(w * t) - w * np.cos(w * t) + w * np.exp(-lam * t)) / (lam**2 + w**2)
    se = np.sqrt(1.0 / k / traj.n_paths)  # stationary std / sqrt(n) bounds the standard error at every t
    assert np.max(np.abs(traj.q[:, :, 0].mean(axis=0) - exact)) < 4.5 * se
    assert treated.linear_system() is None  # time-dependent: no steady-state closed form
    with pytest.raises(ValueError, match="affine time-independent"):
        treated.entropy_production_rate()


def test_potential_and_feedback_controls_and_nonlinear_hamiltonian() -> None:
    H = PotentialHamiltonian(lambda q: ((q**2 - 1) ** 2).sum(-1), lambda q: 4 * q * (q**2 - 1), dim=1)
    q = np.array([[0.5], [-2.0]])
    np.testing.assert_allclose(H.force(q), -4 * q * (q**2 - 1))
    model = HamiltonianCausalModel(H, LangevinBath(1.0, 0.3), PotentialControl(lambda q, t: 2 * q),
                                   "overdamped")
    np.testing.assert_allclose(model.force(q, 0.0), -4 * q * (q**2 - 1) - 2 * q)
    fb = model.do(FeedbackControl(lambda q, t: -q * t))
    np.testing.assert_allclose(fb.control(q, 2.0), -2 * q)
    traj = fb.simulate(50, 1.0, 0.01, init=np.array([1.0]), seed=0)
    assert traj.q.shape == (50, 101, 1) and traj.p is None
    with pytest.raises(ValueError, match="QuadraticHamiltonian"):
        model.simulate(10, 1.0, 0.01)  # 'stationary' needs a linear model
    with pytest.raises(ValueError, match="equilibrium"):
        model.simulate(10, 1.0, 0.01, init="equilibrium")


def test_equilibrium_init_is_boltzmann_and_underdamped_energy_is_equipartitioned() -> None:
    H = QuadraticHamiltonian(stiffness=[1.0, 4.0], mass=[1.0, 0.5])
    model = HamiltonianCausalModel(H, LangevinBath(1.0, 2.0))
    traj = model.simulate(20000, 0.05, 0.01, init="equilibrium", seed=0, method="baoab")
    energy = H.energy(traj.q[:, -1], traj.p[:, -1])
    assert energy.mean() == pytest.approx(2 * 2.0, rel=0.03)  # 4 quadratic degrees of freedom x T / 2


def test_bad_inputs_fail_with_clear_errors() -> None:
    H = QuadraticHamiltonian(stiffness=1.0, dim=2)
    with pytest.raises(ValueError, match="regime"):
        HamiltonianCausalModel(H, regime="quantum")
    with pytest.raises(ValueError, match="temperature"):
        LangevinBath(1.0, -1.0)
    with pytest.raises(ValueError, match="friction"):
        HamiltonianCausalModel(H, LangevinBath([1.0, -1.0], 1.0)).diffusion()
    with pytest.raises(ValueError, match="dim must be given"):
        QuadraticHamiltonian(stiffness=1.0)
    with pytest.raises(ValueError, match="stiffness"):
        QuadraticHamiltonian(stiffness=[[1.0, 2.0], [2.0, 1.0]])
    model = HamiltonianCausalModel(H)
    with pytest.raises(ValueError, match="init as an array"):
        model.simulate(5, 1.0, 0.1, init=np.zeros(2))  # underdamped state is (q, p): 4 numbers
    with pytest.raises(ValueError, match="duration"):
        model.simulate(5, 0.0, 0.1)
    with pytest.raises(ValueError, match="method"):
        model.simulate(5, 1.0, 0.1, method="euler")  # Euler–Maruyama is the overdamped scheme
    with pytest.raises(ValueError, match="plane"):
        rotational(1.0, dim=2, plane=(0, 0))
    with pytest.raises(ValueError, match="equally spaced"):
        Trajectories(np.array([0.0, 1.0, 3.0]), np.zeros((2, 3, 1)))
    with pytest.raises(ValueError, match="ConstantForce.force"):
        ConstantForce([1.0, 2.0, 3.0])(np.zeros((4, 2)), 0.0)
