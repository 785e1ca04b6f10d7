"""Next-item probabilities of a recommender as a multi-class prediction, for the calibration metrics.

A recframe model's ``score(batch)`` is ``[B, n_items + 1]`` over the whole catalogue (column 0 is padding).
We read it as the logits of a categorical distribution over the **eligible** items, the same set the
full-ranking evaluator ranks (DESIGN invariant 1, :mod:`recframe.metrics.topk`)::

    p(j | u) = exp(s_uj) / sum_{k in E_u} exp(s_uk)   for j in E_u,   0 otherwise,
    E_u = {1..n_items} \\ seen_u  ∪  targets_u

so the padding column is excluded and the items the user has already interacted with are masked (given
logit ``-inf``), except the held-out items themselves (a re-consumed item stays a possible answer, exactly
as the evaluator keeps it). Why mask: the ranking metrics are computed over ``E_u``, and a recommender
never serves a seen item, so the probability a user can act on is the one over ``E_u``; masking can only
raise the probability of the target. ``mask_seen=False`` gives the unmasked catalogue softmax.

Each valid held-out item (non-padding, first occurrence in its row, as the evaluator's
``dedup_targets``) is one example with label ``target - 1`` (class ``c`` is item ``c + 1``); a user with
``T`` held-out items contributes ``T`` examples sharing one distribution (leave-one-out: one each).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from recframe.metrics.ranking import dedup_targets

__all__ = ["collect_next_item_logits", "iter_next_item_logits", "next_item_logits"]


def next_item_logits(scores: Tensor, targets: Tensor, seen: Tensor | None = None,
                     valid: Tensor | None = None, mask_seen: bool = True) -> tuple[Tensor, Tensor]:
    """Masked float64 logits ``[E, n_items]`` (``-inf`` where not eligible) and labels ``[E]`` (0-based).

    Args:
        scores: ``[B, n_items + 1]`` model scores (column 0 padding).
        targets: ``[B, T]`` held-out item ids (0 = padding).
        seen: ``[B, S]`` item ids to mask (0 = padding), or None.
        valid: ``[B, T]`` which targets count (default: :func:`~recframe.metrics.ranking.dedup_targets`).
        mask_seen: mask ``seen`` items (default True; see the module docstring).
    """
    if scores.dim() != 2 or scores.shape[1] < 2:
        raise ValueError(f"scores must be [B, n_items + 1] with n_items >= 1, got {tuple(scores.shape)}")
    if targets.dim() != 2 or targets.shape[0] != scores.shape[0]:
        raise ValueError(f"targets must be [B={scores.shape[0]}, T], got {tuple(targets.shape)}")
    z = scores.detach().to(torch.float64).clone()
    if not bool(torch.isfinite(z[:, 1:]).all()):
        raise ValueError("model scores contain NaN or inf for real items; the model output is broken")
    targets = targets.to(device=z.device, dtype=torch.long)
    if mask_seen and seen is not None and seen.numel() > 0:
        z.scatter_(1, seen.to(device=z.device, dtype=torch.long), float("-inf"))
        keep = targets.clamp(min=0)
        z.scatter_(1, keep, scores.detach().to(torch.float64).gather(1, keep))
    z = z[:, 1:]  # drop the padding column (restored targets of id 0 land there and vanish)
    if valid is None:
        valid, _ = dedup_targets(targets)
    rows, cols = torch.nonzero(valid.to(z.device), as_tuple=True)
    return z[rows], targets[rows, cols] - 1


def iter_next_item_logits(model: Any, view: Any, mask_seen: bool = True,
                          size: int | None = None) -> Iterator[tuple[Tensor, Tensor]]:
    """Yield :func:`next_item_logits` for every batch of an ``EvaluationView`` (model in eval mode,
    no gradients; batches on the model's device). Restores the model's training flag afterwards."""
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for batch in view.batches(size=size, device=device):
                yield next_item_logits(model.score(batch), batch["targets"], batch.get("seen"),
                                       mask_seen=mask_seen)
    finally:
        model.train(was_training)


def collect_next_item_logits(model: Any, view: Any, mask_seen: bool = True) -> tuple[Tensor, Tensor]:
    """All of a view's examples at once: logits ``[E, n_items]`` float64 (CPU) and labels ``[E]``.

    Memory: ``E x n_items`` float64 (ML-100K test: 943 x 1682, 13 MB); stream with
    :func:`iter_next_item_logits` for large catalogues.
    """
    parts = [(z.cpu(), y.cpu()) for z, y in iter_next_item_logits(model, view, mask_seen)]
    if not parts:
        raise ValueError(f"the {getattr(view, 'stage', '?')} view has no users to evaluate")
    return torch.cat([z for z, _ in parts]), torch.cat([y for _, y in parts])
