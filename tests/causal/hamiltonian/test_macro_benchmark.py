"""The real-data entropy-production benchmark: its surrogate null keeps spectra and removes coupling."""

from __future__ import annotations

import numpy as np

# the surrogate and blocking need no statsmodels (only the benchmark's load_series reads its bundled data)
from benchmarks.entropy_production_macro import blocks, phase_surrogate


def test_phase_surrogate_keeps_each_spectrum_and_breaks_circulation() -> None:
    rng = np.random.default_rng(0)
    # a circulating 2-D OU process (drift -[[1, -2], [2, 1]] x), Euler steps of 0.25 / 10, sampled every 0.25
    drift = -np.array([[1.0, -2.0], [2.0, 1.0]])
    x, state, h = np.empty((400, 2)), np.zeros(2), 0.025
    for i in range(4000):
        state = state + h * drift @ state + np.sqrt(2 * h) * rng.standard_normal(2)
        if i % 10 == 9:
            x[i // 10] = state
    s = phase_surrogate(x, rng)
    np.testing.assert_allclose(np.abs(np.fft.rfft(s, axis=0)), np.abs(np.fft.rfft(x, axis=0)), atol=1e-9)
    from causal_ext.hamiltonian import TransitionKLEntropyProduction

    circulating = TransitionKLEntropyProduction(lag=1, n_boot=2).fit(blocks(x)).entropy_production_
    nulls = [TransitionKLEntropyProduction(lag=1, n_boot=2).fit(blocks(phase_surrogate(x, rng)))
             .entropy_production_ for _ in range(20)]
    assert circulating > 10 * np.median(nulls)
