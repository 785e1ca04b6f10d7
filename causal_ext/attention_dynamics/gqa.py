"""The same measurements on real grouped-query attention layers (``recframe.models.layers``).

A :class:`recframe.models.layers.CausalSelfAttention` with ``n_kv_heads < n_heads`` is applied over and over
to a token sequence, as the layers of a deep transformer with shared weights would be, with the tokens put
back on the sphere after every application. One application is the projected Euler step of the ODE
(a retraction onto the sphere)::

    x_k <- (x_k + h P_{x_k} a_k) / |x_k + h P_{x_k} a_k|,   a = Attn(x) under the causal mask,

which to first order in ``h`` is the token ODE with the layer's multi-head attention as the vector field
(``h = 1`` is the real residual update ``x + Attn(x)`` followed by a normalisation, up to the tangent
projection; projecting first keeps a large negative radial component from flipping a token through the
origin). Choices, all arguments of :class:`GQALayerDynamics`: ``step = 0.25``; biases are **zeroed** by
default (on a copy of the layer) because the ODE has none and a bias adds a constant drift ``P_x b`` towards
one direction; the layer runs in float64; convergence is judged like the ODE's, by the final token speed
``max_k |x_k(t+1) - x_k(t)| / h`` against ``speed_tol``.

The layer's value path reduces to one **effective value matrix** ``V_eff = sum_h W_O^h W_V^{g(h)}`` (query
head ``h`` reads key/value head ``g(h)``): it is the matrix multiplying ``x_j`` when every head attends
alike, and its spectrum plays the role of ``V``'s. The per-head maps ``W_O^h W_V^{g(h)}`` and the per-head
weight views used to plant a spectrum come from the head probe (:mod:`recframe.heads`), so this module
does not depend on how the layer lays out its fused projections. With GQA ``V_eff`` has rank at most
``n_kv_heads * head_dim < dim``, so it always has eigenvalue 0 and ``lambda_max(V_eff) >= 0``; the regime
``lambda_max <= 0`` is reached only as ``lambda_max = 0`` (:func:`plant_value_spectrum` with a negative
planted spectrum).
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import Tensor

from causal_ext.attention_dynamics.flow import DTYPE, MatrixLike, as_tokens, tangent_project
from recframe.heads import head_projections, head_value_output_maps
from recframe.models.layers import CausalSelfAttention, sequence_attention_mask


def _check_layer(layer: object) -> CausalSelfAttention:
    if not isinstance(layer, CausalSelfAttention):
        raise TypeError("layer must be a recframe.models.layers.CausalSelfAttention, got "
                        f"{type(layer).__name__}")
    return layer


def _zero_biases(layer: CausalSelfAttention) -> None:
    with torch.no_grad():
        for bias in head_projections(layer).biases():
            bias.zero_()


def effective_value_matrix(layer: CausalSelfAttention) -> np.ndarray:
    """``V_eff = sum_h W_O^h W_V^{g(h)}`` ``[dim, dim]`` of a (grouped-query) attention layer."""
    return head_value_output_maps(_check_layer(layer), dtype=torch.float64).sum(0).numpy()


def plant_value_spectrum(layer: CausalSelfAttention, eigenvalues: np.ndarray, basis: np.ndarray,
                         qk_beta: float | None = None) -> CausalSelfAttention:
    """Set a layer's value and output weights so that ``V_eff = basis @ diag(eigenvalues) @ basis.T``.

    ``basis`` is ``[dim, r]`` with orthonormal columns and ``r = n_kv_heads * head_dim`` (the largest rank GQA
    allows); ``basis_g`` is its ``g``-th block of ``head_dim`` columns. Key/value head ``g`` reads the
    coordinates ``basis_g^T x`` and every query head of its group writes back
    ``basis_g diag(eigenvalues_g) / group``. Queries and keys: with ``qk_beta=None`` they keep their
    weights (PyTorch's default initialisation gives scores near 0, i.e. nearly uniform causal attention);
    with a number, every query head of group ``g`` and key head ``g`` get
    ``sqrt(qk_beta * sqrt(head_dim)) basis_g^T``, so the head's score is
    ``qk_beta <basis_g^T x_k, basis_g^T x_j>``: the ``Q = K = I`` model at inverse temperature ``qk_beta``
    seen through the group's coordinates. All biases are zeroed. The layer is changed in place
    and returned.
    """
    layer = _check_layer(layer)
    proj = head_projections(layer)
    G, dh, D = proj.value.shape
    r = G * dh
    U = np.asarray(basis, dtype=np.float64)
    lam = np.asarray(eigenvalues, dtype=np.float64).reshape(-1)
    if U.shape != (D, r):
        raise ValueError(f"basis must have shape ({D}, {r}) = (dim, n_kv_heads * head_dim), got {U.shape}")
    if not np.allclose(U.T @ U, np.eye(r), atol=1e-8):
        raise ValueError("basis must have orthonormal columns (e.g. from np.linalg.qr)")
    if lam.shape != (r,):
        raise ValueError(f"eigenvalues must have length n_kv_heads * head_dim = {r}, got {lam.shape[0]}")
    if qk_beta is not None and not (np.isfinite(qk_beta) and qk_beta >= 0):
        raise ValueError(f"qk_beta must be None or a finite number >= 0, got {qk_beta}")
    blocks = np.stack([U[:, g * dh:(g + 1) * dh] for g in range(G)])  # [G, D, d_h]: basis_g
    g_of = list(proj.kv_head)  # the key/value head each query head reads
    group = np.bincount(g_of, minlength=G)  # query heads per key/value head
    wo = np.stack([blocks[g] * lam[g * dh:(g + 1) * dh] / group[g] for g in g_of])  # [H, D, d_h]: W_O^h
    dtype = proj.value.dtype
    with torch.no_grad():
        proj.value.copy_(torch.as_tensor(blocks.transpose(0, 2, 1), dtype=dtype))
        if qk_beta is not None:
            c = float(np.sqrt(qk_beta * np.sqrt(dh)))
            proj.key.copy_(torch.as_tensor(c * blocks.transpose(0, 2, 1), dtype=dtype))
            proj.query.copy_(torch.as_tensor(c * blocks[g_of].transpose(0, 2, 1), dtype=dtype))
        proj.output.copy_(torch.as_tensor(wo, dtype=dtype))
    _zero_biases(layer)
    return layer


def layer_step(layer: CausalSelfAttention, X: Tensor, step: float) -> Tensor:
    """One projected Euler step ``normalise(x + h P_x Attn(x))`` of tokens ``X [B, n, d]`` on the sphere."""
    mask = sequence_attention_mask(torch.ones(X.shape[:2], dtype=torch.long, device=X.device))
    y = X + step * tangent_project(X, layer(X, mask))
    return y / y.norm(dim=-1, keepdim=True)


class GQALayerDynamics:
    """Repeated application of one attention layer to tokens on the sphere.

    Args:
        n_steps: number of layer applications.
        step: Euler step ``h`` (the "time" after ``n_steps`` applications is ``n_steps * step``).
        n_save: states kept, equally spaced in the number of applications (including 0 and ``n_steps``).
        zero_bias: zero the layer's biases (on a copy) so that its vector field matches the bias-free ODE.
        speed_tol: convergence criterion on the final largest token speed.

    Attributes (after :meth:`fit`):
        steps_: ``[S]`` application counts of the kept states.
        trajectory_: ``[S, B, n, d]`` tokens; ``final_``: ``[B, n, d]``.
        speed_: ``[B]`` largest ``|x_k(t+1) - x_k(t)| / h`` at the last application; ``converged_`` its test.
        value_matrix_: the layer's effective value matrix; ``lambda_max_``: its largest eigenvalue real part.
    """

    def __init__(self, n_steps: int = 800, step: float = 0.25, n_save: int = 41, zero_bias: bool = True,
                 speed_tol: float = 1e-4) -> None:
        self.n_steps, self.step, self.n_save = n_steps, step, n_save
        self.zero_bias, self.speed_tol = zero_bias, speed_tol

    def fit(self, layer: CausalSelfAttention, X0: MatrixLike) -> GQALayerDynamics:
        """Apply ``layer`` ``n_steps`` times to ``X0`` (``[n, dim]`` or ``[B, n, dim]``, on the sphere)."""
        layer = _check_layer(layer)
        if int(self.n_steps) != self.n_steps or self.n_steps < 1:
            raise ValueError(f"n_steps must be a positive integer, got {self.n_steps}")
        if not self.step > 0:
            raise ValueError(f"step must be positive, got {self.step}")
        if int(self.n_save) != self.n_save or self.n_save < 2:
            raise ValueError(f"n_save must be an integer >= 2, got {self.n_save}")
        x = as_tokens(X0)
        width = head_projections(layer).output.shape[1]
        if x.shape[-1] != width:
            raise ValueError(f"X0 has token dimension {x.shape[-1]} but the layer's width is {width}")
        work = copy.deepcopy(layer).to(DTYPE).eval()
        if self.zero_bias:
            _zero_biases(work)
        self.value_matrix_ = effective_value_matrix(work)
        self.lambda_max_ = float(np.linalg.eigvals(self.value_matrix_).real.max())
        keep = set(np.unique(np.linspace(0, self.n_steps, int(self.n_save)).round().astype(int)).tolist())
        kept, states = [0], [x]
        with torch.no_grad():
            for i in range(1, int(self.n_steps) + 1):
                prev, x = x, layer_step(work, x, self.step)
                if i in keep:
                    kept.append(i)
                    states.append(x)
        self.steps_ = np.asarray(kept)
        self.trajectory_ = torch.stack(states).numpy()
        self.final_ = self.trajectory_[-1]
        self.speed_ = ((x - prev).norm(dim=-1).amax(dim=-1) / self.step).numpy()
        self.converged_ = self.speed_ < self.speed_tol
        return self
