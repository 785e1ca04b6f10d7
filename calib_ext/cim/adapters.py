"""What CIM needs of a model: its maskable input parts, an output embedding, and a predictive distribution.

CIM (causal-invariant masking, seed ¶16) treats a model as

    inputs x with parts 1..L (history items, tokens)  --embed-->  e(x) in R^d  --log_probs-->  log p(. | x)

and compares ``x`` with a *focused* view ``x ⊙ m`` that keeps only the parts in ``m`` (a boolean keep mask
over the parts that are present). A :class:`FocusAdapter` provides these operations, on a batch given as a
dict of tensors whose first dimension is the example:

* ``parts(inputs) -> bool [N, L]``: which positions hold a part that can be masked;
* ``embed(inputs, keep) -> [N, d]``: the output embedding with only the parts in ``keep`` visible
  (``keep=None``: all of them). Masking only ever hides parts: a masked history item becomes padding, a masked
  token leaves the attention mask;
* ``log_probs(inputs, emb) -> [N, C]``: the log predictive distribution given the embedding, ``-inf`` on
  outcomes that are not eligible;
* ``errors(inputs, log_probs) -> {name: bool [N]}``: which predictions count as errors (what a detector
  predicts).

:class:`RecommenderAdapter` wraps any recframe :class:`~recframe.models.base.EmbeddingModel` that reads a
history (SASRec, ...): ``embed`` is ``query_embedding`` of the batch with masked history items set to padding
(0, which the model's attention never attends to), ``log_probs`` the softmax of the full-catalogue scores with
the user's seen items and the padding column excluded and the held-out targets kept, exactly the eligible set
of the evaluator (``recframe.metrics.topk``). Errors: ``wrong_top1`` (the top-1 item is not a held-out item)
and ``miss@K`` (no held-out item in the top ``K``).
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

Batch = dict[str, Tensor]


class FocusAdapter(Protocol):
    """The model interface CIM uses (module docstring)."""

    def parts(self, inputs: Batch) -> Tensor:
        """``bool [N, L]``: positions holding a maskable part."""

    def embed(self, inputs: Batch, keep: Tensor | None = None) -> Tensor:
        """``[N, d]`` output embedding with only the parts in ``keep`` visible (all when None)."""

    def log_probs(self, inputs: Batch, emb: Tensor) -> Tensor:
        """``[N, C]`` log predictive distribution from the output embedding (``-inf`` = not eligible)."""

    def errors(self, inputs: Batch, log_probs: Tensor) -> dict[str, Tensor]:
        """``{name: bool [N]}``: the predictions that are errors."""

    def support_embeddings(self) -> Tensor:
        """``[C, d]`` one embedding per outcome (the semantic space the divergence works in)."""


def take(inputs: Batch, rows: Tensor) -> Batch:
    """The rows ``rows`` of every tensor in ``inputs`` (repeated rows allowed)."""
    return {k: v[rows] for k, v in inputs.items()}


def eligible_log_probs(scores: Tensor, seen: Tensor | None, targets: Tensor | None) -> Tensor:
    """``log_softmax`` of ``scores [N, n_items + 1]`` over the evaluator's eligible items.

    Eligible: items ``1..n_items`` minus ``seen`` (padded ids, 0 = none) plus ``targets`` (kept even when
    seen, as :func:`recframe.metrics.topk.masked_top_k` keeps them). Column 0 (padding) is never eligible.
    """
    out = scores.float().clone()
    if seen is not None and seen.numel():
        out.scatter_(1, seen.long(), float("-inf"))
    if targets is not None and targets.numel():
        kept = scores.float().gather(1, targets.long())
        out.scatter_(1, targets.long(), kept)
    out[:, 0] = float("-inf")
    return torch.log_softmax(out, dim=1)


class RecommenderAdapter:
    """CIM view of a history-reading recframe ``EmbeddingModel`` (module docstring).

    Args:
        model: an :class:`~recframe.models.base.EmbeddingModel` whose ``query_embedding`` reads
            ``batch["history"]`` (left-padded item ids, 0 = padding).
        miss_k: the ``K`` of the ``miss@K`` error.
    """

    def __init__(self, model: torch.nn.Module, miss_k: int = 10) -> None:
        for name in ("query_embedding", "item_embeddings"):
            if not callable(getattr(model, name, None)):
                raise TypeError(f"RecommenderAdapter needs an EmbeddingModel with {name}(); "
                                f"{type(model).__name__} has none. Use a model such as "
                                "recframe.models.SASRec.")
        if not getattr(model, "uses_history", False):
            raise TypeError(f"{type(model).__name__} does not read a history (uses_history is False); CIM "
                            "masks history items, so it needs a sequential model such as "
                            "recframe.models.SASRec.")
        self.model = model
        self.miss_k = int(miss_k)
        self.cosine = getattr(model, "score_metric", "ip") == "cosine"

    def parts(self, inputs: Batch) -> Tensor:
        return inputs["history"] > 0

    def embed(self, inputs: Batch, keep: Tensor | None = None) -> Tensor:
        history = inputs["history"]
        if keep is not None:
            history = torch.where(keep, history, torch.zeros_like(history))
        return self.model.query_embedding({**inputs, "history": history})

    def _items(self) -> Tensor:
        items = self.model.item_embeddings()
        return torch.nn.functional.normalize(items, dim=1) if self.cosine else items

    def log_probs(self, inputs: Batch, emb: Tensor) -> Tensor:
        q = torch.nn.functional.normalize(emb, dim=1) if self.cosine else emb
        return eligible_log_probs(q @ self._items().T, inputs.get("seen"), inputs.get("targets"))

    def errors(self, inputs: Batch, log_probs: Tensor) -> dict[str, Tensor]:
        targets = inputs["targets"]
        k = min(self.miss_k, log_probs.shape[1] - 1)
        top = log_probs.topk(k, dim=1).indices                     # [N, k]
        hit = (top[:, :, None] == targets[:, None, :]) & (targets[:, None, :] > 0)
        return {"wrong_top1": ~hit[:, 0].any(dim=1), f"miss@{self.miss_k}": ~hit.any(dim=(1, 2))}

    def support_embeddings(self) -> Tensor:
        """Item embeddings ``[n_items + 1, d]`` (row 0 is padding, never eligible)."""
        return self._items()
