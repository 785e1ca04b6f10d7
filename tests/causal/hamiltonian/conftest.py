"""Shared simulated data for the Hamiltonian causal model tests (module-scoped, vectorised, about a
second)."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.hamiltonian import HamiltonianCausalModel, Trajectories

OMEGA = 1.0
B_ROT = np.array([[1.0, -OMEGA], [OMEGA, 1.0]])
D_EQ = np.array([[1.0, 0.3], [0.3, 0.5]])
U_EQ = np.array([[2.0, 0.5], [0.5, 1.0]])


@pytest.fixture(scope="session")
def rotational_ou() -> tuple[HamiltonianCausalModel, Trajectories]:
    """``dx = -B x dt + sqrt(2) dW``, ``B = [[1, -w], [w, 1]]``, w = 1: 1000 stationary paths, t = 20, dt =
    0.01."""
    model = HamiltonianCausalModel.from_ou(B_ROT, np.eye(2))
    return model, model.simulate(1000, 20.0, 0.01, seed=0)


@pytest.fixture(scope="session")
def equilibrium_ou() -> tuple[HamiltonianCausalModel, Trajectories]:
    """Detailed balance: ``B = D U`` with a non-diagonal ``D`` and ``U``; same sizes as ``rotational_ou``."""
    model = HamiltonianCausalModel.from_ou(D_EQ @ U_EQ, D_EQ)
    return model, model.simulate(1000, 20.0, 0.01, seed=1)
