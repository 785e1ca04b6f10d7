"""Causal attribution of confidence to attention heads, by head ablation through the head probe.

For every head ``h`` (a ``(site, head)`` pair of :func:`recframe.heads.attention_sites`) the model is rerun on
the same examples with that head's output set to zero (``scale_heads(model, {h: 0.0})``: the head is knocked
out, nothing upstream changes) and the confidence in the *originally* predicted class is compared::

    effect_P(h)     = mean_{i in P} [ p_i(yhat_i) - p_i^{-h}(yhat_i) ]              (probability)
    log_effect_P(h) = mean_{i in P} [ log p_i(yhat_i) - log p_i^{-h}(yhat_i) ]      (log-probability)

for each pattern ``P`` of :mod:`calib_ext.cochi.patterns`. A positive effect means the head *raises* the
confidence of that pattern's predictions: a head with a large ``log_effect_WC`` drives the overconfident
errors.
The log version is what CoCHI ranks heads by: it is a relative change, comparable between patterns whose
confidence levels differ by construction (confident vs unconfident).

Why zero-ablation rather than mean-ablation or patching from another input: the intervention CoCHI then
applies scales the same heads' outputs, ``z_h -> s * z_h``; ablation is the ``s = 0`` end of that family, so
the attribution measures exactly the direction the intervention moves along.

**Exact or first-order.** :func:`head_effects` reruns the model once per head (exact, ``n_heads`` passes).
:func:`head_gradient_effects` is the first-order version ("attribution patching", Nanda 2023; Syed et al.
2023): every head's output is multiplied by a gate ``g_h = 1`` (a function patch through
``recframe.heads.patch_heads``) and ``effect_P(h) ~= d/dg_h mean_{i in P} f_i(g)`` at ``g = 1``, the slope of
``f`` (the confidence or its log) along the same scaling, so ``f(1) - f(0) ~= f'(1)``. It costs one forward
and one backward pass per pattern for all heads together, which is what makes a 72-head encoder affordable
on a CPU; it needs a model that runs with gradients.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from calib_ext.cochi.patterns import CODE, PATTERNS
from calib_ext.cochi.tasks import LogitTask, collect
from calib_ext.metrics import masked_logits
from recframe.heads import attention_sites, patch_heads, scale_heads

__all__ = ["all_heads", "head_effects", "head_gradient_effects", "predicted_log_prob"]

Head = tuple[str, int]


def all_heads(model: nn.Module) -> list[Head]:
    """Every ``(site name, head)`` the probe reaches in ``model``, in site order."""
    heads = [(s.name, h) for s in attention_sites(model) for h in range(s.n_heads)]
    if not heads:
        raise ValueError(f"{type(model).__name__} has no attention head the head probe reaches "
                         "(recframe.heads.attention_sites); CoCHI needs one")
    return heads


def predicted_log_prob(logits: Tensor, yhat: Tensor) -> Tensor:
    """``log softmax(logits)[i, yhat_i]`` float64 ``[n]`` (``-inf`` logits are masked classes)."""
    z, finite = masked_logits(logits)
    return torch.log_softmax(z.masked_fill(~finite, float("-inf")), dim=1).gather(1, yhat[:, None]).squeeze(1)


def head_effects(model: nn.Module, task: LogitTask, heads: Sequence[Head], yhat: Tensor, codes: Tensor,
                 progress: bool = True, clean_logits: Tensor | None = None
                 ) -> dict[str, dict[str, np.ndarray]]:
    """Ablation effects of every head on every pattern (module docstring).

    Args:
        model: the model (left unchanged: every probe is removed after its pass).
        task: the examples (those ``yhat`` and ``codes`` were computed on, in the same order).
        heads: the ``(site, head)`` pairs to ablate one at a time.
        yhat: ``[n]`` the clean predictions.
        codes: ``[n]`` pattern codes (:func:`calib_ext.cochi.patterns.classify`).
        progress: show a progress bar over heads.
        clean_logits: the model's logits on ``task`` when already computed (else one more pass).

    Returns:
        ``{"effect": {P: [len(heads)]}, "log_effect": {P: [len(heads)]}}`` for each pattern code ``P``
        (``NaN`` for a pattern with no example).
    """
    if clean_logits is None:
        clean_logits, _ = collect(model, task)
    clean = predicted_log_prob(clean_logits, yhat)
    effect = {p.value: np.full(len(heads), np.nan) for p in PATTERNS}
    log_effect = {p.value: np.full(len(heads), np.nan) for p in PATTERNS}
    bar = tqdm(list(heads), desc="CoCHI head ablation", disable=not progress, leave=False)
    for j, head in enumerate(bar):
        with scale_heads(model, {head: 0.0}):
            ablated = predicted_log_prob(collect(model, task)[0], yhat)
        for p in PATTERNS:
            sel = codes == CODE[p]
            if bool(sel.any()):
                effect[p.value][j] = float((clean[sel].exp() - ablated[sel].exp()).mean())
                log_effect[p.value][j] = float((clean[sel] - ablated[sel]).mean())
    return {"effect": effect, "log_effect": log_effect}


def _gated(gate: Tensor):  # noqa: ANN202 - a head patch: the head's output times its gate
    return lambda t: t * gate


def head_gradient_effects(model: nn.Module, task: LogitTask, heads: Sequence[Head], yhat: Tensor,
                          codes: Tensor, progress: bool = True) -> dict[str, dict[str, np.ndarray]]:
    """First-order ablation effects of every head on every pattern (module docstring), same output as
    :func:`head_effects`."""
    from calib_ext.cochi.tasks import model_device

    device = model_device(model)
    gates = {h: torch.ones((), device=device, requires_grad=True) for h in heads}
    patches = {h: _gated(g) for h, g in gates.items()}
    order = list(gates.values())
    totals = {kind: {p.value: np.zeros(len(heads)) for p in PATTERNS} for kind in ("effect", "log_effect")}
    n = {p.value: 0 for p in PATTERNS}
    was_training, start = model.training, 0
    model.eval()
    try:
        bar = tqdm(list(task.batches()), desc="CoCHI head gradients", disable=not progress, leave=False)
        for batch in bar:
            with torch.enable_grad(), patch_heads(model, patches):
                logits = task.logits(model, batch)
                b = logits.shape[0]
                lp = torch.log_softmax(logits.double(), dim=1).gather(1, yhat[start:start + b, None].to(
                    logits.device)).squeeze(1)
                codes_b = codes[start:start + b].to(logits.device)
                for p in PATTERNS:
                    sel = codes_b == CODE[p]
                    if not bool(sel.any()):
                        continue
                    n[p.value] += int(sel.sum())
                    for kind, f in (("log_effect", lp[sel].sum()), ("effect", lp[sel].exp().sum())):
                        grads = torch.autograd.grad(f, order, retain_graph=True, allow_unused=True)
                        totals[kind][p.value] += np.array([0.0 if g is None else float(g) for g in grads])
            start += b
    finally:
        model.train(was_training)
    if start != len(yhat):
        raise ValueError(f"{type(task).__name__} yielded {start} examples but {len(yhat)} predictions were "
                         "given")
    return {kind: {p: (v / n[p] if n[p] else np.full(len(heads), np.nan)) for p, v in by.items()}
            for kind, by in totals.items()}
