"""Closed forms for linear Langevin systems: steady state, entropy production, transition KL."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.hamiltonian import (
    HamiltonianCausalModel,
    LangevinBath,
    QuadraticHamiltonian,
    linear_entropy_production,
    rotational,
    transition_reversal_kl_rate,
)
from causal_ext.hamiltonian.linear import LinearSystem, gaussian_kl, stationary_moments


@pytest.mark.parametrize("omega", [0.0, 0.5, 1.0, 2.0])
def test_rotational_ou_entropy_production_is_two_omega_squared(omega: float) -> None:
    B = np.array([[1.0, -omega], [omega, 1.0]])
    assert linear_entropy_production(-B, np.eye(2)) == pytest.approx(2 * omega**2, abs=1e-12)
    _, C = stationary_moments(LinearSystem.make(-B, np.eye(2)))
    np.testing.assert_allclose(C, np.eye(2), atol=1e-12)


def test_detailed_balance_has_zero_entropy_production() -> None:
    rng = np.random.default_rng(0)
    for _ in range(5):
        L, M = rng.normal(size=(2, 3, 3))
        D, U = L @ L.T + 0.1 * np.eye(3), M @ M.T + 0.1 * np.eye(3)
        assert linear_entropy_production(-D @ U, D) == pytest.approx(0.0, abs=1e-9)
        _, C = stationary_moments(LinearSystem.make(-D @ U, D))
        np.testing.assert_allclose(C, np.linalg.inv(U), rtol=1e-8, atol=1e-10)


def test_general_ou_matches_hand_formula() -> None:
    """sigma = tr(B^T D^{-1} B C) - tr(B) for overdamped OU (mean of F D^{-1} F minus the divergence)."""
    B = np.array([[1.0, -0.7, 0.2], [0.4, 2.0, 0.1], [0.0, -0.3, 1.5]])
    D = np.diag([1.0, 0.5, 2.0])
    _, C = stationary_moments(LinearSystem.make(-B, D))
    hand = np.trace(B.T @ np.linalg.inv(D) @ B @ C) - np.trace(B)
    assert linear_entropy_production(-B, D) == pytest.approx(hand, rel=1e-10)


def test_underdamped_entropy_production_equals_work_rate_over_temperature() -> None:
    """Steady state: sigma = <u . dq/dt> / T for a circulating force on a 2-D oscillator (energy balance)."""
    for gamma, kappa, T, mass in [(1.0, 0.5, 1.0, 1.0), (3.0, 1.2, 0.7, 2.0)]:
        model = HamiltonianCausalModel(QuadraticHamiltonian(stiffness=[1.0, 1.5], mass=mass),
                                       LangevinBath(gamma, T), rotational(kappa), "underdamped")
        _, C = model.stationary_moments()
        G = model.control.gain
        work = np.trace(G @ C[:2, 2:]) / mass  # <(G q) . p / m>
        assert model.entropy_production_rate() == pytest.approx(work / T, rel=1e-9)
        assert work > 0


def test_underdamped_tends_to_overdamped_limit() -> None:
    """Large friction: underdamped sigma -> overdamped sigma = 2 kappa^2 / (gamma k) for k = 1."""
    H = QuadraticHamiltonian(stiffness=1.0, mass=1.0, dim=2)
    kappa = 0.8
    for gamma in (20.0, 200.0):
        under = HamiltonianCausalModel(H, LangevinBath(gamma, 1.0), rotational(kappa), "underdamped")
        over = HamiltonianCausalModel(H, LangevinBath(gamma, 1.0), rotational(kappa), "overdamped")
        assert over.entropy_production_rate() == pytest.approx(2 * kappa**2 / gamma, rel=1e-10)
        limit = over.entropy_production_rate()
        assert under.entropy_production_rate() == pytest.approx(limit, rel=2 / gamma**2 + 1e-3)
    eq = HamiltonianCausalModel(H, LangevinBath(1.0, 1.0), regime="underdamped")
    assert eq.entropy_production_rate() == pytest.approx(0.0, abs=1e-12)


def test_constant_force_keeps_equilibrium() -> None:
    """A tilt is conservative on a confined system: the steady state shifts, no entropy is produced."""
    from causal_ext.hamiltonian import ConstantForce

    H = QuadraticHamiltonian(stiffness=2.0, mass=1.0, dim=2)
    for regime in ("overdamped", "underdamped"):
        model = HamiltonianCausalModel(H, LangevinBath(1.0, 1.0), ConstantForce([1.0, -2.0]), regime)
        mu, _ = model.stationary_moments()
        np.testing.assert_allclose(mu[:2], [0.5, -1.0])
        assert model.entropy_production_rate() == pytest.approx(0.0, abs=1e-10)


def test_transition_kl_rate_has_order_tau_bias_and_diverges_with_momenta() -> None:
    B = np.array([[1.0, -1.0], [1.0, 1.0]])
    for tau in (0.001, 0.01, 0.1):
        rate = transition_reversal_kl_rate(-B, np.eye(2), tau)
        assert rate <= 2.0
        assert rate == pytest.approx(2.0 * (1 - tau), rel=2 * tau**2 + 1e-6)
    model = HamiltonianCausalModel(QuadraticHamiltonian(1.0, 1.0, 2), LangevinBath(1.0, 1.0), rotational(0.5))
    s = model.linear_system()
    slow, fast = (transition_reversal_kl_rate(s.A, s.D, tau, s.b, s.parity) for tau in (0.01, 0.001))
    assert fast > 5 * slow > 5 * model.entropy_production_rate()


def test_gaussian_kl_one_dimensional_formula() -> None:
    m1, s1, m2, s2 = 0.3, 1.7, -0.4, 0.9
    hand = np.log(s2 / s1) + (s1**2 + (m1 - m2) ** 2) / (2 * s2**2) - 0.5
    assert gaussian_kl(np.array([m1]), np.array([[s1**2]]), np.array([m2]), np.array([[s2**2]])) == \
        pytest.approx(hand, rel=1e-12)


def test_noiseless_irreversible_drift_is_infinite_and_bad_input_fails() -> None:
    A = np.array([[-1.0, 1.0], [-1.0, -1.0]])
    assert linear_entropy_production(A, np.diag([1.0, 0.0])) == float("inf")
    with pytest.raises(ValueError, match="not stable"):
        linear_entropy_production(np.eye(2), np.eye(2))
    with pytest.raises(ValueError, match="D \\(diffusion matrix\\) must have shape"):
        linear_entropy_production(-np.eye(2), np.eye(3))
    with pytest.raises(ValueError, match="positive semi-definite"):
        linear_entropy_production(-np.eye(2), -np.eye(2))
    with pytest.raises(ValueError, match="parity"):
        linear_entropy_production(-np.eye(2), np.eye(2), parity=[1, 0])
