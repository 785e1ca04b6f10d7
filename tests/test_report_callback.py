"""ReportCallback: report_ as JSON data, weights_only checkpoints, resume, atomic report file, logging."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import lightning as L
import numpy as np
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import Logger

from recframe.callbacks import ReportCallback
from recframe.data.datamodule import RecDataModule
from recframe.models import BPRMF

SYNTHETIC = {"n_users": 60, "n_items": 80, "n_clusters": 3, "mean_length": 12, "seed": 0}


def _datamodule() -> RecDataModule:
    return RecDataModule(dataset="synthetic", split="loo", max_len=10, batch_size=64, synthetic=SYNTHETIC)


class EpochLog(ReportCallback):
    """Appends each finished epoch (and numpy values) to its report: a report that must survive resume."""

    log_prefix = "epochlog"

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.at_start = self.report_  # what a resumed run restored

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        epochs = (self.report_ or {}).get("epochs", []) + [trainer.current_epoch]
        view = self.eval_view(trainer, "valid")
        self.publish(trainer, {"epochs": epochs, "n_users": np.int64(len(view)), "mean": np.float32(0.5),
                               "flags": np.array([True, False]), "pair": (1, 2)},
                     {"last_epoch": trainer.current_epoch})


class Recording(Logger):
    """A logger that keeps what it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.metrics: list[tuple[dict[str, float], int | None]] = []

    @property
    def name(self) -> str:
        return "recording"

    @property
    def version(self) -> int:
        return 0

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        pass

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        self.metrics.append((dict(metrics), step))


def _trainer(tmp_path: Path, cb: ReportCallback, **kw: Any) -> L.Trainer:
    kw.setdefault("logger", False)
    return L.Trainer(default_root_dir=tmp_path, enable_progress_bar=False, enable_model_summary=False,
                     limit_val_batches=0, callbacks=[cb, *kw.pop("extra", [])], **kw)


def _model(dm: RecDataModule) -> BPRMF:
    return BPRMF(n_items=dm.n_items, n_users=dm.n_users, dim=4)


def test_report_is_json_data_written_atomically_and_logged(tmp_path: Path) -> None:
    L.seed_everything(0)
    dm, out, logger = _datamodule(), tmp_path / "reports" / "r.json", Recording()
    cb = EpochLog(output=str(out))
    _trainer(tmp_path, cb, max_epochs=2, logger=logger, enable_checkpointing=False).fit(_model(dm), dm)
    expected = {"epochs": [0, 1], "n_users": len(dm.eval_set("valid").users), "mean": 0.5,
                "flags": [True, False], "pair": [1, 2]}
    assert cb.report_ == expected
    assert all(type(v) is not np.int64 for v in cb.report_.values())
    assert json.loads(out.read_text()) == expected
    assert [p.name for p in out.parent.iterdir()] == ["r.json"]  # no temp file left behind
    logged = [m for m, _ in logger.metrics if "epochlog/last_epoch" in m]
    assert [m["epochlog/last_epoch"] for m in logged] == [0.0, 1.0]


def test_a_failed_write_keeps_the_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "r.json"
    cb = ReportCallback(output=str(out))
    trainer = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False)
    cb.publish(trainer, {"a": 1})
    assert json.loads(out.read_text()) == {"a": 1}

    def crash(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        cb.publish(trainer, {"a": 2, "long": list(range(1000))})
    assert json.loads(out.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_only_the_global_zero_process_writes_the_file(tmp_path: Path) -> None:
    other_rank = SimpleNamespace(is_global_zero=False, loggers=[], global_step=0)
    cb = ReportCallback(output=str(tmp_path / "r.json"))
    cb.publish(other_rank, {"a": 1})  # type: ignore[arg-type]
    assert cb.report_ == {"a": 1} and not (tmp_path / "r.json").exists()


def test_a_value_that_is_not_json_is_one_clear_error(tmp_path: Path) -> None:
    cb = ReportCallback(output=str(tmp_path / "r.json"))
    trainer = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False)
    with pytest.raises(TypeError, match="object value .* cannot be stored in the report of ReportCallback"):
        cb.publish(trainer, {"model": object()})
    assert cb.report_ is None and not (tmp_path / "r.json").exists()
    with pytest.raises(ValueError, match="no report to write"):
        cb.write_report(tmp_path / "r.json")


def test_report_round_trips_through_a_weights_only_checkpoint(tmp_path: Path) -> None:
    L.seed_everything(0)
    dm = _datamodule()
    cb = EpochLog()
    trainer = _trainer(tmp_path, cb, max_epochs=1, enable_checkpointing=False)
    trainer.fit(_model(dm), dm)
    trainer.save_checkpoint(tmp_path / "m.ckpt")
    ckpt = torch.load(tmp_path / "m.ckpt", weights_only=True)
    state = ckpt["callbacks"]["EpochLog"]
    assert isinstance(state["report"], str)
    fresh = EpochLog()
    fresh.load_state_dict(state)
    assert fresh.report_ == cb.report_ == {**cb.report_, "epochs": [0]}
    empty = EpochLog()
    empty.load_state_dict(EpochLog().state_dict())
    assert empty.report_ is None


def test_resume_keeps_the_report(tmp_path: Path) -> None:
    """A run resumed after epoch 0 ends with the same report as an uninterrupted 2-epoch run."""
    L.seed_everything(0)
    dm = _datamodule()
    whole = EpochLog()
    _trainer(tmp_path / "whole", whole, max_epochs=2, enable_checkpointing=False).fit(_model(dm), dm)

    ckpt_cb = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True, save_top_k=0)
    first = EpochLog()
    _trainer(tmp_path / "a", first, max_epochs=1, extra=[ckpt_cb]).fit(_model(dm), dm)
    resumed = EpochLog()
    _trainer(tmp_path / "b", resumed, max_epochs=2, enable_checkpointing=False).fit(
        _model(dm), dm, ckpt_path=str(tmp_path / "ckpt" / "last.ckpt"))
    assert whole.at_start is None and resumed.at_start == first.report_
    assert resumed.report_ == whole.report_
    assert resumed.report_["epochs"] == [0, 1]


def test_eval_view_needs_a_recframe_datamodule() -> None:
    trainer = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False)
    with pytest.raises(ValueError, match="has no eval_view.*RecDataModule"):
        ReportCallback.eval_view(trainer, "test")


# ------------------------------------------------------------------ state keyed by output
class Tagged(ReportCallback):
    """Each epoch, a report naming its own output file, so two instances' reports differ."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.at_start = self.report_

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        epochs = (self.report_ or {}).get("epochs", []) + [trainer.current_epoch]
        self.publish(trainer, {"file": Path(self.output).name, "epochs": epochs})


def _fit_first_epoch(tmp_path: Path, *callbacks: ReportCallback) -> Path:
    ckpt_cb = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True, save_top_k=0)
    dm = _datamodule()
    trainer = L.Trainer(default_root_dir=tmp_path / "a", enable_progress_bar=False,
                        enable_model_summary=False, logger=False, limit_val_batches=0, max_epochs=1,
                        callbacks=[*callbacks, ckpt_cb])
    trainer.fit(_model(dm), dm)
    return tmp_path / "ckpt" / "last.ckpt"


def _resume(tmp_path: Path, ckpt: Path, *callbacks: ReportCallback) -> None:
    dm = _datamodule()
    L.Trainer(default_root_dir=tmp_path / "b", enable_progress_bar=False, enable_model_summary=False,
              logger=False, limit_val_batches=0, max_epochs=2, enable_checkpointing=False,
              callbacks=list(callbacks)).fit(_model(dm), dm, ckpt_path=str(ckpt))


def test_two_instances_keep_their_own_reports_through_checkpoint_and_resume(tmp_path: Path) -> None:
    """Keyed by output, two instances of one class coexist in a trainer (with class-name keys Lightning
    refused them) and each resumes with its own report."""
    L.seed_everything(0)
    a, b = Tagged(output=str(tmp_path / "a.json")), Tagged(output=str(tmp_path / "b.json"))
    assert a.state_key != b.state_key and "a.json" in a.state_key
    assert Tagged().state_key == "Tagged"  # no output: the class name, as before
    last = _fit_first_epoch(tmp_path, a, b)
    states = torch.load(last, weights_only=True)["callbacks"]
    assert json.loads(states[a.state_key]["report"]) == {"file": "a.json", "epochs": [0]}
    assert json.loads(states[b.state_key]["report"]) == {"file": "b.json", "epochs": [0]}
    again_b, again_a = Tagged(output=str(tmp_path / "b.json")), Tagged(output=str(tmp_path / "a.json"))
    _resume(tmp_path, last, again_b, again_a)  # listed in the other order: keys, not positions, decide
    assert again_a.at_start == a.report_ and again_b.at_start == b.report_
    assert again_a.report_ == {"file": "a.json", "epochs": [0, 1]}
    assert again_b.report_ == {"file": "b.json", "epochs": [0, 1]}


def _with_old_key(ckpt: Path, cb: ReportCallback, out: Path) -> Path:
    """The checkpoint as written when reports were keyed by class name."""
    data = torch.load(ckpt, weights_only=True)
    data["callbacks"][type(cb).__qualname__] = data["callbacks"].pop(cb.state_key)
    torch.save(data, out)
    return out


def test_a_checkpoint_with_the_old_class_name_key_still_resumes(tmp_path: Path) -> None:
    L.seed_everything(0)
    first = Tagged(output=str(tmp_path / "r.json"))
    old = _with_old_key(_fit_first_epoch(tmp_path, first), first, tmp_path / "old.ckpt")
    assert "Tagged" in torch.load(old, weights_only=True)["callbacks"]
    resumed = Tagged(output=str(tmp_path / "r.json"))
    _resume(tmp_path, old, resumed)
    assert resumed.at_start == first.report_ == {"file": "r.json", "epochs": [0]}
    assert resumed.report_ == {"file": "r.json", "epochs": [0, 1]}


def test_an_old_key_is_restored_to_no_instance_when_several_could_own_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    L.seed_everything(0)
    first = Tagged(output=str(tmp_path / "r.json"))
    old = _with_old_key(_fit_first_epoch(tmp_path, first), first, tmp_path / "old.ckpt")
    a, b = Tagged(output=str(tmp_path / "r.json")), Tagged(output=str(tmp_path / "other.json"))
    with caplog.at_level("WARNING", logger="recframe.callbacks"):
        _resume(tmp_path, old, a, b)
    assert a.at_start is None and b.at_start is None
    assert "restored to none of them" in caplog.text
