"""CalibrationMonitor and CalibrationFamily on real ML-100K data (slow: needs the prepared dataset)."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch

from calib_ext.callback import CalibrationMonitor
from calib_ext.family import CalibrationFamily
from recframe.data.datamodule import RecDataModule
from recframe.models.base import RecModel

pytestmark = pytest.mark.slow


class LogPopularity(RecModel):
    """Scores = log(1 + training count): a popularity model whose probabilities are known in advance."""

    def __init__(self, popularity: np.ndarray) -> None:
        super().__init__(len(popularity) - 1)
        self.register_buffer("scores", torch.log1p(torch.as_tensor(popularity, dtype=torch.float32)))

    def loss(self, batch):
        return None

    def score(self, batch):
        return self.scores[None, :].expand(batch["users"].shape[0], -1)


def test_monitor_and_family_on_ml100k(ml100k_root: Path) -> None:
    dm = RecDataModule(dataset="ml-100k", root=str(ml100k_root), split="loo", max_len=50, batch_size=128,
                       metric_families=[CalibrationFamily()])
    view = dm.eval_view("test")
    model = LogPopularity(np.array(view.item_popularity))
    cb = CalibrationMonitor()
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb])
    logged = trainer.test(model, dm, verbose=False)[0]
    test, ts = cb.report_["test"], cb.report_["test_ts"]
    assert test["examples"] == len(view.users) == 943
    # top-1 = the most popular eligible item; recompute its hit rate independently with numpy
    hits = 0
    pop = np.asarray(view.item_popularity, dtype=float)
    for u in view.users:
        targets, _ = view.targets(u)
        eligible = pop[1:].copy()
        eligible[np.setdiff1d(view.history(u), targets) - 1] = -np.inf
        hits += int(np.argmax(eligible) + 1 in set(targets.tolist()))
    assert test["accuracy"] == pytest.approx(hits / len(view.users))
    assert logged["test/accuracy"] == pytest.approx(test["accuracy"])
    assert logged["test/nll"] == pytest.approx(test["nll"], rel=1e-6)
    assert 0 < test["ece"] < 1 and np.log(1682) * 0.5 < test["nll"] < 2 * np.log(1682)
    assert ts["nll"] <= test["nll"] + 0.05  # T fitted on validation transfers to test on the same model
