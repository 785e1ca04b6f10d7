"""Repeated application of a recframe grouped-query attention layer on the sphere."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from causal_ext.attention_dynamics import (
    CausalAttentionFlow,
    causal_attention_velocity,
    two_cluster_verdict,
    uniform_sphere,
)
from causal_ext.attention_dynamics.gqa import (
    GQALayerDynamics,
    effective_value_matrix,
    layer_step,
    plant_value_spectrum,
)
from recframe.models.layers import CausalSelfAttention


def _basis(D: int, r: int, seed: int = 0) -> np.ndarray:
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((D, D)))[0][:, :r]


def test_planted_spectrum_is_the_effective_value_matrix() -> None:
    torch.manual_seed(0)
    layer = CausalSelfAttention(12, 6, 0.0, n_kv_heads=2)  # head_dim 2, rank 4
    U, lam = _basis(12, 4), np.array([0.9, 0.3, -0.2, -1.0])
    plant_value_spectrum(layer, lam, U)
    np.testing.assert_allclose(effective_value_matrix(layer), U @ np.diag(lam) @ U.T, atol=1e-6)
    with pytest.raises(ValueError, match="basis must have shape"):
        plant_value_spectrum(layer, lam, _basis(12, 5))
    with pytest.raises(ValueError, match="eigenvalues must have length"):
        plant_value_spectrum(layer, lam[:3], U)
    with pytest.raises(ValueError, match="orthonormal"):
        plant_value_spectrum(layer, lam, 2 * U)
    with pytest.raises(TypeError, match="CausalSelfAttention"):
        effective_value_matrix(torch.nn.Linear(2, 2))  # type: ignore[arg-type]


def test_uniform_attention_layer_step_is_the_euler_step_of_the_ode() -> None:
    # qk_beta = 0: every head attends uniformly, so Attn(x)_k = V_eff mean_{j<=k} x_j exactly
    torch.manual_seed(1)
    layer = plant_value_spectrum(CausalSelfAttention(8, 4, 0.0, n_kv_heads=2), np.linspace(1, -1, 4),
                                 _basis(8, 4), qk_beta=0.0).double()
    X = uniform_sphere(3, 5, 8, seed=2)
    V = torch.as_tensor(effective_value_matrix(layer))
    eye = torch.eye(8, dtype=torch.float64)
    y = X + 0.3 * causal_attention_velocity(X, eye, eye, V, 0.0)
    torch.testing.assert_close(layer_step(layer, X, 0.3), y / y.norm(dim=-1, keepdim=True))


def test_single_head_iteration_converges_to_the_ode_solution_as_the_step_shrinks() -> None:
    # one head, full-rank planted V and qk_beta = beta: the layer is the ODE's vector field with Q = K = I
    torch.manual_seed(2)
    U, lam = _basis(4, 4, seed=3), np.array([0.8, 0.1, -0.3, -0.9])
    layer = plant_value_spectrum(CausalSelfAttention(4, 1, 0.0), lam, U, qk_beta=2.0)
    X0 = uniform_sphere(2, 4, 4, seed=4)
    ode = CausalAttentionFlow(U @ np.diag(lam) @ U.T, beta=2.0, horizon=2.0, n_save=2).fit(X0).final_
    runs = [GQALayerDynamics(n_steps=round(2.0 / h), step=h, n_save=2).fit(layer, X0) for h in (0.1, 0.05)]
    errors = [np.abs(run.final_ - ode).max() for run in runs]
    assert errors[1] < 0.6 * errors[0] and errors[1] < 0.02  # first order in h


def test_gqa_layer_two_clusters_for_positive_and_none_for_nonpositive_lambda_max() -> None:
    D, H, G = 16, 4, 2
    U = _basis(D, 8, seed=0)
    X0 = uniform_sphere(6, 8, D, seed=3)
    verdicts = {}
    for s in (0.5, -0.5):
        torch.manual_seed(0)
        layer = plant_value_spectrum(CausalSelfAttention(D, H, 0.0, n_kv_heads=G), s - np.linspace(0, 1.6, 8),
                                     U, qk_beta=4.0)
        run = GQALayerDynamics(n_steps=400, step=0.25, n_save=2).fit(layer, X0)
        # GQA: V_eff has rank 8 < 16, so eigenvalue 0 exists and lambda_max >= 0
        assert run.lambda_max_ == pytest.approx(max(s, 0.0), abs=1e-6)
        verdicts[s] = [two_cluster_verdict(x, U[:, 0]) for x in run.final_]
    assert all(v.aligned for v in verdicts[0.5]) and sum(v.two_clusters for v in verdicts[0.5]) >= 3
    assert not any(v.aligned for v in verdicts[-0.5]) and min(v.n_clusters for v in verdicts[-0.5]) > 2


def test_default_layer_is_left_untouched_and_bad_input_is_rejected() -> None:
    torch.manual_seed(4)
    layer = CausalSelfAttention(8, 4, 0.0, n_kv_heads=1)
    before = {k: v.clone() for k, v in layer.state_dict().items()}
    run = GQALayerDynamics(n_steps=5, step=1.0, n_save=3).fit(layer, uniform_sphere(2, 3, 8, seed=0))
    assert all(torch.equal(before[k], v) for k, v in layer.state_dict().items())
    assert run.trajectory_.shape == (3, 2, 3, 8) and run.steps_.tolist() == [0, 2, 5]
    np.testing.assert_allclose(np.linalg.norm(run.trajectory_, axis=-1), 1.0, atol=1e-12)
    with pytest.raises(ValueError, match="token dimension"):
        GQALayerDynamics().fit(layer, np.ones((3, 4)))
    with pytest.raises(ValueError, match="n_steps"):
        GQALayerDynamics(n_steps=0).fit(layer, np.ones((3, 8)))
    with pytest.raises(TypeError, match="CausalSelfAttention"):
        GQALayerDynamics().fit(torch.nn.Linear(8, 8), np.ones((3, 8)))  # type: ignore[arg-type]
