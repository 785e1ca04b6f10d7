"""Prediction tasks CoCHI calibrates: how to get ``logits [n, C]`` and ``labels [n]`` out of a model.

CoCHI needs one thing from a model: the logits of its predictions on a fixed set of examples, recomputed
while heads are scaled or ablated through the head probe (:mod:`recframe.heads`). A :class:`LogitTask`
says how, for one kind of model, and :func:`collect` runs it over all examples:

* :class:`RecTask` -- a recframe recommender (SASRec, TIGER, SIDDecoder, any ``RecModel``): the logits of
  next-item prediction are ``model.score(batch)`` over the catalogue (for the generative backbones that is the
  exact log-probability of every item's code path, so the softmax over it is their next-item distribution),
  with the padding column and the user's seen items set to ``-inf``, as full-ranking evaluation masks them
  (:func:`recframe.metrics.ranking.eligible_mask`: a held-out item stays eligible even when it was seen
  before); the label is the first held-out item. Batches come from an
  :class:`~recframe.data.eval_view.EvaluationView` or any iterable of evaluation batches.
* :class:`TensorTask` -- any classifier ``model(inputs) -> logits`` (a Hugging Face
  ``BertForSequenceClassification``: its ``.logits`` are used), inputs a tensor or a dict of tensors.
* :class:`calib_ext.cochi.multiple_choice.MultipleChoiceTask` -- a sentence encoder answering multiple-choice
  questions by embedding similarity.

Masked classes are ``-inf`` logits; every label must point at a finite one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from recframe.metrics.ranking import eligible_mask

__all__ = ["LogitTask", "RecTask", "TensorTask", "collect", "model_device"]


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter (CPU for a model without parameters)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


class LogitTask(ABC):
    """A fixed set of examples and how a model turns each batch of them into logits."""

    @abstractmethod
    def batches(self) -> Iterable[Any]:
        """The examples, a batch at a time, in a fixed order (the same on every call)."""

    @abstractmethod
    def logits(self, model: nn.Module, batch: Any) -> Tensor:
        """``[B, C]`` logits of one batch (``-inf`` for masked classes)."""

    @abstractmethod
    def labels(self, batch: Any) -> Tensor:
        """``[B]`` integer labels of one batch, columns of :meth:`logits`."""


@torch.no_grad()
def collect(model: nn.Module, task: LogitTask) -> tuple[Tensor, Tensor]:
    """Run ``task`` over all its batches: float64 ``logits [n, C]`` and int64 ``labels [n]`` on the CPU.

    The model is put in eval mode for the pass (dropout off) and its mode is restored afterwards.
    """
    if not isinstance(task, LogitTask):
        raise TypeError(f"the data must be a calib_ext.cochi LogitTask (RecTask, TensorTask, "
                        f"MultipleChoiceTask), got {type(task).__name__}")
    was_training = model.training
    model.eval()
    try:
        zs, ys = [], []
        for batch in task.batches():
            z = task.logits(model, batch)
            y = task.labels(batch)
            if z.dim() != 2 or y.dim() != 1 or z.shape[0] != y.shape[0]:
                raise ValueError(f"{type(task).__name__} gave logits {tuple(z.shape)} and labels "
                                 f"{tuple(y.shape)}; they must be [B, C] and [B]")
            zs.append(z.detach().to("cpu", torch.float64))
            ys.append(y.detach().to("cpu", torch.long))
    finally:
        model.train(was_training)
    if not zs:
        raise ValueError(f"{type(task).__name__} yielded no batches; it needs at least one example")
    logits, labels = torch.cat(zs), torch.cat(ys)
    if not bool(torch.isfinite(logits.gather(1, labels[:, None])).all()):
        raise ValueError(f"{type(task).__name__}: a label points at a masked (-inf) class; its probability "
                         "is 0 whatever the calibration")
    return logits, labels


class RecTask(LogitTask):
    """Next-item prediction of a recframe ``RecModel`` (module docstring).

    Args:
        data: an :class:`~recframe.data.eval_view.EvaluationView` (``trainer.datamodule.eval_view(stage)``) or
            an iterable of evaluation batches with ``history``/``users``, ``seen`` and ``targets``.
        mask_seen: set the user's seen items to ``-inf`` (default; the full-ranking protocol ranks only unseen
            items, so the calibrated distribution is over the items the model may recommend).
        size: users per batch when ``data`` is a view (default: the view's batch size).
    """

    def __init__(self, data: Any, mask_seen: bool = True, size: int | None = None) -> None:
        self.data = data
        self.mask_seen = bool(mask_seen)
        self.size = size

    def batches(self) -> Iterable[dict[str, Tensor]]:
        if callable(getattr(self.data, "batches", None)):
            return self.data.batches(size=self.size)
        return self.data

    def logits(self, model: nn.Module, batch: Mapping[str, Tensor]) -> Tensor:
        device = model_device(model)
        batch = {k: v.to(device) for k, v in batch.items()}
        if not callable(getattr(model, "score", None)):
            raise TypeError(f"RecTask needs a recframe RecModel with score(batch); got "
                            f"{type(model).__name__}")
        z = model.score(batch).to(torch.float64)
        seen = batch.get("seen") if self.mask_seen else None
        targets = batch.get("targets")
        if targets is None:
            targets = torch.zeros(z.shape[0], 1, dtype=torch.long, device=z.device)
        # the evaluator's rule: padding and seen items are not eligible, held-out items always are
        return z.masked_fill(~eligible_mask(z.shape[1], targets, seen), float("-inf"))

    def labels(self, batch: Mapping[str, Tensor]) -> Tensor:
        if "targets" not in batch:
            raise ValueError("RecTask batches need 'targets' (held-out items); use "
                             "eval_view(stage).batches()")
        y = batch["targets"][:, 0]
        if bool((y <= 0).any()):
            raise ValueError("RecTask: a user in the batch has no held-out item (targets[:, 0] == 0); "
                             "evaluation batches list only users with one")
        return y


class TensorTask(LogitTask):
    """A classifier on in-memory inputs.

    Args:
        inputs: a tensor ``[n, ...]`` or a dict of tensors with ``n`` rows (e.g. ``input_ids`` and
            ``attention_mask`` for a Hugging Face model).
        labels: ``[n]`` integer labels.
        batch_size: rows per forward call.
        forward: ``forward(model, batch_inputs) -> logits``; default ``model(x)`` for a tensor and
            ``model(**x)`` for a dict, taking ``.logits`` when the output has it.
    """

    def __init__(self, inputs: Tensor | Mapping[str, Tensor], labels: Tensor, batch_size: int = 256,
                 forward: Callable[[nn.Module, Any], Tensor] | None = None) -> None:
        n = len(labels)
        rows = [len(v) for v in inputs.values()] if isinstance(inputs, Mapping) else [len(inputs)]
        if any(r != n for r in rows):
            raise ValueError(f"TensorTask: inputs have {rows} rows but labels {n}; give one label per row")
        if int(batch_size) < 1:
            raise ValueError(f"TensorTask: batch_size must be >= 1, got {batch_size}")
        self.inputs, self.y = inputs, torch.as_tensor(labels).long()
        self.batch_size, self.forward = int(batch_size), forward

    def batches(self) -> Iterable[tuple[Any, Tensor]]:
        n = len(self.y)
        for start in range(0, n, self.batch_size):
            sl = slice(start, min(start + self.batch_size, n))
            x = ({k: v[sl] for k, v in self.inputs.items()} if isinstance(self.inputs, Mapping)
                 else self.inputs[sl])
            yield x, self.y[sl]

    def logits(self, model: nn.Module, batch: tuple[Any, Tensor]) -> Tensor:
        x, _ = batch
        device = model_device(model)
        x = {k: v.to(device) for k, v in x.items()} if isinstance(x, Mapping) else x.to(device)
        if self.forward is not None:
            out = self.forward(model, x)
        else:
            out = model(**x) if isinstance(x, Mapping) else model(x)
        return getattr(out, "logits", out)

    def labels(self, batch: tuple[Any, Tensor]) -> Tensor:
        return batch[1]
