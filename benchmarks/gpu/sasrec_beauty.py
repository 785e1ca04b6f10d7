"""Part (d) of the GPU check: SASRec epochs on Amazon Beauty with the full softmax and the scalable losses."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from benchmarks.gpu.support import ROOT, Emit, left, peak_gib, reset_peak, synchronizer


def prepare_beauty(args: argparse.Namespace) -> tuple[Path, float]:
    """``recframe data prepare amazon-beauty`` (from ``--s3rec-dir`` when given); folder and seconds."""
    from recframe.data import catalog
    from recframe.data.s3rec_format import ENV_MIRROR

    if args.s3rec_dir is not None:
        os.environ[ENV_MIRROR] = str(Path(args.s3rec_dir).resolve())
    root = Path(args.data_root) if args.data_root is not None else catalog.default_root()
    start = time.perf_counter()
    folder = catalog.prepare("amazon-beauty", root, verbose=False)
    os.environ["RECFRAME_DATA"] = str(root)  # the datamodule reads its catalogued copy from here
    return folder, time.perf_counter() - start


def _epoch_clock(device: str, deadline: float) -> Any:
    import lightning as L

    sync = synchronizer(device)

    class EpochClock(L.Callback):
        """Seconds of each training epoch (device synchronised); stops fitting when the budget nears."""

        def __init__(self) -> None:
            self.seconds: list[float] = []
            self.stopped_early = False
            self._start = 0.0

        def on_train_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            sync()
            self._start = time.perf_counter()

        def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            sync()
            self.seconds.append(time.perf_counter() - self._start)
            last = trainer.current_epoch + 1 >= trainer.max_epochs
            if not last and left(deadline) < 1.5 * self.seconds[-1] + 2.0:
                trainer.should_stop = True
                self.stopped_early = True

    return EpochClock()


def sasrec_epochs(loss: str, args: argparse.Namespace, deadline: float) -> dict[str, Any]:
    """Fit SASRec from the Beauty config with ``loss`` for ``--sasrec-epochs`` epochs, validation off."""
    import torch
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from recframe.cli import run_cli

    overrides = ["--config", str(ROOT / args.sasrec_config), "--seed_everything", str(args.seed),
                 "--model.init_args.loss_type", loss, "--trainer.max_epochs", str(args.sasrec_epochs),
                 "--trainer.limit_val_batches", "0", "--trainer.logger", "false",
                 "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
                 "--trainer.accelerator", "gpu" if args.device.startswith("cuda") else "cpu",
                 "--trainer.devices", "1"]
    if args.sasrec_batches:
        overrides += ["--trainer.limit_train_batches", str(args.sasrec_batches)]
    cli = run_cli(overrides, run=False)
    trainer, model, dm = cli.trainer, cli.model, cli.datamodule
    clock = _epoch_clock(args.device, deadline)
    # validation is off, so neither early stopping nor checkpoints (both watch val_ndcg) have work here
    trainer.callbacks[:] = [c for c in trainer.callbacks
                            if not isinstance(c, (EarlyStopping, ModelCheckpoint))]
    trainer.callbacks.append(clock)
    reset_peak(args.device)
    trainer.fit(model, dm)
    peak, kind = peak_gib(args.device)
    metrics = trainer.callback_metrics
    loss_value = metrics.get("train/loss_epoch", metrics.get("train/loss"))
    return {"loss": loss, "epochs": len(clock.seconds), "epoch_seconds": clock.seconds,
            "s_per_epoch": clock.seconds[-1] if clock.seconds else None,
            "steps_per_epoch": int(trainer.num_training_batches), "n_items": int(dm.n_items),
            "users": int(dm.n_users), "batch_size": int(dm.batch_size), "peak_gib": peak, "peak_kind": kind,
            "chunk_size": int(model.next_item.chunk_size), "n_negatives": int(model.n_negatives),
            "deterministic": "warn" if torch.is_deterministic_algorithms_warn_only_enabled()
            else torch.are_deterministic_algorithms_enabled(),
            "stopped_early_for_budget": clock.stopped_early,
            "last_train_loss": float(loss_value) if loss_value is not None else None,
            "device": str(trainer.strategy.root_device)}


def part_sasrec_beauty(args: argparse.Namespace, deadline: float, emit: Emit) -> None:
    folder, seconds = prepare_beauty(args)
    emit({"kind": "prepare", "dataset": "amazon-beauty", "seconds": seconds, "folder": folder.name,
          "from_s3rec_dir": args.s3rec_dir is not None})
    for loss in args.sasrec_losses:
        if left(deadline) < 10.0:
            emit({"kind": "loss", "loss": loss, "skipped": "time budget gone"})
            continue
        emit({"kind": "loss", **sasrec_epochs(loss, args, deadline)})
