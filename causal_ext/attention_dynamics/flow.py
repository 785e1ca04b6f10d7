"""The causal-attention token ODE on the unit sphere (functional core).

For tokens ``x_1, ..., x_n`` on the unit sphere ``S^{d-1}`` the dynamics studied by Karagodin et al.
(*Clustering in causal attention masking*, NeurIPS 2024) and in the two-cluster claim are

    dx_k/dt = P_{x_k}( sum_{j <= k} softmax_j( beta <Q x_k, K x_j> ) V x_j ),   P_x = I - x x^T,

where the softmax runs over the visible tokens ``j <= k`` (causal mask). Token 1 only sees itself, so it
follows the projected linear flow ``dx/dt = P_x(V x)`` (Oja's flow), whose solution is
``exp(tV) x(0) / |exp(tV) x(0)|``; with ``V = I`` it does not move at all.

``Q``, ``K`` and ``V`` may be constant ``[d, d]`` matrices or callables ``t -> [d, d]`` (time-dependent
parameters). Everything is float64 torch and batched over leading dimensions ``[..., n, d]``, so many
initialisations integrate together.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

MatrixLike = Tensor | np.ndarray
MatrixParam = MatrixLike | Callable[[float], MatrixLike]
DTYPE = torch.float64


def to_numpy(m: MatrixLike) -> np.ndarray:
    """A float64 numpy copy/view of an array or tensor."""
    return m.detach().cpu().numpy().astype(np.float64) if isinstance(m, Tensor) else np.asarray(m, np.float64)


def as_matrix(value: MatrixLike, name: str, d: int) -> Tensor:
    """``value`` as a finite float64 ``[d, d]`` tensor, or one clear error naming ``name``."""
    try:
        m = torch.as_tensor(np.asarray(value, dtype=np.float64) if not isinstance(value, Tensor) else value,
                            dtype=DTYPE)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a [d, d] matrix (array or tensor), "
                        f"got {type(value).__name__}") from exc
    if m.shape != (d, d):
        raise ValueError(f"{name} must have shape ({d}, {d}) to match the token dimension, "
                         f"got {tuple(m.shape)}")
    if not torch.isfinite(m).all():
        raise ValueError(f"{name} has non-finite entries")
    return m


def as_parameter(value: MatrixParam | None, name: str, d: int) -> Callable[[float], Tensor]:
    """Turn a constant matrix, a callable ``t -> matrix`` or ``None`` (identity) into ``t -> [d, d]`` tensor.

    A constant is validated once; a callable is validated on every call (its shape at each ``t`` is checked,
    so a wrong callable fails at the first evaluation with the parameter's name in the message).
    """
    if value is None:
        eye = torch.eye(d, dtype=DTYPE)
        return lambda t: eye
    if callable(value) and not isinstance(value, (Tensor, np.ndarray)):
        fn = value
        return lambda t: as_matrix(fn(float(t)), f"{name}(t={float(t):g})", d)
    const = as_matrix(value, name, d)
    return lambda t: const


def as_tokens(X: MatrixLike, name: str = "X0") -> Tensor:
    """Validate ``[n, d]`` or ``[B, n, d]`` tokens and put every row on the unit sphere (float64, batched).

    Rows are normalised (the dynamics live on the sphere); a zero or non-finite row is an error.
    """
    x = torch.as_tensor(np.asarray(X, dtype=np.float64) if not isinstance(X, Tensor) else X, dtype=DTYPE)
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or x.shape[1] < 1 or x.shape[2] < 2:
        raise ValueError(f"{name} must have shape [n, d] or [B, n, d] with n >= 1 and d >= 2, "
                         f"got {tuple(x.shape)}")
    if not torch.isfinite(x).all():
        raise ValueError(f"{name} has non-finite entries")
    norms = x.norm(dim=-1, keepdim=True)
    if (norms <= 1e-12).any():
        raise ValueError(f"{name} has a zero row; every token must be a nonzero vector "
                         "(it is put on the sphere)")
    return x / norms


def tangent_project(X: Tensor, W: Tensor) -> Tensor:
    """``P_x w = w - <x, w> x`` row by row (``X`` on the unit sphere), over any leading dimensions."""
    return W - (X * W).sum(-1, keepdim=True) * X


def causal_attention_weights(X: Tensor, Q: Tensor, K: Tensor, beta: float) -> Tensor:
    """Row-stochastic ``[..., n, n]``: ``A_kj = softmax_j(beta <Q x_k, K x_j>)`` over ``j <= k``, 0 above."""
    n = X.shape[-2]
    scores = beta * (X @ Q.T) @ (X @ K.T).transpose(-1, -2)
    future = torch.ones(n, n, dtype=torch.bool, device=X.device).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)


def causal_attention_velocity(X: Tensor, Q: Tensor, K: Tensor, V: Tensor, beta: float) -> Tensor:
    """The right-hand side ``P_{x_k}(sum_{j<=k} A_kj V x_j)`` for tokens ``X [..., n, d]``."""
    A = causal_attention_weights(X, Q, K, beta)
    return tangent_project(X, A @ (X @ V.T))


def token_speeds(V_dot: Tensor) -> Tensor:
    """Largest token speed ``max_k |dx_k/dt|`` per batch member (``[..., n, d] -> [...]``)."""
    return V_dot.norm(dim=-1).amax(dim=-1)
