"""Loss pieces shared by several models.

Next-item losses of sequential models (SASRec, RecMem) score hidden states ``[N, d]`` against tied
item embeddings ``[n_items + 1, d]`` (row 0 = padding, never a class). :func:`next_item_loss` picks
one of four objectives by name:

* ``ce``: exact softmax cross-entropy over the full catalogue; materialises the ``[N, n_items + 1]``
  logits (``N = B x L`` positions), so its memory grows as positions x items.
* ``chunked``: :func:`ce_chunked`, the same value and gradients computed in item chunks with a
  streaming logsumexp; memory ``O(N x chunk_size)`` in forward and backward.
* ``sampled``: softmax over the target and ``n_negatives`` uniform negatives shared by the batch,
  accidental hits masked, no correction (the original option, kept unchanged: a ranking objective,
  not an estimate of the full softmax).
* ``sampled_logq``: :func:`sampled_logq`, sampled softmax with logQ correction over in-batch
  negatives plus uniform or popularity-sampled negatives; a consistent estimate of the full softmax.

:class:`NextItemLoss` wraps the choice for a model and holds the training split's item counts that
``sampled_logq`` needs as its proposal (a buffer, filled by the model's ``bind_data``).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

LossType = Literal["ce", "chunked", "sampled", "sampled_logq"]
LOSS_TYPES: tuple[str, ...] = ("ce", "chunked", "sampled", "sampled_logq")
SAMPLERS: tuple[str, ...] = ("uniform", "popularity")


def bpr_loss(pos_scores: Tensor, neg_scores: Tensor) -> Tensor:
    """Bayesian personalised ranking: ``mean(-log sigmoid(s_pos - s_neg))``."""
    return -F.logsigmoid(pos_scores - neg_scores).mean()


def embedding_l2(*embeddings: Tensor) -> Tensor:
    """``sum_e ||e||^2 / (2 B)``: the per-batch L2 penalty of BPR-MF and LightGCN."""
    batch = embeddings[0].shape[0]
    return sum(e.pow(2).sum() for e in embeddings) / (2 * batch)


# ----------------------------------------------------------------- chunked exact cross-entropy
class _ChunkedCrossEntropy(torch.autograd.Function):
    """``mean_i [logsumexp_j (h_i . w_j) - h_i . w_{t_i}]`` over items ``j = 1..V``, chunk by chunk.

    Forward keeps a running ``(max, sum)`` per row; backward recomputes each chunk's logits and turns
    them into ``softmax - onehot`` with the saved logsumexp, so no ``[N, V]`` tensor ever exists.
    """

    @staticmethod
    def forward(ctx, hidden: Tensor, item_weight: Tensor, target: Tensor,  # type: ignore[override]
                chunk_size: int) -> Tensor:
        n_rows, n_classes = hidden.shape[0], item_weight.shape[0]
        run_max = hidden.new_full((n_rows,), float("-inf"))
        run_sum = hidden.new_zeros(n_rows)
        for start in range(1, n_classes, chunk_size):
            logits = hidden @ item_weight[start:start + chunk_size].T
            new_max = torch.maximum(run_max, logits.max(dim=1).values)
            run_sum = run_sum * torch.exp(run_max - new_max) + torch.exp(logits - new_max[:, None]).sum(dim=1)
            run_max = new_max
        lse = run_max + torch.log(run_sum)
        target_logit = (hidden * item_weight[target]).sum(dim=-1)
        ctx.save_for_backward(hidden, item_weight, target, lse)
        ctx.chunk_size = chunk_size
        return (lse - target_logit).mean()

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor) -> tuple[Tensor | None, Tensor | None, None, None]:  # type: ignore[override]
        hidden, item_weight, target, lse = ctx.saved_tensors
        want_h, want_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        scale = grad_out / hidden.shape[0]
        grad_h = torch.zeros_like(hidden) if want_h else None
        grad_w = torch.zeros_like(item_weight) if want_w else None
        for start in range(1, item_weight.shape[0], ctx.chunk_size):
            w_chunk = item_weight[start:start + ctx.chunk_size]
            probs = torch.exp(hidden @ w_chunk.T - lse[:, None]).mul_(scale)
            if want_h:
                grad_h.addmm_(probs, w_chunk)
            if want_w:
                grad_w[start:start + len(w_chunk)] = probs.T @ hidden
        if want_h:
            grad_h.sub_(scale * item_weight[target])
        if want_w:
            grad_w.index_add_(0, target, -scale * hidden)
        return grad_h, grad_w, None, None


def ce_chunked(hidden: Tensor, target: Tensor, item_weight: Tensor, chunk_size: int = 8192) -> Tensor:
    """Exact full-catalogue cross-entropy, computed in item chunks (module docstring).

    Equal (to rounding) in value and gradients to ``F.cross_entropy(hidden @ item_weight.T, target)``
    with the padding column 0 excluded, but peak memory is ``O(N x chunk_size)`` instead of
    ``O(N x n_items)``: the backward pass recomputes each chunk's logits (two passes over the catalogue).

    Args:
        hidden: ``[N, d]`` hidden states.
        target: ``[N]`` item ids in ``1..n_items``.
        item_weight: ``[n_items + 1, d]`` item embeddings (row 0 = padding, not a class).
        chunk_size: items per chunk.

    Raises:
        ValueError: ``chunk_size`` is not a positive integer.
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size={chunk_size!r}; it must be a positive number of items per chunk.")
    return _ChunkedCrossEntropy.apply(hidden, item_weight, target, chunk_size)


# ------------------------------------------------------------ sampled softmax with logQ correction
def sampled_logq(hidden: Tensor, target: Tensor, item_weight: Tensor, n_negatives: int = 256, *,
                 item_counts: Tensor | None = None, sampler: Literal["uniform", "popularity"] = "uniform",
                 in_batch: bool = True, generator: torch.Generator | None = None) -> Tensor:
    """Sampled softmax with logQ correction: in-batch negatives plus ``n_negatives`` sampled ones.

    Each row ``i`` is scored against its positive ``t_i`` and a shared candidate set: the other rows'
    targets (``in_batch``, ``N - 1`` draws from the item-frequency proposal ``q_b``) and
    ``n_negatives`` draws with replacement from ``q_s`` (``uniform`` over ``1..n_items``, or
    ``popularity`` = ``q_b``). Candidates equal to ``t_i`` (its own entry and accidental hits) are
    masked. A candidate ``j`` drawn ``n_j`` times gets the logit ``s_ij + log n_j - log c_j`` with
    ``c_j = (N - 1) q_b(j) + n_negatives q_s(j)`` its expected number of draws (the logQ correction;
    the mixture of the two proposals is weighed by the balance heuristic), while the positive keeps
    ``s_it``. Then ``exp(s_it) + sum_j n_j exp(s_ij) / c_j`` is an unbiased estimate of the full
    partition function ``sum_j exp(s_ij)`` when the draws follow their proposals, and the loss and its
    gradient converge to the full softmax cross-entropy's as the number of draws grows (a ratio
    estimator: bias ``O(1 / draws)``; ``tests/models/test_losses_scalable.py`` measures it).

    ``q_b(j) = (count_j + 1) / sum_k (count_k + 1)`` (add-one smoothing of the training split's item
    counts, ``item_counts [n_items + 1]``, index 0 ignored). In-batch targets are only approximately
    independent draws from it (positions of one user's sequence are correlated), as in Yi et al.,
    "Sampling-bias-corrected neural modeling for large corpus item recommendations" (RecSys 2019).

    Args:
        hidden: ``[N, d]`` hidden states.
        target: ``[N]`` item ids in ``1..n_items``.
        item_weight: ``[n_items + 1, d]`` item embeddings (row 0 = padding).
        n_negatives: sampled negatives shared by the batch (``0``: in-batch only).
        item_counts: ``[n_items + 1]`` item frequencies; required with ``in_batch`` or ``popularity``.
        sampler: proposal of the sampled negatives.
        in_batch: use the other rows' targets as negatives.
        generator: random generator of the draws (default: torch's global one).

    Raises:
        ValueError: an unknown sampler, a negative ``n_negatives``, no candidates at all, or missing
            ``item_counts``.
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler={sampler!r}; use one of {', '.join(SAMPLERS)}.")
    if isinstance(n_negatives, bool) or not isinstance(n_negatives, int) or n_negatives < 0:
        raise ValueError(f"n_negatives={n_negatives!r}; it must be an integer >= 0.")
    if not in_batch and n_negatives == 0:
        raise ValueError("sampled_logq has no negatives: set in_batch=True or n_negatives > 0.")
    needs_counts = in_batch or sampler == "popularity"
    if needs_counts and item_counts is None:
        raise ValueError("sampled_logq needs item_counts (the training split's item frequencies) for "
                         "in-batch or popularity negatives; pass item_counts, or in_batch=False with "
                         "sampler='uniform'.")
    n_items, device = item_weight.shape[0] - 1, hidden.device
    n_rows = target.shape[0]
    q_pop = None
    if needs_counts:
        smoothed = item_counts[1:].to(device=device, dtype=torch.float64).clamp_min(0) + 1.0
        q_pop = smoothed / smoothed.sum()
    draws = []
    if n_negatives:
        if sampler == "uniform":
            draws.append(torch.randint(1, n_items + 1, (n_negatives,), device=device, generator=generator))
        else:
            draws.append(torch.multinomial(q_pop, n_negatives, replacement=True, generator=generator) + 1)
    if in_batch:
        draws.append(target)
    cand, n_drawn = torch.unique(torch.cat(draws), return_counts=True)
    expected = torch.zeros(len(cand), dtype=torch.float64, device=device)
    if n_negatives:
        q_s = q_pop[cand - 1] if sampler == "popularity" else torch.full_like(expected, 1.0 / n_items)
        expected += n_negatives * q_s
    if in_batch:
        expected += max(n_rows - 1, 0) * q_pop[cand - 1]
    correction = (torch.log(n_drawn.to(torch.float64)) - torch.log(expected)).to(hidden.dtype)
    neg_logit = hidden @ F.embedding(cand, item_weight).T + correction[None, :]
    neg_logit = neg_logit.masked_fill(cand[None, :] == target[:, None], float("-inf"))
    pos_logit = (hidden * F.embedding(target, item_weight)).sum(-1, keepdim=True)
    logits = torch.cat([pos_logit, neg_logit], dim=1)
    return F.cross_entropy(logits, torch.zeros(n_rows, dtype=torch.long, device=device))


# --------------------------------------------------------------------------- the one entry point
def next_item_loss(hidden: Tensor, target: Tensor, item_weight: Tensor, loss_type: str = "ce",
                   n_negatives: int = 256, *, chunk_size: int = 8192, item_counts: Tensor | None = None,
                   sampler: Literal["uniform", "popularity"] = "uniform") -> Tensor:
    """Next-item loss of hidden states ``[N, d]`` against tied item embeddings ``[n_items + 1, d]``.

    ``loss_type`` is one of ``ce``, ``chunked``, ``sampled``, ``sampled_logq`` (module docstring);
    ``n_negatives`` serves both sampled losses, ``chunk_size`` the chunked one, ``item_counts`` and
    ``sampler`` the logQ one (see :func:`sampled_logq`).

    Raises:
        ValueError: an unknown ``loss_type``.
    """
    if loss_type == "ce":
        logits = hidden @ item_weight.T
        logits[:, 0] = float("-inf")
        return F.cross_entropy(logits, target)
    if loss_type == "chunked":
        return ce_chunked(hidden, target, item_weight, chunk_size)
    if loss_type == "sampled_logq":
        return sampled_logq(hidden, target, item_weight, n_negatives, item_counts=item_counts,
                            sampler=sampler)
    if loss_type != "sampled":
        raise ValueError(f"loss_type={loss_type!r}; use one of {', '.join(LOSS_TYPES)}.")
    n_items = item_weight.shape[0] - 1
    neg = torch.randint(1, n_items + 1, (n_negatives,), device=hidden.device)
    pos_logit = (hidden * F.embedding(target, item_weight)).sum(-1, keepdim=True)
    neg_logit = hidden @ F.embedding(neg, item_weight).T
    neg_logit = neg_logit.masked_fill(neg[None, :] == target[:, None], float("-inf"))
    logits = torch.cat([pos_logit, neg_logit], dim=1)
    return F.cross_entropy(logits, torch.zeros(len(target), dtype=torch.long, device=hidden.device))


class NextItemLoss(nn.Module):
    """A model's next-item objective: the settings of :func:`next_item_loss` plus, for ``sampled_logq``,
    the training split's item counts as a buffer ``item_counts [n_items + 1]`` (saved with checkpoints;
    other loss types add no state, so their checkpoints are unchanged).

    Args:
        n_items: catalogue size.
        loss_type: ``ce``, ``chunked``, ``sampled`` or ``sampled_logq``.
        n_negatives: sampled negatives (``sampled``, ``sampled_logq``).
        chunk_size: items per chunk (``chunked``).
        sampler: ``uniform`` or ``popularity`` negatives (``sampled_logq``).

    Raises:
        ValueError: an unknown ``loss_type`` or ``sampler``, or a non-positive size.
    """

    def __init__(self, n_items: int, loss_type: str = "ce", n_negatives: int = 256, chunk_size: int = 8192,
                 sampler: str = "uniform") -> None:
        super().__init__()
        if loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type={loss_type!r}; use one of {', '.join(LOSS_TYPES)}.")
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler={sampler!r}; use one of {', '.join(SAMPLERS)}.")
        for key, value, minimum in (("n_negatives", n_negatives, 0 if loss_type == "sampled_logq" else 1),
                                    ("chunk_size", chunk_size, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{key}={value!r}; it must be an integer >= {minimum}.")
        self.loss_type, self.n_negatives = loss_type, n_negatives
        self.chunk_size, self.sampler = chunk_size, sampler
        if loss_type == "sampled_logq":
            self.register_buffer("item_counts", torch.zeros(n_items + 1, dtype=torch.int64))

    def bind_counts(self, counts: np.ndarray | Tensor) -> None:
        """Store the training split's item counts ``[n_items + 1]`` (only ``sampled_logq`` keeps them)."""
        if self.loss_type != "sampled_logq":
            return
        counts = torch.as_tensor(np.asarray(counts), dtype=torch.int64)
        if counts.shape != self.item_counts.shape:
            raise ValueError(f"item counts have shape {tuple(counts.shape)} but the model has "
                             f"{self.item_counts.shape[0] - 1} items; bind the training split of the same "
                             "data.")
        self.item_counts.copy_(counts)

    def forward(self, hidden: Tensor, target: Tensor, item_weight: Tensor) -> Tensor:
        """The loss of ``hidden [N, d]`` for targets ``[N]`` against ``item_weight [n_items + 1, d]``."""
        counts = None
        if self.loss_type == "sampled_logq":
            if int(self.item_counts.sum()) == 0:
                raise ValueError("loss_type='sampled_logq' needs the training split's item counts: fit "
                                 "through the Trainer (bind_data fills them) or call "
                                 "bind_counts(train.item_popularity()).")
            counts = self.item_counts
        return next_item_loss(hidden, target, item_weight, self.loss_type, self.n_negatives,
                              chunk_size=self.chunk_size, item_counts=counts, sampler=self.sampler)

    def extra_repr(self) -> str:
        return (f"loss_type={self.loss_type}, n_negatives={self.n_negatives}, chunk_size={self.chunk_size}, "
                f"sampler={self.sampler}")
