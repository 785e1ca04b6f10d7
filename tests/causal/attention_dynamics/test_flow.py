"""The vector field: a hand computation, causality, tangency, and input errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from causal_ext.attention_dynamics import (
    CausalAttentionFlow,
    causal_attention_velocity,
    causal_attention_weights,
)
from causal_ext.attention_dynamics.flow import as_tokens


def test_velocity_by_hand_two_tokens_in_the_plane() -> None:
    # x1 = e1, x2 = (cos a, sin a); Q = K = I, beta = 2, V = diag(1, -1)
    a, beta = 0.7, 2.0
    X = torch.tensor([[1.0, 0.0], [math.cos(a), math.sin(a)]], dtype=torch.float64)
    V = torch.diag(torch.tensor([1.0, -1.0], dtype=torch.float64))
    eye = torch.eye(2, dtype=torch.float64)
    w21 = math.exp(beta * math.cos(a)) / (math.exp(beta * math.cos(a)) + math.exp(beta))
    A = causal_attention_weights(X, eye, eye, beta)
    torch.testing.assert_close(A, torch.tensor([[1.0, 0.0], [w21, 1 - w21]], dtype=torch.float64))
    m = w21 * np.array([1.0, 0.0]) + (1 - w21) * np.array([math.cos(a), -math.sin(a)])  # sum_j A_2j V x_j
    x2 = np.array([math.cos(a), math.sin(a)])
    expected2 = m - (m @ x2) * x2
    v = causal_attention_velocity(X, eye, eye, V, beta)
    np.testing.assert_allclose(v[0].numpy(), [0.0, 0.0], atol=1e-15)  # V e1 = e1 is radial: token 1 rests
    np.testing.assert_allclose(v[1].numpy(), expected2, rtol=1e-12)


def test_weights_are_causal_and_velocity_is_tangent() -> None:
    g = torch.Generator().manual_seed(0)
    X = as_tokens(torch.randn(3, 7, 4, generator=g, dtype=torch.float64))
    Q, K, V = (torch.randn(4, 4, generator=g, dtype=torch.float64) for _ in range(3))
    A = causal_attention_weights(X, Q, K, 1.5)
    assert torch.all(A.triu(1) == 0) and torch.allclose(A.sum(-1), torch.ones(3, 7, dtype=torch.float64))
    torch.testing.assert_close(A[:, 0, 0], torch.ones(3, dtype=torch.float64))
    v = causal_attention_velocity(X, Q, K, V, 1.5)
    assert (X * v).sum(-1).abs().max() < 1e-14
    # token k's velocity ignores later tokens
    X2 = X.clone()
    X2[:, -1] = as_tokens(torch.randn(3, 1, 4, generator=g, dtype=torch.float64))[:, 0]
    torch.testing.assert_close(causal_attention_velocity(X2, Q, K, V, 1.5)[:, :-1], v[:, :-1])


def test_time_dependent_parameters_are_evaluated_at_t() -> None:
    V0 = np.diag([1.0, 0.5, -0.5])
    flow_t = CausalAttentionFlow(lambda t: (1 + t) * V0, Q=lambda t: np.eye(3) * (2 - t), beta=1.0)
    flow_c = CausalAttentionFlow(2.5 * V0, Q=0.5 * np.eye(3), beta=1.0)
    X = np.random.default_rng(1).standard_normal((5, 3))
    torch.testing.assert_close(flow_t.velocity(1.5, X), flow_c.velocity(0.0, X))


def test_bad_inputs_raise_one_clear_error() -> None:
    X = np.ones((3, 2))
    with pytest.raises(ValueError, match="V must have shape"):
        CausalAttentionFlow(np.eye(3)).velocity(0.0, X)
    with pytest.raises(ValueError, match=r"V\(t=0\.5\)"):
        CausalAttentionFlow(lambda t: np.eye(3)).velocity(0.5, X)
    with pytest.raises(ValueError, match="Q has non-finite"):
        CausalAttentionFlow(np.eye(2), Q=np.array([[np.nan, 0], [0, 1]])).velocity(0.0, X)
    with pytest.raises(ValueError, match="zero row"):
        CausalAttentionFlow(np.eye(2)).fit(np.array([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="X0 must have shape"):
        CausalAttentionFlow(np.eye(2)).fit(np.ones(3))
    with pytest.raises(ValueError, match="beta"):
        CausalAttentionFlow(np.eye(2), beta=-1.0).fit(X)
    with pytest.raises(ValueError, match="horizon"):
        CausalAttentionFlow(np.eye(2), horizon=0.0).fit(X)
    with pytest.raises(ValueError, match="method"):
        CausalAttentionFlow(np.eye(2), method="euler")
    with pytest.raises(TypeError, match="V must be"):
        CausalAttentionFlow("identity").velocity(0.0, X)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="fit"):
        CausalAttentionFlow(np.eye(2)).verdicts(np.ones(2))
