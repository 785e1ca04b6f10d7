"""The gold reference: the same model retrained from scratch without the concept's interactions.

:class:`ForgetDataModule` is a :class:`~recframe.data.RecDataModule` whose training and validation parts lose
every row of a forget item (the test part is kept whole; the unlearning report scores every model on the
original data's test cases, so all rows of the report see the same inputs). :func:`retrain_without` trains
a fresh model of the original's class and hyperparameters (same seed) **on the original's SID table**: the
tokenizer is not re-fitted, so the reference differs from the original only by the data it learned from
(with collaborative IDs the codes themselves were fitted with the concept's rows; re-tokenizing would
confound the comparison with a new codebook). Model selection is the usual one: best validation NDCG
(validation on the filtered validation part), early stopping after ``patience`` checks without improvement.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np

from recframe.checkpoint_io import load_checkpoint
from recframe.data.datamodule import RecDataModule
from recframe.data.splits import Split
from recframe.yaml_config import require

__all__ = ["ForgetDataModule", "RetrainSettings", "retrain_without"]


class ForgetDataModule(RecDataModule):
    """A :class:`RecDataModule` without the forget items' training and validation rows.

    Args:
        forget_items: dense ids of the items whose rows are dropped (ids of the unfiltered data, which the
            filtered split keeps: rows are removed, the id space is not).
        **kwargs: :class:`RecDataModule` arguments.
    """

    def __init__(self, forget_items: list[int] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.forget_items = [int(i) for i in forget_items or []]

    def _build_split(self) -> Split:
        split = super()._build_split()
        forget = np.zeros(split.train.n_items + 1, dtype=bool)
        forget[self.forget_items] = True
        return dataclasses.replace(
            split,
            train=split.train.select(~forget[split.train.item]),
            valid=split.valid.select(~forget[split.valid.item]),
        )


@dataclasses.dataclass
class RetrainSettings:
    """Training of the reference (defaults: the original config's ``trainer`` values when read from it).

    Args:
        max_epochs: epoch cap.
        patience: validation checks without improvement before stopping (``0``: no early stopping).
        check_val_every_n_epoch: validation frequency.
        seed: the seed (the original run's).
    """

    max_epochs: int = 20
    patience: int = 4
    check_val_every_n_epoch: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        require(self.max_epochs >= 1, "max_epochs", self.max_epochs, ">= 1")
        require(self.patience >= 0, "patience", self.patience, ">= 0 (0: no early stopping)")
        require(self.check_val_every_n_epoch >= 1, "check_val_every_n_epoch", self.check_val_every_n_epoch,
                ">= 1")


def retrain_without(
    original: Any,
    data: dict[str, Any],
    forget_items: np.ndarray,
    settings: RetrainSettings,
    workdir: str | Path | None = None,
    progress: bool = False,
) -> Any:
    """A fresh model like ``original`` (class, hyperparameters, SID table) trained on ``data`` (the
    :class:`RecDataModule` keyword arguments) without ``forget_items``' rows; the best validation epoch's
    weights are returned (module docstring).

    With ``workdir`` the fit keeps its checkpoints in ``workdir/retrain_run/`` (``last.ckpt`` after every
    epoch, with the random state; ``workdir/retrain_run.json`` names its forget items and settings) and, when
    called again after a kill with the same forget items and settings, resumes from it, ending as an
    uninterrupted fit would; both are removed once the fit ends. A folder left by other forget items or
    settings is discarded. Without ``workdir`` it trains in a
    temporary directory."""
    forget = [int(i) for i in np.asarray(forget_items)]
    L.seed_everything(settings.seed, verbose=False)
    hparams = {k: v for k, v in original.hparams.items() if not k.startswith("_")}
    model = type(original)(**hparams)
    model.build_from_codes(original.backbone.codes.cpu().numpy(), tuple(original.backbone.codebook_sizes))
    model.sid_table_state = original.sid_table_state
    dm = ForgetDataModule(forget_items=forget, **data)
    if workdir is None:
        with tempfile.TemporaryDirectory() as tmp:
            return _fit_best(model, dm, settings, Path(tmp), progress)
    folder = Path(workdir) / "retrain_run"
    stamp = json.dumps({"forget_items": forget, "settings": dataclasses.asdict(settings)}, sort_keys=True)
    marker = folder.with_suffix(".json")  # beside the folder: Lightning warns about a non-empty new dirpath
    if folder.is_dir() and (not marker.is_file() or marker.read_text() != stamp):
        shutil.rmtree(folder)  # another retrain's leftovers: nothing here to resume
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(stamp)
    fitted = _fit_best(model, dm, settings, folder, progress)
    shutil.rmtree(folder, ignore_errors=True)
    marker.unlink(missing_ok=True)
    return fitted


def _fit_best(model: Any, dm: RecDataModule, settings: RetrainSettings, folder: Path, progress: bool) -> Any:
    """Fit ``model`` with its checkpoints in ``folder`` (resuming its ``last.ckpt`` if there); the best
    validation epoch's weights, on the CPU, in eval mode."""
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from recframe.callbacks import RandomState
    from recframe.checkpoint_io import AtomicCheckpointIO

    best = ModelCheckpoint(dirpath=folder, monitor="val_ndcg", mode="max", save_top_k=1, filename="best",
                           enable_version_counter=False)
    last = ModelCheckpoint(dirpath=folder, filename="last", monitor=None, save_top_k=1, every_n_epochs=1,
                           save_on_train_epoch_end=True, enable_version_counter=False)
    callbacks: list[Any] = [best, last, RandomState()]
    if settings.patience > 0:
        callbacks.append(EarlyStopping(monitor="val_ndcg", mode="max", patience=settings.patience))
    trainer = L.Trainer(
        max_epochs=settings.max_epochs,
        logger=False,
        callbacks=callbacks,
        plugins=[AtomicCheckpointIO()],
        check_val_every_n_epoch=settings.check_val_every_n_epoch,
        num_sanity_val_steps=0,
        enable_progress_bar=progress,
        enable_model_summary=False,
    )
    resume = folder / "last.ckpt"
    trainer.fit(model, dm, ckpt_path=str(resume) if resume.is_file() else None)
    if best.best_model_path:
        model.load_state_dict(load_checkpoint(best.best_model_path)["state_dict"])
    return model.cpu().eval()
