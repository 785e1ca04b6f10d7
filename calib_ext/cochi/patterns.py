"""Correctness x confidence patterns of predictions (CoCHI's first step).

For logits ``z_i`` with ``p_i = softmax(z_i)``, prediction ``yhat_i = argmax_k p_ik`` and confidence
``c_i = max_k p_ik``, each prediction falls into one of four patterns::

    correct-confident    (CC)  yhat_i == y_i  and  c_i >  t
    correct-unconfident  (CU)  yhat_i == y_i  and  c_i <= t
    wrong-confident      (WC)  yhat_i != y_i  and  c_i >  t     <- the overconfident errors
    wrong-unconfident    (WU)  yhat_i != y_i  and  c_i <= t

**The threshold** ``t`` defaults to the **median validation confidence** (``threshold="median"``). A fixed
``0.5`` (the other common choice) only makes sense with few classes: with ML-100K's 1,682 items a
recommender's top probability is rarely above 0.1, so every prediction would be "unconfident" and the patterns
would be empty; with four options a random guess already has confidence 0.25. The median splits every task's
predictions into a confident and an unconfident half whatever the number of classes, which is what the
contrast between patterns needs. A number may be given instead, and ``threshold="accuracy"`` uses the
validation accuracy (the mean confidence a calibrated model would have). The threshold is fitted on validation
data and then kept fixed for other data.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

import torch
from torch import Tensor

from calib_ext.metrics import masked_logits

__all__ = ["Pattern", "PATTERNS", "classify", "confidence_threshold", "predictions"]


class Pattern(str, Enum):
    """The four correctness x confidence patterns (values are the short codes used in reports)."""

    CORRECT_CONFIDENT = "CC"
    CORRECT_UNCONFIDENT = "CU"
    WRONG_CONFIDENT = "WC"
    WRONG_UNCONFIDENT = "WU"


PATTERNS: tuple[Pattern, ...] = tuple(Pattern)
#: integer code of each pattern in the arrays :func:`classify` returns
CODE = {p: i for i, p in enumerate(PATTERNS)}


def predictions(logits: Any) -> tuple[Tensor, Tensor]:
    """``(yhat, confidence)``: argmax (ties to the lowest index) and max softmax probability, float64.

    ``-inf`` logits are masked classes (probability 0).
    """
    z, finite = masked_logits(logits)
    p = torch.softmax(z.masked_fill(~finite, float("-inf")), dim=1)
    conf, yhat = p.max(dim=1)
    return yhat, conf


def confidence_threshold(confidence: Tensor, correct: Tensor, rule: float | str = "median") -> float:
    """The threshold ``t`` (module docstring): ``"median"`` of ``confidence``, ``"accuracy"`` (the mean of
    ``correct``) or a given number in ``[0, 1]``."""
    if isinstance(rule, str):
        if rule == "median":
            return float(torch.quantile(confidence.double(), 0.5))
        if rule == "accuracy":
            return float(correct.double().mean())
        raise ValueError(f"threshold must be 'median', 'accuracy' or a number in [0, 1], got {rule!r}")
    if isinstance(rule, bool) or not isinstance(rule, (int, float)) or not 0.0 <= float(rule) <= 1.0:
        raise ValueError(f"threshold must be 'median', 'accuracy' or a number in [0, 1], got {rule!r}")
    return float(rule)


def classify(logits: Any, labels: Any, threshold: float) -> Tensor:
    """Pattern code (index into :data:`PATTERNS`) of every prediction, int64 ``[n]``.

    ``c_i > threshold`` is confident, ``c_i <= threshold`` unconfident (so with the median threshold at most
    half the predictions are confident).
    """
    yhat, conf = predictions(logits)
    y = torch.as_tensor(labels).to(yhat.device).long()
    if y.shape != yhat.shape:
        raise ValueError(f"labels must be [n] with one entry per row of logits ({len(yhat)}), got "
                         f"{tuple(y.shape)}")
    correct, confident = yhat == y, conf > float(threshold)
    return torch.where(correct, torch.where(confident, 0, 1), torch.where(confident, 2, 3)).long()


def counts(codes: Tensor) -> dict[str, int]:
    """``{pattern code: number of predictions}`` for the output of :func:`classify`."""
    return {p.value: int((codes == CODE[p]).sum()) for p in PATTERNS}
