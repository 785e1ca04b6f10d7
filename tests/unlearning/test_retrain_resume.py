"""The retrain reference survives a kill: it resumes from ``last.ckpt`` and ends as an uninterrupted fit."""

from __future__ import annotations

import lightning as L
import numpy as np
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from recframe.data.datamodule import RecDataModule
from recframe.models.generative import SIDDecoder
from recframe.unlearning import retrain
from recframe.unlearning.retrain import RetrainSettings, retrain_without
from tests.kill_callbacks import KilledAtEpoch

SYNTH = {"n_users": 120, "n_items": 30, "n_clusters": 3, "mean_length": 10, "seed": 2}
DATA = {"dataset": "synthetic", "synthetic": SYNTH, "split": "loo", "max_len": 6, "batch_size": 32,
        "eval_batch_size": 128}
SETTINGS = RetrainSettings(max_epochs=4, patience=0, seed=3)


class _Epochs(Callback):
    def __init__(self) -> None:
        self.seen: list[int] = []

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.seen.append(trainer.current_epoch)


@pytest.fixture(scope="module")
def original() -> SIDDecoder:
    torch.set_num_threads(1)
    dm = RecDataModule(**DATA)
    model = SIDDecoder(n_items=dm.n_items, n_users=dm.n_users, max_len=6, dim=16, n_layers=1, n_heads=2,
                       inner=32, dropout=0.1, normalize="valid", history_tokens="items", lr=5e-3)
    codes = np.array([[0, 0]] + [[(i - 1) % 3, (i - 1) // 3] for i in range(1, dm.n_items + 1)])
    model.build_from_codes(codes, (3, 10))
    return model


def test_a_killed_retrain_resumes_to_the_uninterrupted_weights(original, tmp_path, monkeypatch) -> None:
    forget = np.array([3, 6, 9])
    whole = retrain_without(original, DATA, forget, SETTINGS)  # a temporary directory, no kill

    real = L.Trainer

    def killed(*args, **kwargs):
        kwargs["callbacks"] = [*kwargs.get("callbacks", []), KilledAtEpoch(2)]
        return real(*args, **kwargs)

    monkeypatch.setattr(retrain.L, "Trainer", killed)
    with pytest.raises(RuntimeError, match="killed"):
        retrain_without(original, DATA, forget, SETTINGS, workdir=tmp_path)
    assert (tmp_path / "retrain_run" / "last.ckpt").is_file()
    epochs = _Epochs()

    def counted(*args, **kwargs):
        kwargs["callbacks"] = [*kwargs.get("callbacks", []), epochs]
        return real(*args, **kwargs)

    monkeypatch.setattr(retrain.L, "Trainer", counted)
    resumed = retrain_without(original, DATA, forget, SETTINGS, workdir=tmp_path)
    assert epochs.seen == [2, 3]  # it resumed after the two finished epochs, not from scratch
    assert not (tmp_path / "retrain_run").exists()  # removed once the fit ended
    assert not (tmp_path / "retrain_run.json").exists()
    for name, value in whole.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[name], value, rtol=0, atol=1e-6, msg=name)


def test_leftovers_of_another_retrain_are_not_resumed(original, tmp_path) -> None:
    folder = tmp_path / "retrain_run"
    folder.mkdir()
    (tmp_path / "retrain_run.json").write_text('{"forget_items": [1], "settings": {}}')
    (folder / "last.ckpt").write_bytes(b"not this run's")
    forget = np.array([3, 6, 9])
    fitted = retrain_without(original, DATA, forget, SETTINGS, workdir=tmp_path)  # would fail on the junk
    fresh = retrain_without(original, DATA, forget, SETTINGS)
    for name, value in fresh.state_dict().items():
        torch.testing.assert_close(fitted.state_dict()[name], value, rtol=0, atol=1e-6, msg=name)
