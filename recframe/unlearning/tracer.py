"""TRACER: concept unlearning by token reassignment, with a coherence regulariser.

1. **Reassign** (:mod:`recframe.unlearning.reassign`): the forget items get new collision-free code paths
   with the least sharing with retain items; retain items keep theirs.
2. **Rebuild**: the SID table becomes :meth:`~recframe.tokenizers.SIDTable.reassigned` (``version + 1``, a
   new fingerprint, ``derived_from`` the old one); the model is rebuilt on the new codes with the original
   parameters (every code-derived buffer and the trie rebuilt from the new codes) and its
   ``sid_table_state`` is the new table's, so its checkpoint records the new version.
3. **Fine-tune** with the shared loop (:mod:`recframe.unlearning.methods`) on
   ``concept_unlikelihood + coherence_weight * coherence_kl + representation_weight * representation_drift
   + retain_weight * retain_nll`` (:mod:`recframe.unlearning.objectives`): the unlikelihood runs on the
   histories of both the forget and the retain batch (the concept must leave every user's list) and acts on
   the exclusive roots of the *new* table, which after reassignment are a few tokens no retain item uses; the
   coherence terms hold the retain items' next-item distributions and representations to the original
   model's.

**Sampled roots** (``root_sample``). The unlikelihood costs one teacher-forced prefix run per exclusive root.
After reassignment the roots are few; without it (``reassign: false``, the ablation) every forget item is
usually its own root, ten times as many and ten times the fine-tuning time on ML-100K. ``root_sample = m``
replaces the exact concept mass by its sampled-root estimate (``m`` roots drawn uniformly without replacement
per step, their mass scaled by ``R / m``; unbiased for the mass, the loss exact plus a non-negative Jensen
excess: :mod:`recframe.unlearning.objectives`). The draws come from their own generator seeded with the
loop's ``seed``, so the example draws and dropout are those of the exact run. ``0`` (the default) or any
``m >= R`` is exact (so the same ``m`` given to TRACER with reassignment, whose roots are few, is usually
exact there). Whether the estimate changes what the ablation finds is measured, not assumed:
``benchmarks/unlearning_intervals.py`` runs the ablation both exactly and sampled where exact is affordable.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from recframe.tokenizers.sid_table import SIDTable
from recframe.unlearning.methods import Batch, FinetuneSettings, clone_model, finetune
from recframe.unlearning.objectives import (
    Examples,
    coherence_kl,
    concept_unlikelihood,
    representation_drift,
    retain_code_masks,
    retain_nll,
)
from recframe.unlearning.reassign import exclusive_roots, reassign_forget_items
from recframe.yaml_config import require

__all__ = ["TracerSettings", "model_table", "reassigned_model", "run_tracer"]


@dataclass
class TracerSettings:
    """TRACER's weights (the loop's settings are :class:`FinetuneSettings`).

    Args:
        coherence_weight: weight of the retain next-item KL.
        representation_weight: weight of the retain representation drift.
        reassign: move the forget items first (``False`` runs the same objective on the original codes: the
            ablation that shows what reassignment adds).
        root_sample: exclusive roots sampled per step for the concept unlikelihood (module docstring);
            ``0``: every root (exact).
    """

    coherence_weight: float = 1.0
    representation_weight: float = 1.0
    reassign: bool = True
    root_sample: int = 0

    def __post_init__(self) -> None:
        require(self.coherence_weight >= 0, "coherence_weight", self.coherence_weight, ">= 0")
        require(self.representation_weight >= 0, "representation_weight", self.representation_weight, ">= 0")
        require(self.root_sample >= 0, "root_sample", self.root_sample, ">= 0 (0: every root, exact)")


def model_table(model: Any) -> SIDTable:
    """The model's SID table: its stored state, or (a model built from given codes) a table over its codes
    with a fingerprint of the codes."""
    if model.sid_table_state is not None:
        return SIDTable.from_state_dict(model.sid_table_state)
    codes = model.backbone.codes.cpu().numpy()
    digest = hashlib.sha256(np.ascontiguousarray(codes).tobytes()).hexdigest()
    return SIDTable(
        codes=codes,
        codebook_sizes=tuple(model.backbone.codebook_sizes),
        fingerprint=digest,
        settings={"tokenizer": "given codes"},
        stats={},
    )


def reassigned_model(original: Any, forget: np.ndarray, reason: str) -> tuple[Any, SIDTable, dict[str, Any]]:
    """Steps 1-2: the model rebuilt on the reassigned table, the table, and the reassignment's summary."""
    table = model_table(original)
    moved = reassign_forget_items(table.codes, table.codebook_sizes, forget)
    new_table = table.reassigned(moved.items, moved.codes, reason)
    model = clone_model(original, codes=new_table.codes)
    model.sid_table_state = new_table.state_dict()
    info = {
        "forget_items": int(len(moved.items)),
        "moved_items": moved.moved,
        "sharing_cost_before": moved.sharing_cost_before,
        "sharing_cost_after": moved.sharing_cost,
        "shared_retain_before": moved.shared_before,
        "shared_retain_after": moved.shared_after,
        "sid_version": new_table.version,
        "sid_fingerprint": new_table.fingerprint,
        "sid_derived_from": table.fingerprint,
    }
    return model, new_table, info


def _roots(codes: np.ndarray, forget: np.ndarray) -> tuple[Tensor, Tensor]:
    """One representative forget item and the length of each exclusive root."""
    roots = exclusive_roots(codes, forget)
    f_items = np.flatnonzero(forget)
    reps, depths = [], []
    for root in roots:
        under = f_items[(codes[f_items, : len(root)] == np.asarray(root)).all(1)]
        reps.append(int(under[0]))
        depths.append(len(root))
    return torch.tensor(reps, dtype=torch.long), torch.tensor(depths, dtype=torch.long)


def run_tracer(
    original: Any,
    forget_mask: np.ndarray,
    forget: Examples,
    retain: Examples,
    settings: FinetuneSettings,
    tracer: TracerSettings | None = None,
    reason: str = "concept",
    progress: Callable[[int, float], None] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """TRACER (module docstring). Returns the unlearned model (on its new SID table) and a summary."""
    tracer = tracer or TracerSettings()
    forget_mask = np.asarray(forget_mask, dtype=bool).copy()
    forget_mask[0] = False
    if tracer.reassign:
        model, _, info = reassigned_model(original, forget_mask, reason)
    else:
        model, info = clone_model(original), {"moved_items": 0}
    reference = clone_model(original)
    for p in reference.parameters():
        p.requires_grad_(False)
    codes = model.backbone.codes.cpu().numpy()
    roots, depths = _roots(codes, forget_mask)
    info["exclusive_roots"] = int(len(roots))
    sample = tracer.root_sample if 0 < tracer.root_sample < len(roots) else 0
    info["roots_per_step"] = sample or int(len(roots))
    draws = torch.Generator().manual_seed(settings.seed)
    masks = retain_code_masks(codes, tuple(model.backbone.codebook_sizes), forget_mask)
    retain_items = torch.from_numpy(np.flatnonzero(~forget_mask)[1:])
    device = next(model.parameters()).device
    roots, depths, retain_items = roots.to(device), depths.to(device), retain_items.to(device)

    def loss(fb: Batch, rb: Batch) -> Tensor:
        histories = torch.cat([fb[0], rb[0]])
        total = concept_unlikelihood(model, histories, roots, depths, sample=sample, generator=draws)
        if tracer.coherence_weight:
            total = total + tracer.coherence_weight * coherence_kl(model, reference, *rb, masks)
        if tracer.representation_weight:
            total = total + tracer.representation_weight * representation_drift(
                model, reference, retain_items
            )
        return total + settings.retain_weight * retain_nll(model, *rb)

    info["losses"] = finetune(model, loss, forget, retain, settings, progress)
    return model, info
