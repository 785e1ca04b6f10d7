"""The calibration metric family: ECE, classwise ECE, NLL, Brier and top-1 accuracy of next-item
probabilities, streamed by :class:`~recframe.metrics.FullRankingEvaluator` in its one chunked pass.

The evaluator's :class:`~recframe.metrics.families.EvalChunk` already carries the full score rows
(``needs = {"scores"}``), the seen items and the valid held-out items, so the seam needed no widening. Each
chunk becomes masked logits and labels by :func:`calib_ext.next_item.next_item_logits` (padding column
dropped, seen items masked, held-out items kept: see that module), and adds to a running state whose
tensors all sum across chunks and processes (DDP):

* ``calib/bins`` ``[3, M]``: per equal-width ``(lo, hi]`` confidence bin, count, summed top-label
  confidence, summed correctness (:func:`calib_ext.metrics.binned_stats`);
* ``calib/classwise`` ``[C, 3, M]``: the same per class (:func:`calib_ext.metrics.classwise_stats`);
* ``calib/sums`` ``[4]``: summed NLL, summed Brier, correct count, example count.

The metrics are the definitions of :mod:`calib_ext.metrics` (tested equal to them): ``ece``,
``classwise_ece``, ``nll``, ``brier`` and ``accuracy`` (top-1), one value per evaluation (``per_k = False``),
averaged over examples (held-out items), not users. Equal-mass ECE needs every confidence at once and is
not streamed; :class:`calib_ext.callback.CalibrationMonitor` reports it.

Config use (logged as ``val/ece``, ``test/nll``, ...)::

    data:
      metric_families: [{class_path: calib_ext.family.CalibrationFamily, init_args: {n_bins: 15}}]
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from calib_ext.metrics import binned_stats, classwise_stats, ece_from_stats
from calib_ext.next_item import next_item_logits
from recframe.metrics.families import EvalChunk, MetricFamily

__all__ = ["CALIBRATION_METRICS", "CalibrationFamily", "calibration_from_state", "init_calibration_state",
           "update_calibration_state"]

CALIBRATION_METRICS: tuple[str, ...] = ("ece", "classwise_ece", "nll", "brier", "accuracy")


def init_calibration_state(n_classes: int, n_bins: int, classwise: bool = True,
                           device: torch.device | str | None = None) -> dict[str, Tensor]:
    """Zeroed running state for ``n_classes`` classes and ``n_bins`` bins (module docstring)."""
    state = {"calib/bins": torch.zeros(3, n_bins, dtype=torch.float64, device=device),
             "calib/sums": torch.zeros(4, dtype=torch.float64, device=device)}
    if classwise:
        state["calib/classwise"] = torch.zeros(n_classes, 3, n_bins, dtype=torch.float64, device=device)
    return state


def update_calibration_state(state: dict[str, Tensor], logits: Tensor, labels: Tensor,
                             n_bins: int) -> Tensor:
    """Add examples (``logits`` ``[E, C]`` with ``-inf`` for masked classes, ``labels`` ``[E]``) to
    ``state``; returns their top-label confidences ``[E]`` (for equal-mass binning)."""
    if logits.shape[0] == 0:
        return logits.new_zeros(0)
    log_p = torch.log_softmax(logits.to(torch.float64), dim=1)
    p = log_p.exp()
    labels = labels.to(device=p.device, dtype=torch.long)
    conf, pred = p.max(dim=1)
    correct = pred == labels
    picked = p.gather(1, labels[:, None]).squeeze(1)
    state["calib/bins"] += binned_stats(conf, correct, n_bins)
    state["calib/sums"] += torch.stack([
        -log_p.gather(1, labels[:, None]).sum(),
        ((p * p).sum(dim=1) - 2 * picked + 1.0).sum(),
        correct.sum(dtype=torch.float64),
        torch.tensor(float(p.shape[0]), dtype=torch.float64, device=p.device),
    ])
    if "calib/classwise" in state:
        state["calib/classwise"] += classwise_stats(p, labels, n_bins)
    return conf


def calibration_from_state(state: dict[str, Tensor]) -> dict[str, float]:
    """``{ece, classwise_ece, nll, brier, accuracy}`` of a state (``nan`` for zero examples)."""
    nll_sum, brier_sum, correct, count = state["calib/sums"].cpu().tolist()
    if count <= 0:
        out = dict.fromkeys(("ece", "nll", "brier", "accuracy"), float("nan"))
        if "calib/classwise" in state:
            out["classwise_ece"] = float("nan")
        return out
    out = {"ece": ece_from_stats(state["calib/bins"].cpu())}
    if "calib/classwise" in state:
        out["classwise_ece"] = ece_from_stats(state["calib/classwise"].cpu())
    out.update(nll=nll_sum / count, brier=brier_sum / count, accuracy=correct / count)
    return out


class CalibrationFamily(MetricFamily):
    """Calibration of next-item probabilities as an evaluator metric family (module docstring).

    Args:
        n_bins: equal-width bins of the ECEs.
        classwise: also stream the classwise ECE (state ``n_items x 3 x n_bins`` float64).
        mask_seen: mask seen items before the softmax, as the ranking metrics do (default True).
        prefix: put before every metric name (e.g. ``"calib_"`` gives ``val/calib_ece``).
    """

    needs = frozenset({"scores"})
    disliked_ties = None
    per_k = False

    def __init__(self, n_bins: int = 15, classwise: bool = True, mask_seen: bool = True,
                 prefix: str = "") -> None:
        if isinstance(n_bins, bool) or int(n_bins) != n_bins or n_bins < 1:
            raise ValueError(f"CalibrationFamily n_bins must be a positive integer, got {n_bins!r}")
        self.n_bins = int(n_bins)
        self.classwise = bool(classwise)
        self.mask_seen = bool(mask_seen)
        self.prefix = str(prefix)
        metrics = [m for m in CALIBRATION_METRICS if self.classwise or m != "classwise_ece"]
        self.names = tuple(f"{self.prefix}{m}" for m in metrics)

    def init_state(self, n_ks: int, n_items: int, device: torch.device) -> dict[str, Tensor]:
        return init_calibration_state(n_items, self.n_bins, self.classwise, device)

    def update_state(self, chunk: EvalChunk, state: dict[str, Tensor]) -> None:
        logits, labels = next_item_logits(chunk.scores, chunk.targets, chunk.seen, chunk.valid,
                                          mask_seen=self.mask_seen)
        update_calibration_state(state, logits, labels, self.n_bins)

    def compute(self, state: dict[str, Tensor], ks: Sequence[int]) -> dict[str, float]:
        return {f"{self.prefix}{k}": v for k, v in calibration_from_state(state).items()}

    def user_counts(self, state: dict[str, Tensor]) -> dict[str, int]:
        return {}
