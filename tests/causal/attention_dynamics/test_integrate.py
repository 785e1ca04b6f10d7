"""The adaptive integrators against closed forms and against scipy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import torch

from causal_ext.attention_dynamics import CausalAttentionFlow, integrate_on_sphere, uniform_sphere


@pytest.mark.parametrize("method", ["dopri5", "RK45", "DOP853"])
def test_first_token_follows_the_closed_form_oja_flow(method: str) -> None:
    # token 1 attends only to itself: dx/dt = P_x(V x), solved by exp(tV) x0 / |exp(tV) x0| (any V)
    rng = np.random.default_rng(0)
    V = rng.standard_normal((4, 4))
    X0 = uniform_sphere(2, 3, 4, seed=1)
    flow = CausalAttentionFlow(V, beta=0.7, horizon=3.0, n_save=7, method=method, rtol=1e-9, atol=1e-11)
    flow.fit(X0)
    for i, t in enumerate(flow.times_):
        y = scipy.linalg.expm(t * V) @ X0[:, 0].numpy().T
        np.testing.assert_allclose(flow.trajectory_[i, :, 0], (y / np.linalg.norm(y, axis=0)).T, atol=1e-7)
    assert flow.max_drift_ < 1e-7


def test_batched_dopri5_agrees_with_scipy_dop853_and_with_single_runs() -> None:
    rng = np.random.default_rng(2)
    V, Q, K = (rng.standard_normal((3, 3)) for _ in range(3))
    X0 = uniform_sphere(3, 5, 3, seed=4)
    kw = dict(beta=1.3, horizon=4.0, n_save=5)
    ours = CausalAttentionFlow(V, Q, K, rtol=1e-9, atol=1e-11, **kw).fit(X0)
    ref = CausalAttentionFlow(V, Q, K, method="DOP853", rtol=1e-11, atol=1e-13, **kw).fit(X0)
    np.testing.assert_allclose(ours.trajectory_, ref.trajectory_, atol=1e-7)
    single = CausalAttentionFlow(V, Q, K, rtol=1e-9, atol=1e-11, **kw).fit(X0[1])
    np.testing.assert_allclose(single.final_[0], ours.final_[1], atol=1e-7)
    assert ours.n_steps_ > 0 and ours.n_evals_ >= 7 * ours.n_steps_


def test_integrator_contract_errors() -> None:
    f = lambda t, y: torch.zeros_like(y)  # noqa: E731
    y0 = torch.ones(1, 1, 2, dtype=torch.float64) / 2 ** 0.5
    with pytest.raises(ValueError, match="t_eval"):
        integrate_on_sphere(f, y0, [0.0, 0.0])
    with pytest.raises(ValueError, match="rtol and atol"):
        integrate_on_sphere(f, y0, [0.0, 1.0], rtol=0.0)
    with pytest.raises(ValueError, match="method"):
        integrate_on_sphere(f, y0, [0.0, 1.0], method="LSODA")
    with pytest.raises(RuntimeError, match="max_steps"):
        # a fast rotation dx/dt = 50 J x needs many steps over 10 time units
        integrate_on_sphere(lambda t, y: 50 * y.flip(-1) * torch.tensor([1.0, -1.0], dtype=torch.float64), y0,
                            [0.0, 10.0], max_steps=5)
    sol = integrate_on_sphere(f, y0, [0.0, 1.0, 2.0])
    assert sol.states.shape == (3, 1, 1, 2) and sol.max_drift < 1e-15
