"""SVAR simulators: shapes, acyclic W, stable dynamics, regime switching on a shared graph."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.temporal.graphs import is_dag, summary_weights, transitive_closure
from causal_ext.temporal.simulate import simulate_regime_switching, simulate_svar


@pytest.mark.parametrize("noise", ["gaussian", "laplace", "exponential"])
def test_stationary_svar(noise: str) -> None:
    sim = simulate_svar(6, 2, 400, seed=1, noise=noise)
    assert sim.X.shape == (400, 6) and sim.W.shape == (6, 6) and sim.A.shape == (2, 6, 6)
    assert is_dag(sim.W) and np.all(np.diag(sim.W) == 0)
    assert np.all(np.isfinite(sim.X)) and np.abs(sim.X).max() < 1e3
    # the data follow the structural equations: residuals are the noise (sd 1, mean 0 after centring)
    resid = sim.X[2:] - sim.X[2:] @ sim.W - sim.X[1:-1] @ sim.A[0] - sim.X[:-2] @ sim.A[1]
    np.testing.assert_allclose(resid.std(axis=0), 1.0, atol=0.15)
    assert abs(float(resid.mean())) < 0.1
    assert sim.change_points == () and np.all(sim.regimes == 0)


def test_same_seed_same_data_and_backward_edges_make_cycles() -> None:
    a, b = simulate_svar(5, 1, 100, seed=7), simulate_svar(5, 1, 100, seed=7)
    np.testing.assert_array_equal(a.X, b.X)
    cyclic = simulate_svar(8, 2, 100, seed=0, backward_fraction=0.5, a_edges=8)
    assert np.any(np.diag(transitive_closure(summary_weights(cyclic.W, cyclic.A))))
    forward = simulate_svar(8, 2, 100, seed=0, backward_fraction=0.0)
    assert is_dag(summary_weights(forward.W, forward.A))


def test_regime_switching_shares_the_graph_not_the_weights() -> None:
    sim = simulate_regime_switching(6, 2, 900, n_regimes=3, seed=2)
    assert sim.change_points == (300, 600)
    assert np.array_equal(np.bincount(sim.regimes), [300, 300, 300])
    for r in range(3):
        np.testing.assert_array_equal(np.sign(sim.W_regimes[r]), np.sign(sim.W))
        np.testing.assert_array_equal(np.sign(sim.A_regimes[r]), np.sign(sim.A))
    assert not np.allclose(sim.W_regimes[0], sim.W_regimes[1])
    assert not np.allclose(sim.noise_scales[0], sim.noise_scales[1])
    # per-regime variance changes: the series is not stationary
    var = np.stack([sim.X[sim.regimes == r].var(axis=0) for r in range(3)])
    assert np.max(var.max(axis=0) / var.min(axis=0)) > 1.5
    custom = simulate_regime_switching(4, 1, 100, n_regimes=2, change_points=(30,), seed=0)
    assert custom.change_points == (30,) and int((custom.regimes == 0).sum()) == 30


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="d \\(number of variables\\)"):
        simulate_svar(1, 1, 100)
    with pytest.raises(ValueError, match="p \\(number of lags\\)"):
        simulate_svar(3, 0, 100)
    with pytest.raises(ValueError, match="noise"):
        simulate_svar(3, 1, 100, noise="cauchy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="change_points"):
        simulate_regime_switching(3, 1, 100, n_regimes=2, change_points=(150,))
    with pytest.raises(ValueError, match="backward_fraction"):
        simulate_svar(3, 1, 100, backward_fraction=2.0)
