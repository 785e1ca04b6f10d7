"""Geodesic distance on the unit sphere and Expected Embedding Drift (EED), CIM's fast proxy (seed ¶16).

For output embeddings ``e`` (original input) and ``e'_v`` (focused view ``v``), normalised to the unit sphere,
the geodesic (great-circle) distance is

    d(e, e') = arccos(<e/|e|, e'/|e'|>)  in [0, π],

computed as ``2 · atan2(|û − û'|, |û + û'|)``, which equals the arccos form but keeps full precision near 0
and π (arccos of a rounded cosine does not: cos 1e-4 rounds to 1 in float32). EED averages it over the focused
views ``v = 1..V`` (e.g. one per keep budget), with weights ``w_v`` (default uniform):

    EED(x) = Σ_v w_v · d(e(x), e(x ⊙ m_v)).

It needs the output embeddings only: no catalogue-wide scores, no softmax, no semantic clustering. For a
recommender the output embedding is the query vector the scores are inner products with (SASRec's last hidden
state), so it determines the predictive distribution; its drift on the sphere is the geometric shadow of the
semantic shift that :mod:`calib_ext.cim.divergence` measures on distributions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor


def geodesic_distance(u: Tensor, v: Tensor, eps: float = 1e-12) -> Tensor:
    """Great-circle distance ``arccos(<û, v̂>)`` between the directions of ``u`` and ``v`` ``[..., d]``.

    Raises:
        ValueError: shapes differ.
    """
    if u.shape != v.shape:
        raise ValueError(f"geodesic_distance needs equal shapes, got {tuple(u.shape)} and {tuple(v.shape)}.")
    uh = u / u.norm(dim=-1, keepdim=True).clamp_min(eps)
    vh = v / v.norm(dim=-1, keepdim=True).clamp_min(eps)
    return 2.0 * torch.atan2((uh - vh).norm(dim=-1), (uh + vh).norm(dim=-1))


def expected_embedding_drift(original: Tensor, views: Sequence[Tensor] | Tensor,
                             weights: Sequence[float] | None = None) -> Tensor:
    """EED ``[N]``: weighted mean geodesic drift from ``original [N, d]`` to each view ``[N, d]`` (module
    docstring).

    Raises:
        ValueError: no views, or ``weights`` of the wrong length / not summing to a positive number.
    """
    views = list(views)
    if not views:
        raise ValueError("expected_embedding_drift needs at least one focused view.")
    w = (torch.full((len(views),), 1.0 / len(views)) if weights is None
         else torch.as_tensor(weights, dtype=torch.float))
    if w.numel() != len(views) or not float(w.sum()) > 0 or bool((w < 0).any()):
        raise ValueError(f"weights must be {len(views)} non-negative numbers with a positive sum, "
                         f"got {weights}.")
    w = (w / w.sum()).to(original.device)
    return sum(wi * geodesic_distance(original, v) for wi, v in zip(w, views, strict=True))
