"""A Lightning callback that stops a fit the way a kill would, for resume tests."""

from __future__ import annotations

from lightning.pytorch.callbacks import Callback


class KilledAtEpoch(Callback):
    """Raises ``RuntimeError("killed")`` when epoch ``epoch`` starts, as a kill after ``epoch`` finished
    epochs would stop the run (their ``last.ckpt`` is written)."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if trainer.current_epoch == self.epoch:
            raise RuntimeError("killed")
