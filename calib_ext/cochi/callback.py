"""``CoCHICallback``: CoCHI on a recframe recommender, after ``trainer.fit``.

At the end of fitting it takes the model (by default the best-validation checkpoint's weights, as
``recframe test`` would test them), fits :class:`~calib_ext.cochi.intervention.CoCHI` on the validation
stage's next-item predictions and measures the test stage before and after the intervention, all read through
``trainer.datamodule.eval_view(stage)``. The trained model itself is left unchanged; the fitted estimator is
kept in ``cochi_`` (``cochi_.intervene(model)`` / ``cochi_.apply_to(model)`` use it).

Config::

    trainer:
      callbacks:
        - class_path: calib_ext.cochi.CoCHICallback
          init_args: {output: runs/cochi.json}
"""

from __future__ import annotations

import copy
from typing import Any, Literal

import lightning as L

from calib_ext.cochi.intervention import CoCHI
from calib_ext.cochi.tasks import RecTask, collect
from calib_ext.metrics import calibration_summary
from recframe.callbacks import ReportCallback
from recframe.checkpoint_io import load_checkpoint

__all__ = ["CoCHICallback"]


class CoCHICallback(ReportCallback):
    """Fits CoCHI on the validation stage after fit and reports test calibration before/after.

    Args:
        output: JSON file for the report (see :class:`~recframe.callbacks.ReportCallback`).
        threshold, max_heads, scales: passed to :class:`~calib_ext.cochi.intervention.CoCHI`.
        use_best: calibrate the best-validation checkpoint's weights when the trainer kept one (default);
            otherwise the weights as fitting left them.
        progress: show progress bars.

    Report keys: ``cochi`` (the estimator's :meth:`~calib_ext.cochi.intervention.CoCHI.report`),
    ``test_before`` and ``test_after`` (:func:`calib_ext.metrics.calibration_summary` of the test next-item
    predictions),
    ``weights`` (``"best"`` or ``"last"``). Logged: ``cochi/test_{ece,nll,brier,accuracy}_{before,after}``.
    """

    log_prefix = "cochi"

    def __init__(self, output: str | None = None, threshold: float | str = "median", max_heads: int = 8,
                 scales: Literal["shared", "per_head"] = "shared", use_best: bool = True,
                 progress: bool = False) -> None:
        super().__init__(output)
        self.cochi = CoCHI(threshold=threshold, max_heads=max_heads, scales=scales, progress=progress)
        self.use_best = bool(use_best)
        self.cochi_: CoCHI | None = None

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        path = getattr(trainer.checkpoint_callback, "best_model_path", "") if self.use_best else ""
        kept = {k: v.detach().clone() for k, v in pl_module.state_dict().items()} if path else None
        try:
            if path:  # the best weights in place, put back afterwards: the trained model is left as it was
                pl_module.load_state_dict(load_checkpoint(path)["state_dict"])
            report, metrics = self._run(trainer, pl_module)
        finally:
            if kept is not None:
                pl_module.load_state_dict(kept)
        report["weights"] = "best" if path else "last"
        self.publish(trainer, report, metrics=metrics)

    def _run(self, trainer: L.Trainer, model: L.LightningModule) -> tuple[dict[str, Any], dict[str, float]]:
        valid, test = RecTask(self.eval_view(trainer, "valid")), RecTask(self.eval_view(trainer, "test"))
        self.cochi_ = copy.deepcopy(self.cochi).fit(model, valid)
        before = calibration_summary(*collect(model, test))
        after = calibration_summary(*self.cochi_.collect(model, test))
        report: dict[str, Any] = {"cochi": self.cochi_.report(), "test_before": before, "test_after": after}
        metrics = {f"test_{k}_{when}": v[k] for when, v in (("before", before), ("after", after))
                   for k in ("ece", "nll", "brier", "accuracy")}
        return report, metrics
