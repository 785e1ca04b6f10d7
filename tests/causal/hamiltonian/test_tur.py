"""Thermodynamic uncertainty relation: a valid, positive lower bound off equilibrium; zero at equilibrium."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.hamiltonian import TURBound, tur_bound
from tests.causal.hamiltonian.conftest import OMEGA

TRUE_ROT = 2 * OMEGA**2
ANGULAR = np.array([[0.0, -1.0], [1.0, 0.0]])  # d(x) = (-x2, x1): J = int x1 o dx2 - x2 o dx1


def test_tur_bound_functional_by_hand() -> None:
    J = np.array([1.0, 3.0, 2.0, 2.0])
    assert tur_bound(J, 0.5) == pytest.approx(2 * 2.0**2 / (0.5 * np.var(J, ddof=1)))
    with pytest.raises(ValueError, match="two current samples"):
        tur_bound([1.0], 1.0)


@pytest.mark.parametrize("window", [0.5, 2.0])
def test_fixed_angular_current_bound_is_below_sigma_and_positive(rotational_ou, window: float) -> None:
    """Must-show: TUR <= sigma = 2 w^2 and > 0 for w != 0. Over long windows the angular current's variance
    picks up the fluctuations of |x|^2, so the bound falls towards 2 w^2 / (1 + w^2) (= 1 for w = 1)."""
    _, traj = rotational_ou
    tur = TURBound(window, current=ANGULAR, n_boot=50).fit(traj)
    assert tur.ci_[1] < TRUE_ROT and tur.bound_ < 0.8 * TRUE_ROT
    assert tur.ci_[0] > 0.5
    assert tur.mean_current_ == pytest.approx(-2 * OMEGA, rel=0.05)  # <x1 dx2 - x2 dx1>/dt = -w <|x|^2> = -2w
    assert tur.weights_ is None and tur.window_ == pytest.approx(window)
    same = TURBound(window, current=lambda x: x @ ANGULAR.T, n_boot=0).fit(traj)  # d(x) as a callable
    assert same.bound_ == pytest.approx(tur.bound_, rel=1e-12)


def test_optimised_short_time_current_nearly_saturates_the_bound(rotational_ou) -> None:
    """Short-time TUR with the best linear current: tends to sigma for linear systems (here 2 w^2 (1 -
    tau))."""
    _, traj = rotational_ou
    tur = TURBound(0.02, n_boot=20).fit(traj)
    assert tur.bound_ == pytest.approx(TRUE_ROT * (1 - 0.02), rel=0.06)
    assert tur.bound_ - 2 * tur.stderr_ < TRUE_ROT
    # coefficients on int x_i o dx_j: the antisymmetric (angular) part dominates
    c = tur.weights_[:4].reshape(2, 2)
    assert abs(c[0, 1] - c[1, 0]) > 10 * (abs(c[0, 0]) + abs(c[1, 1]) + abs(c[0, 1] + c[1, 0]))


def test_equilibrium_bound_is_near_zero(equilibrium_ou) -> None:
    _, traj = equilibrium_ou
    for current in (None, ANGULAR):
        tur = TURBound(0.5, current=current, n_boot=20).fit(traj)
        assert 0 <= tur.bound_ < 0.01 and tur.ci_[0] < 0.002


def test_tur_rejects_bad_input(rotational_ou) -> None:
    from causal_ext.hamiltonian import HamiltonianCausalModel, LangevinBath, QuadraticHamiltonian

    _, traj = rotational_ou
    model = HamiltonianCausalModel(QuadraticHamiltonian(1.0, 1.0, 2), LangevinBath(1.0, 1.0))
    under = model.simulate(5, 1.0, 0.1)
    with pytest.raises(ValueError, match="underdamped"):
        TURBound(0.5).fit(under)
    with pytest.raises(ValueError, match="window"):
        TURBound(0.0).fit(traj)
    with pytest.raises(ValueError, match="longer than the paths"):
        TURBound(100.0).fit(traj)
    with pytest.raises(ValueError, match="current matrix G"):
        TURBound(0.5, current=np.eye(3)).fit(traj)
    with pytest.raises(ValueError, match="d\\(x\\)"):
        TURBound(0.5, current=lambda x: x[..., :1]).fit(traj)
