"""Fine-tuning unlearning methods on a generative model: the shared loop, GA and NPO.

Every fine-tuning method (GA, NPO, TRACER) runs the same loop (:func:`finetune`): ``steps`` Adam steps, each
on ``batch_size`` forget and ``batch_size`` retain examples drawn uniformly from the training split
(:class:`~recframe.unlearning.objectives.Examples`), gradient norm clipped to ``grad_clip``, dropout on.
Every method adds the same retain term ``retain_weight * retain_nll`` (fine-tuning on retain interactions:
without it GA destroys the model within a few steps), so the methods differ only in their forgetting
objective and, for TRACER, its reassignment and coherence terms. The original model is never modified.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from recframe.unlearning.objectives import Examples, ga_loss, npo_loss, retain_nll
from recframe.yaml_config import require

__all__ = ["FinetuneSettings", "NPOSettings", "clone_model", "finetune", "run_ga", "run_npo"]

Batch = tuple[Tensor, Tensor]


@dataclass
class FinetuneSettings:
    """Settings of the fine-tuning loop (module docstring).

    Args:
        steps: optimiser steps.
        batch_size: forget and retain examples per step (each).
        lr: Adam learning rate.
        retain_weight: weight of the retain NLL term.
        grad_clip: max gradient norm (``<= 0``: off).
        seed: seed of the example draws and dropout.
    """

    steps: int = 100
    batch_size: int = 64
    lr: float = 1e-4
    retain_weight: float = 1.0
    grad_clip: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        require(self.steps >= 0, "steps", self.steps, ">= 0")
        require(self.batch_size >= 1, "batch_size", self.batch_size, ">= 1")
        require(self.lr > 0, "lr", self.lr, "> 0 (e.g. 1.0e-4)")
        require(self.retain_weight >= 0, "retain_weight", self.retain_weight, ">= 0")


@dataclass
class NPOSettings:
    """NPO's own setting (the loop's settings are :class:`FinetuneSettings`).

    Args:
        beta: inverse temperature of the NPO loss (``> 0``).
    """

    beta: float = 0.1

    def __post_init__(self) -> None:
        require(self.beta > 0, "beta", self.beta, "> 0 (e.g. 0.1)")


def clone_model(model: Any, codes: np.ndarray | None = None) -> Any:
    """A fresh copy of a generative ``model`` (from its hyperparameters), optionally on new ``codes``.

    With ``codes`` (a reassigned SID table of the same shape) only the parameters are copied: every buffer
    derived from the codes (subtree sizes, prefix tables, the trie) is rebuilt from the new codes.
    """
    hparams = {k: v for k, v in model.hparams.items() if not k.startswith("_")}
    copy = type(model)(**hparams)
    sizes = tuple(int(v) for v in model.backbone.codebook_sizes)
    copy.build_from_codes(model.backbone.codes.cpu().numpy() if codes is None else np.asarray(codes), sizes)
    if codes is None:
        copy.load_state_dict(model.state_dict())
    else:
        state = copy.state_dict()
        params = dict(model.named_parameters())
        state.update({k: v.detach().clone() for k, v in params.items()})
        copy.load_state_dict(state)
    copy.sid_table_state = model.sid_table_state
    return copy.to(next(model.parameters()).device).eval()


def finetune(
    model: Any,
    loss: Callable[[Batch, Batch], Tensor],
    forget: Examples,
    retain: Examples,
    settings: FinetuneSettings,
    progress: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Run the shared loop on ``model`` in place; ``loss(forget_batch, retain_batch)`` is the full objective
    (the caller adds the retain term). Returns the loss of every step."""
    if len(forget) == 0 or len(retain) == 0:
        raise ValueError(
            f"unlearning needs forget and retain training examples; got {len(forget)} forget and "
            f"{len(retain)} retain (does the concept match items the training data holds?)."
        )
    rng = np.random.default_rng(settings.seed)
    torch.manual_seed(settings.seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=settings.lr)
    device = params[0].device
    history: list[float] = []
    model.train()
    for step in range(settings.steps):
        fb = tuple(t.to(device) for t in forget.sample(rng, settings.batch_size))
        rb = tuple(t.to(device) for t in retain.sample(rng, settings.batch_size))
        value = loss(fb, rb)
        opt.zero_grad(set_to_none=True)
        value.backward()
        if settings.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(params, settings.grad_clip)
        opt.step()
        history.append(float(value.detach()))
        if progress is not None:
            progress(step, history[-1])
    model.eval()
    return history


def run_ga(
    original: Any,
    forget: Examples,
    retain: Examples,
    settings: FinetuneSettings,
    progress: Callable[[int, float], None] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Gradient ascent: minimise ``mean_f log pi(y_f | x_f) + retain_weight * retain_nll``."""
    model = clone_model(original)

    def loss(fb: Batch, rb: Batch) -> Tensor:
        return ga_loss(model, *fb) + settings.retain_weight * retain_nll(model, *rb)

    return model, {"losses": finetune(model, loss, forget, retain, settings, progress)}


def run_npo(
    original: Any,
    forget: Examples,
    retain: Examples,
    settings: FinetuneSettings,
    beta: float = 0.1,
    progress: Callable[[int, float], None] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """NPO with the original model as reference: ``npo_loss(beta) + retain_weight * retain_nll``."""
    model = clone_model(original)
    reference = clone_model(original)
    for p in reference.parameters():
        p.requires_grad_(False)

    def loss(fb: Batch, rb: Batch) -> Tensor:
        return npo_loss(model, reference, *fb, beta=beta) + settings.retain_weight * retain_nll(model, *rb)

    return model, {"beta": beta, "losses": finetune(model, loss, forget, retain, settings, progress)}
