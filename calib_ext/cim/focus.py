"""The causally-focused view of CIM (seed ¶16): keep the parts the prediction causally depends on, mask the
rest.

**Intervention effect.** The effect of part ``j`` of input ``x`` is what the intervention ``do(part_j :=
masked)`` does to the model's output, one part at a time (occlusion, as in Zeiler & Fergus 2014 and the
leave-one-out attributions of NLP). Two effect measures, one per score family:

* ``"distribution"`` (used for Semantic Divergence): the drop of the log-probability of the original top-1
  outcome ``ŷ = argmax p(· | x)``,

      δ_j = log p(ŷ | x) − log p(ŷ | x with part j masked);

* ``"embedding"`` (used for EED, so that its whole pipeline runs without predictive distributions): the
  geodesic drift of the output embedding, ``δ_j = arccos <ê(x), ê(x with part j masked)>``.

**Budget.** The focused view with keep fraction ``ρ`` keeps, of the ``n`` parts present in ``x``, the
``k = max(min_keep, ⌈ρ n⌉)`` (at most ``n``) with the largest effect and masks the others; ties keep the later
(more recent) position. Choice, stated: a fraction rather than a fixed ``k`` because histories range from 5 to
50 items; ``ρ`` is a setting chosen on validation data (the benchmark picks it by validation AUROC).

The focused view only ever *masks*: its keep mask is a subset of the present parts, so a history item is
either the original item at its original position or padding, never a new item (tested).

Cost: one forward pass per present part (``N · L`` rows for ``N`` inputs of ``L`` parts), in chunks of
``chunk_size`` rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from calib_ext.cim.adapters import Batch, FocusAdapter, take
from calib_ext.cim.drift import geodesic_distance

Effect = Literal["distribution", "embedding"]


def intervention_effects(adapter: FocusAdapter, inputs: Batch, kind: Effect = "distribution", *,
                         base_embedding: Tensor | None = None, base_log_probs: Tensor | None = None,
                         chunk_size: int = 4096) -> Tensor:
    """Effect ``δ [N, L]`` of masking each present part alone (module docstring); ``-inf`` where no part.

    Args:
        adapter: the model (:class:`~calib_ext.cim.adapters.FocusAdapter`).
        inputs: a batch of ``N`` inputs.
        kind: ``"distribution"`` (top-1 log-probability drop) or ``"embedding"`` (geodesic drift).
        base_embedding, base_log_probs: the unmasked outputs, when already computed.
        chunk_size: masked variants per forward pass.
    """
    if kind not in ("distribution", "embedding"):
        raise ValueError(f"kind={kind!r}; use 'distribution' (for Semantic Divergence) or 'embedding' "
                         "(for EED).")
    parts = adapter.parts(inputs)
    emb = adapter.embed(inputs) if base_embedding is None else base_embedding
    if kind == "distribution":
        lp = adapter.log_probs(inputs, emb) if base_log_probs is None else base_log_probs
        top1 = lp.argmax(dim=1)
        base = lp.gather(1, top1[:, None])[:, 0]
    effects = torch.full(parts.shape, float("-inf"), dtype=torch.float32, device=parts.device)
    rows, cols = torch.nonzero(parts, as_tuple=True)
    for start in range(0, len(rows), chunk_size):
        r, c = rows[start:start + chunk_size], cols[start:start + chunk_size]
        sub = take(inputs, r)
        keep = parts[r].clone()
        keep[torch.arange(len(r), device=keep.device), c] = False
        e = adapter.embed(sub, keep)
        if kind == "distribution":
            lp_j = adapter.log_probs(sub, e)
            delta = base[r] - lp_j.gather(1, top1[r][:, None])[:, 0]
        else:
            delta = geodesic_distance(emb[r], e)
        effects[r, c] = delta.float()
    return effects


def focus_mask(effects: Tensor, parts: Tensor, keep_fraction: float, min_keep: int = 1) -> Tensor:
    """Keep mask ``bool [N, L]`` of the focused view: the ``max(min_keep, ⌈ρ n⌉)`` largest-effect parts.

    Raises:
        ValueError: ``keep_fraction`` outside (0, 1] or ``min_keep < 0``.
    """
    if not 0.0 < float(keep_fraction) <= 1.0:
        raise ValueError(f"keep_fraction={keep_fraction}; it must be in (0, 1] (the share of parts kept).")
    if int(min_keep) < 0:
        raise ValueError(f"min_keep={min_keep}; it must be >= 0.")
    n = parts.sum(dim=1)
    k = torch.clamp(torch.maximum(torch.ceil(n.double() * float(keep_fraction) - 1e-9).long(),
                                  torch.full_like(n, int(min_keep))), max=n)
    score = torch.where(parts, effects.float(), torch.tensor(float("-inf"), device=effects.device))
    # later positions first among equal effects: sort the flipped row stably, then map back
    flipped = score.flip(1)
    order = torch.sort(flipped, dim=1, descending=True, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order).contiguous())
    return (rank.flip(1) < k[:, None]) & parts


def focused_views(effects: Tensor, parts: Tensor, keep_fractions: Sequence[float], min_keep: int = 1
                  ) -> list[Tensor]:
    """One keep mask per budget in ``keep_fractions`` (see :func:`focus_mask`)."""
    if not keep_fractions:
        raise ValueError("keep_fractions is empty; give at least one budget, e.g. (0.5,).")
    return [focus_mask(effects, parts, rho, min_keep) for rho in keep_fractions]


def kept_count(n_parts: int, keep_fraction: float, min_keep: int = 1) -> int:
    """How many of ``n_parts`` parts a view keeps (the rule of :func:`focus_mask`)."""
    return min(n_parts, max(int(min_keep), math.ceil(n_parts * keep_fraction - 1e-9)))
