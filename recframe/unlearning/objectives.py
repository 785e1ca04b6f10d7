"""Training examples and the losses of the fine-tuning methods (GA, NPO, TRACER's terms).

An *example* is a training position ``(x, y)``: the user's (at most ``max_len``) items before ``y`` and the
item ``y`` itself, taken from the training split only. Forget examples are those whose ``y`` is a forget
item, retain examples the others.

All probabilities are the model's own, exactly as :meth:`~recframe.models.generative.GenerativeRecModel.score`
computes them: ``log pi(y | x) = sum_l log p_l(c_l(y) | x, c_<l(y))`` with each level normalised as the model
is (``codebook`` or ``valid``), teacher-forced along ``y``'s path, with the model's add-ons' logit
adjustments. Losses (``B`` examples per batch; all minimised):

* :func:`ga_loss` (gradient ascent on forget): ``mean_f log pi(y_f | x_f)``;
* :func:`npo_loss` (Zhang et al. 2024, Negative Preference Optimization):
  ``(2 / beta) mean_f log(1 + (pi(y_f | x_f) / pi_ref(y_f | x_f))^beta)``
  ``= (2 / beta) mean_f softplus(beta (log pi - log pi_ref))`` with ``pi_ref`` the original model (frozen).
  Its gradient is GA's weighted by ``2 r^beta / (1 + r^beta)`` (``r`` the ratio), which vanishes once an
  example is forgotten, so unlike GA it does not diverge; ``beta = 0.1`` is the paper's default
  (``beta -> 0`` recovers GA);
* :func:`retain_nll` (the retain term every fine-tuning method adds): ``-mean_r log pi(y_r | x_r)``;
* :func:`concept_unlikelihood` (TRACER's forgetting objective): ``-mean_x log(1 - P(F | x))`` where
  ``P(F | x) = sum_{p in roots} pi(p | x)`` is the probability of generating any forget item, computed on
  the exclusive roots (:func:`~recframe.unlearning.reassign.exclusive_roots`: prefixes only forget items
  continue). After reassignment the roots are few tokens that no retain item uses, so this pushes down the
  concept as a whole without pushing down a shared token. Bounded below by 0 (it stops once the concept is
  improbable), unlike GA. Its cost grows with the number of roots ``R`` (one teacher-forced prefix run per
  root and level); :func:`sampled_concept_log_mass` is the cheaper estimate for many roots (below);
* :func:`coherence_kl` (TRACER's coherence regulariser, first part): on retain examples, per level ``l``,
  ``KL(p_orig^R(. | x, c_<l) || p_theta^R(. | x, c_<l))`` averaged over examples and levels, where ``^R``
  renormalises each distribution over the codes that continue some *retain* item's path from that prefix
  (the mass on forget-only codes is not to be kept). Summed over levels along a path this is the
  teacher-forced estimate of the KL between the two models' next-item distributions over retain items;
* :func:`representation_drift` (second part): ``sum_i ||e_theta(i) - e_orig(i)||^2 / sum_i ||e_orig(i)||^2``
  over retain items, ``e`` = :meth:`~recframe.models.generative.backbones.SIDBackbone.item_representation`
  (the pooled SID embedding decoding reads), which keeps retain items' positions, hence their
  neighbourhoods, where the original model had them.

**Sampled roots** (``sample = m``, :func:`sampled_concept_log_mass`). Without reassignment every forget item
is usually its own exclusive root (``R`` = the number of forget items, 92-179 on ML-100K against 7-21 after
reassignment), and the exact mass costs ``R`` prefix runs per history. The estimate draws ``m`` of the ``R``
roots uniformly without replacement (one subset per batch, a fresh one per call) and scales their mass by
``R / m`` (the Horvitz-Thompson estimate): ``P^(F | x) = (R / m) sum_{p in S} pi(p | x)``. Each root is in
the subset with probability ``m / R``, so ``E[P^(F | x)] = P(F | x)`` exactly, for every history, and the
gradient of ``P^`` is unbiased for the gradient of ``P``. The loss ``-log(1 - P^)`` is convex in ``P^``, so
(Jensen) its expectation is at least the exact loss; the excess is ``E[(P^ - P)^2] / (2 (1 - P')^2)`` for
some ``P'`` between ``P`` and ``P^`` (Taylor), small while the concept mass is small, which it becomes within
the first steps. ``P^`` can exceed 1 (a subset holding more than ``m / R`` of the mass); above
``1 - SAMPLED_MARGIN`` the loss continues along its tangent there (finite, still pushing the sampled roots
down) instead of being clamped to a constant, which would give exactly those histories no gradient. With
``m >= R`` the estimate is the exact mass and the loss the exact one. Uniform sampling (not by an estimate
of each root's mass) keeps the estimate unbiased without a second forward pass; its variance is what the
excess above pays for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from recframe.data.interactions import Histories
from recframe.models.generative.decoding import normalise_step

__all__ = [
    "SAMPLED_MARGIN",
    "Examples",
    "concept_log_mass",
    "concept_unlikelihood",
    "coherence_kl",
    "ga_loss",
    "level_logits",
    "level_logprobs",
    "npo_loss",
    "path_logprob",
    "representation_drift",
    "retain_code_masks",
    "retain_nll",
    "sampled_concept_log_mass",
]

#: with sampled roots, the loss follows its tangent above an estimated concept mass of ``1 - SAMPLED_MARGIN``
SAMPLED_MARGIN = 0.01


@dataclass(frozen=True)
class Examples:
    """Training positions: ``history [n, max_len]`` (left-padded, oldest first) and ``target [n]``."""

    history: np.ndarray
    target: np.ndarray

    @classmethod
    def from_histories(cls, histories: Histories, max_len: int) -> Examples:
        """Every position ``t >= 1`` of every user's chronological history (the item at ``t`` is ``y``)."""
        hist, tgt = [], []
        for user in range(len(histories.indptr) - 1):
            seq = np.asarray(histories.of(user), dtype=np.int64)
            for t in range(1, len(seq)):
                row = seq[max(0, t - max_len) : t]
                hist.append(np.pad(row, (max_len - len(row), 0)))
                tgt.append(seq[t])
        if not tgt:
            return cls(np.zeros((0, max_len), dtype=np.int64), np.zeros(0, dtype=np.int64))
        return cls(np.stack(hist), np.asarray(tgt, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.target)

    def split(self, forget: np.ndarray) -> tuple[Examples, Examples]:
        """``(forget examples, retain examples)`` by the target's membership in ``forget``."""
        is_f = np.asarray(forget, dtype=bool)[self.target]
        return (
            Examples(self.history[is_f], self.target[is_f]),
            Examples(self.history[~is_f], self.target[~is_f]),
        )

    def sample(self, rng: np.random.Generator, size: int) -> tuple[Tensor, Tensor]:
        """``size`` examples drawn uniformly (with replacement when fewer exist) as tensors."""
        idx = rng.choice(len(self), size=size, replace=len(self) < size)
        return torch.from_numpy(self.history[idx]), torch.from_numpy(self.target[idx])


# --------------------------------------------------------------------------- per-level terms
def level_logits(model, history: Tensor, items: Tensor) -> list[Tensor]:
    """Teacher-forced next-code logits along ``items``' paths: per level ``l``, ``[B, M, C_l]`` for
    ``history [B, w]`` and ``items [B, M]`` (the model's add-on adjustments included)."""
    backbone = model.backbone
    codes = backbone.codes[items]
    ctx = backbone.context(history)
    return [backbone.step(ctx, codes[:, :, :level].contiguous()) for level in range(backbone.L)]


def level_logprobs(model, history: Tensor, items: Tensor) -> Tensor:
    """``[B, M, L]``: ``log p_l(c_l(i) | x, c_<l(i))`` of each item's code at each level, normalised as the
    model is (``codebook``: over the level's codebook; ``valid``: over the prefix's trie children)."""
    backbone, trie = model.backbone, model.trie
    codes = backbone.codes[items]
    out = []
    for level, logits in enumerate(level_logits(model, history, items)):
        if backbone.normalize == "valid":
            nodes = trie.path_nodes[items][..., level]
            logp = normalise_step(logits, trie.children(level, nodes) >= 0, "valid")
        else:
            logp = torch.log_softmax(logits.float(), dim=-1)
        out.append(logp.gather(-1, codes[..., level : level + 1]).squeeze(-1))
    return torch.stack(out, dim=-1)


def path_logprob(model, history: Tensor, target: Tensor) -> Tensor:
    """``[B]``: ``log pi(y | x)`` for ``history [B, w]`` and ``target [B]`` (equal to ``score``'s column)."""
    return level_logprobs(model, history, target[:, None]).sum(-1)[:, 0]


# --------------------------------------------------------------------------- losses
def ga_loss(model, history: Tensor, target: Tensor) -> Tensor:
    """Gradient ascent on forget examples: ``mean log pi(y | x)`` (minimised)."""
    return path_logprob(model, history, target).mean()


def npo_loss(model, reference, history: Tensor, target: Tensor, beta: float = 0.1) -> Tensor:
    """NPO: ``(2 / beta) mean softplus(beta (log pi - log pi_ref))`` on forget examples (module docstring)."""
    if beta <= 0:
        raise ValueError(f"npo beta={beta}; it must be > 0 (beta -> 0 is gradient ascent).")
    with torch.no_grad():
        ref = path_logprob(reference, history, target)
    return (2.0 / beta) * F.softplus(beta * (path_logprob(model, history, target) - ref)).mean()


def retain_nll(model, history: Tensor, target: Tensor) -> Tensor:
    """The retain term: ``-mean log pi(y | x)`` on retain examples."""
    return -path_logprob(model, history, target).mean()


def concept_log_mass(model, history: Tensor, roots: Tensor, depths: Tensor) -> Tensor:
    """``[B]``: ``log P(F | x) = log sum_p pi(p | x)`` over the exclusive roots (exact).

    Args:
        roots: ``[R]`` one representative forget item per root (its path starts with the root prefix).
        depths: ``[R]`` each root's length (``1..L``).
    """
    items = roots[None].expand(history.shape[0], -1)
    cum = level_logprobs(model, history, items).cumsum(-1)  # [B, R, L]
    logp = cum.gather(-1, (depths - 1)[None, :, None].expand(history.shape[0], -1, 1)).squeeze(-1)
    return torch.logsumexp(logp, dim=-1)


def sampled_concept_log_mass(
    model,
    history: Tensor,
    roots: Tensor,
    depths: Tensor,
    sample: int,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``[B]``: the log of the sampled-root estimate ``P^(F | x) = (R / m) sum_{p in S} pi(p | x)`` (module
    docstring: ``m = sample`` roots drawn uniformly without replacement from ``generator``, one subset for the
    batch; unbiased for ``P(F | x)``). ``sample <= 0`` or ``>= R`` is the exact :func:`concept_log_mass`."""
    n = int(roots.shape[0])
    if sample <= 0 or sample >= n:
        return concept_log_mass(model, history, roots, depths)
    pick = torch.randperm(n, generator=generator)[:sample].to(roots.device)
    return concept_log_mass(model, history, roots[pick], depths[pick]) + float(np.log(n / sample))


def concept_unlikelihood(
    model,
    history: Tensor,
    roots: Tensor,
    depths: Tensor,
    eps: float = 1e-6,
    sample: int = 0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """``-mean_x log(1 - P(F | x))`` with ``P(F | x) = sum_p pi(p | x)`` over the exclusive roots.

    Args:
        roots: ``[R]`` one representative forget item per root (its path starts with the root prefix).
        depths: ``[R]`` each root's length (``1..L``).
        eps: the exact mass is capped at ``1 - eps`` (a floating-point guard).
        sample: ``0`` (or ``>= R``): every root, exact. ``m`` in ``1..R-1``: the sampled-root estimate of
            the mass (module docstring; its loss is convex in the unbiased mass estimate, so it is the exact
            loss plus a non-negative Jensen excess, and it follows its tangent above ``1 - SAMPLED_MARGIN``).
        generator: the root draws' random stream (``None``: torch's global one).
    """
    if 0 < sample < int(roots.shape[0]):
        log_mass = sampled_concept_log_mass(model, history, roots, depths, sample, generator)
        return _log_one_minus_tangent(log_mass, SAMPLED_MARGIN).mean()
    log_mass = concept_log_mass(model, history, roots, depths).clamp(max=float(np.log1p(-eps)))
    return -torch.log1p(-log_mass.exp()).mean()


def _log_one_minus_tangent(log_mass: Tensor, margin: float) -> Tensor:
    """``-log(1 - P)`` for ``P = exp(log_mass) <= 1 - margin``, and above it the tangent at ``1 - margin``:
    ``-log(margin) + (P - (1 - margin)) / margin`` (convex, finite and increasing for every ``P``)."""
    mass = log_mass.exp()
    knot = 1.0 - margin
    inside = -torch.log1p(-torch.clamp(mass, max=knot))
    tangent = -float(np.log(margin)) + (mass - knot) / margin
    return torch.where(mass <= knot, inside, tangent)


def retain_code_masks(codes: np.ndarray, codebook_sizes: tuple[int, ...], forget: np.ndarray) -> list[Tensor]:
    """Per level ``l``, bool ``[n_items + 1, C_l]``: for a retain item ``i``, the codes that continue some
    retain item's path from ``i``'s prefix ``c_<l(i)`` (rows of forget items and row 0 all False)."""
    from recframe.models.generative.backbones import sibling_code_masks

    forget = np.asarray(forget, dtype=bool)
    keep = np.flatnonzero(~forget)
    keep = keep[keep > 0]
    sub = np.concatenate([np.zeros((1, codes.shape[1]), dtype=np.int64), np.asarray(codes)[keep]])
    masks = sibling_code_masks(sub, codebook_sizes)
    out = []
    for mask in masks:
        full = np.zeros((len(codes), mask.shape[1]), dtype=bool)
        full[keep] = mask[1:]
        out.append(torch.from_numpy(full))
    return out


def coherence_kl(
    model, reference, history: Tensor, target: Tensor, masks: list[Tensor], ref_history: Tensor | None = None
) -> Tensor:
    """Mean over retain examples and levels of ``KL(p_orig^R || p_theta^R)`` (module docstring).

    ``reference`` is the original model; its logits are teacher-forced along the same retain paths (retain
    items keep their codes). ``ref_history`` defaults to ``history`` (the items are the same; each model
    embeds them with its own codes).
    """
    items = target[:, None]
    cur = level_logits(model, history, items)
    with torch.no_grad():
        ref = level_logits(reference, history if ref_history is None else ref_history, items)
    terms = []
    for level, (c, r) in enumerate(zip(cur, ref)):
        allowed = masks[level].to(c.device)[target][:, None, :]
        logq = torch.log_softmax(c.float().masked_fill(~allowed, float("-inf")), -1)
        logp = torch.log_softmax(r.float().masked_fill(~allowed, float("-inf")), -1)
        p = logp.exp()
        kl = torch.where(allowed, p * (logp - logq), torch.zeros_like(p)).sum(-1)
        terms.append(kl.mean())
    return torch.stack(terms).mean()


def representation_drift(model, reference, items: Tensor) -> Tensor:
    """``sum_i ||e_theta(i) - e_orig(i)||^2 / sum_i ||e_orig(i)||^2`` over ``items`` (retain items)."""
    cur = model.backbone.item_representation(items)
    with torch.no_grad():
        ref = reference.backbone.item_representation(items)
    return ((cur - ref) ** 2).sum() / (ref**2).sum().clamp(min=1e-12)
