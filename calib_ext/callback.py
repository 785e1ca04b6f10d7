"""``CalibrationMonitor``: calibration of next-item probabilities at validation and test, for any recframe
model.

At the end of every validation epoch (sanity check excluded) and of testing, the monitor scores the
stage's users through ``trainer.datamodule.eval_view(stage).batches()`` with ``model.score`` and reads the
scores as next-item probabilities (:mod:`calib_ext.next_item`: softmax over the eligible items, padding
column excluded, seen items masked as the evaluator masks them, held-out items kept). It reports and logs:

* ``ece`` (15 equal-width ``(lo, hi]`` bins), ``ece_mass`` (equal-mass bins), ``classwise_ece``, ``nll``,
  ``brier`` and ``accuracy`` (top-1), with the definitions of :mod:`calib_ext.metrics`;
* at test, when ``temperature_scaling`` is on, the same metrics after temperature scaling fitted on the
  validation view (:class:`calib_ext.temperature.TemperatureScaler`), and the temperature.

Logged as ``calibration/valid/ece``, ``calibration/test/nll``, ``calibration/test_ts/ece``, ...; the JSON
report (``output``) holds the last validation result, the validation history by epoch and the test
results. Scores are streamed batch by batch (running sums, plus one confidence per example for the
equal-mass ECE); only temperature scaling holds the validation logits at once (``examples x n_items``
float64; ML-100K: 13 MB).

Cost: one extra scoring pass per validation epoch (the evaluator's own pass is not reused; for a free
streamed ECE/NLL/Brier in the evaluator's pass use :class:`calib_ext.family.CalibrationFamily` in
``data.metric_families``). Under DDP every rank scores the whole view (the view is not sharded) and rank 0
writes the report.

Config::

    trainer:
      callbacks:
        - class_path: calib_ext.callback.CalibrationMonitor
          init_args: {output: runs/calibration.json}
"""

from __future__ import annotations

from typing import Any, Literal

import lightning as L
import torch

from calib_ext.family import calibration_from_state, init_calibration_state, update_calibration_state
from calib_ext.metrics import ece_from_confidence
from calib_ext.next_item import collect_next_item_logits, iter_next_item_logits
from calib_ext.temperature import TemperatureScaler
from recframe.callbacks import ReportCallback

__all__ = ["CalibrationMonitor", "measure_calibration"]


def measure_calibration(model: Any, view: Any, n_bins: int = 15, mask_seen: bool = True,
                        temperature: float = 1.0) -> dict[str, float]:
    """Calibration metrics of ``model`` on an ``EvaluationView``, streamed batch by batch.

    Logits are divided by ``temperature`` before the softmax. Returns ``ece``, ``ece_mass``,
    ``classwise_ece``, ``nll``, ``brier``, ``accuracy`` and ``examples``.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    state = init_calibration_state(view.n_items, n_bins, classwise=True)
    confs, corrects = [], []
    for logits, labels in iter_next_item_logits(model, view, mask_seen):
        logits = logits.cpu() / temperature
        labels = labels.cpu()
        conf = update_calibration_state(state, logits, labels, n_bins)
        confs.append(conf)
        corrects.append(logits.argmax(dim=1) == labels)
    if not confs:
        raise ValueError(f"the {view.stage} view has no users to evaluate")
    out = calibration_from_state(state)
    conf, correct = torch.cat(confs), torch.cat(corrects)
    out["ece_mass"] = ece_from_confidence(conf, correct, n_bins, "mass")
    out["examples"] = int(conf.numel())
    return out


class CalibrationMonitor(ReportCallback):
    """Logs calibration (ECE, NLL, Brier, ...) of next-item probabilities at validation and test.

    Args:
        n_bins: bins of the ECEs.
        mask_seen: mask seen items before the softmax, as the ranking metrics do (default True).
        temperature_scaling: at test, also report the metrics after temperature scaling fitted on the
            validation view.
        output: JSON report file (atomic write), or None.
    """

    log_prefix = "calibration"

    def __init__(self, n_bins: int = 15, mask_seen: bool = True, temperature_scaling: bool = True,
                 output: str | None = None) -> None:
        super().__init__(output=output)
        if isinstance(n_bins, bool) or int(n_bins) != n_bins or n_bins < 1:
            raise ValueError(f"CalibrationMonitor n_bins must be a positive integer, got {n_bins!r}")
        self.n_bins = int(n_bins)
        self.mask_seen = bool(mask_seen)
        self.temperature_scaling = bool(temperature_scaling)

    def _settings(self) -> dict[str, Any]:
        return {"n_bins": self.n_bins, "mask_seen": self.mask_seen,
                "temperature_scaling": self.temperature_scaling}

    def _measure(self, trainer: L.Trainer, pl_module: L.LightningModule,
                 stage: Literal["valid", "test"], temperature: float = 1.0) -> dict[str, float]:
        return measure_calibration(pl_module, self.eval_view(trainer, stage), self.n_bins, self.mask_seen,
                                   temperature)

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        result = self._measure(trainer, pl_module, "valid")
        report = dict(self.report_ or {})
        history = list(report.get("valid_history", []))
        history.append({"epoch": int(trainer.current_epoch), "global_step": int(trainer.global_step),
                        **result})
        report.update(settings=self._settings(), valid=result, valid_history=history)
        self.publish(trainer, report, metrics={f"valid/{k}": v for k, v in result.items() if k != "examples"})

    def on_test_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        result = self._measure(trainer, pl_module, "test")
        report = dict(self.report_ or {})
        report.update(settings=self._settings(), test=result)
        metrics = {f"test/{k}": v for k, v in result.items() if k != "examples"}
        if self.temperature_scaling:
            logits, labels = collect_next_item_logits(pl_module, self.eval_view(trainer, "valid"),
                                                      self.mask_seen)
            scaler = TemperatureScaler().fit(logits, labels)
            del logits, labels
            scaled = self._measure(trainer, pl_module, "test", scaler.temperature_)
            report.update(temperature=scaler.to_dict(), test_ts=scaled)
            metrics.update({f"test_ts/{k}": v for k, v in scaled.items() if k != "examples"})
            metrics["test_ts/temperature"] = scaler.temperature_
        self.publish(trainer, report, metrics=metrics)
