"""Next-item probabilities, the calibration metric family and CalibrationMonitor (planted scores, SASRec)."""

from __future__ import annotations

import json

import lightning as L
import numpy as np
import pytest
import torch

from calib_ext.callback import CalibrationMonitor
from calib_ext.family import CalibrationFamily
from calib_ext.metrics import calibration_summary
from calib_ext.next_item import next_item_logits
from recframe.data.datamodule import RecDataModule
from recframe.metrics import FullRankingEvaluator
from recframe.models import SASRec
from tests.planted_scores import PlantedScores

NINF = float("-inf")


def test_next_item_logits_masks_seen_keeps_targets_drops_padding() -> None:
    scores = torch.tensor([[9.0, 1.0, 2.0, 3.0, 4.0], [9.0, 5.0, 6.0, 7.0, 8.0]])
    targets = torch.tensor([[2, 0, 0], [4, 1, 4]])  # row 1: two targets, one duplicate
    seen = torch.tensor([[2, 3, 0], [1, 0, 0]])
    logits, labels = next_item_logits(scores, targets, seen)
    expected = torch.tensor([[1.0, 2.0, NINF, 4.0],   # item 3 seen; item 2 seen but held out: kept
                             [5.0, 6.0, 7.0, 8.0],    # item 1 seen but held out: kept
                             [5.0, 6.0, 7.0, 8.0]], dtype=torch.float64)
    assert torch.equal(logits, expected)
    assert labels.tolist() == [1, 3, 0]  # class c is item c + 1; the duplicate 4 counts once
    unmasked, _ = next_item_logits(scores, targets, seen, mask_seen=False)
    assert torch.isfinite(unmasked).all()


def test_family_streams_the_offline_definitions() -> None:
    g = torch.Generator().manual_seed(0)
    n_items, users = 40, 50
    scores = torch.randn(users, n_items + 1, generator=g) * 2
    targets = torch.randint(1, n_items + 1, (users, 2), generator=g)
    targets[::3, 1] = 0
    seen = torch.randint(0, n_items + 1, (users, 6), generator=g)
    labels = torch.ones_like(targets)
    ev = FullRankingEvaluator(n_items, ks=(10,), families=[CalibrationFamily(n_bins=10, prefix="cal_")])
    for lo in range(0, users, 16):  # chunks of 16 users
        ev.update(scores[lo:lo + 16], targets[lo:lo + 16], labels[lo:lo + 16], seen[lo:lo + 16])
    got = ev.compute()
    logits, y = next_item_logits(scores, targets, seen)
    ref = calibration_summary(logits, y, n_bins=10)
    for name in ("ece", "classwise_ece", "nll", "brier", "accuracy"):
        assert got[f"cal_{name}"] == pytest.approx(ref[name], abs=1e-10)


def _datamodule(**kw) -> RecDataModule:
    return RecDataModule(dataset="synthetic", split="loo", max_len=20, batch_size=256, eval_batch_size=64,
                         synthetic={"n_users": 200, "n_items": 120, "n_clusters": 4, "mean_length": 20,
                                    "seed": 0}, **kw)


def test_monitor_on_planted_scores_matches_an_independent_computation(tmp_path) -> None:
    dm = _datamodule(metric_families=[CalibrationFamily()])
    rng = np.random.default_rng(0)
    planted = np.r_[0.0, rng.normal(0, 2, dm.n_items)]
    out = tmp_path / "calib.json"
    cb = CalibrationMonitor(output=str(out), temperature_scaling=False)
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb])
    logged = trainer.test(PlantedScores(planted), dm, verbose=False)[0]
    # independent: mask each test user's seen items with numpy from the view's CSR arrays
    view = dm.eval_view("test")
    rows, labels = [], []
    for u in view.users:
        targets, _ = view.targets(u)
        z = planted[1:].copy()
        z[np.setdiff1d(view.history(u), targets) - 1] = -np.inf
        for t in dict.fromkeys(targets.tolist()):
            rows.append(z)
            labels.append(t - 1)
    ref = calibration_summary(np.array(rows), np.array(labels))
    report = json.loads(out.read_text())
    assert report == cb.report_
    for key in ("ece", "ece_mass", "classwise_ece", "nll", "brier", "accuracy"):
        assert report["test"][key] == pytest.approx(ref[key], abs=1e-6)
    assert report["test"]["examples"] == len(labels)
    for key in ("ece", "nll", "brier", "accuracy"):  # the metric family, streamed by the evaluator
        assert logged[f"test/{key}"] == pytest.approx(ref[key], abs=1e-5)


def test_monitor_on_sasrec_end_to_end(tmp_path) -> None:
    """SASRec on synthetic data with planted clusters: the monitor reports every validation epoch and at
    test; the model learns far more than chance, and temperature scaling keeps accuracy and cannot raise
    the validation NLL it minimises."""
    L.seed_everything(0)
    dm = _datamodule()
    model = SASRec(n_items=dm.n_items, max_len=20, hidden=32, n_layers=1, n_heads=2, inner=64, lr=0.005)
    cb = CalibrationMonitor(output=str(tmp_path / "calib.json"))
    trainer = L.Trainer(max_epochs=3, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb], num_sanity_val_steps=1)
    trainer.fit(model, dm)
    assert [h["epoch"] for h in cb.report_["valid_history"]] == [0, 1, 2]
    trainer.test(model, dm, verbose=False)
    report = cb.report_
    test, ts = report["test"], report["test_ts"]
    assert test["accuracy"] > 5.0 / dm.n_items  # planted cluster structure was learned
    assert ts["accuracy"] == test["accuracy"]
    assert report["temperature"]["nll_after"] <= report["temperature"]["nll_before"] + 1e-12
    assert report["temperature"]["temperature"] > 0
    for key in ("ece", "ece_mass", "nll", "brier"):
        assert np.isfinite(test[key]) and np.isfinite(ts[key])
    assert 0.0 <= test["ece"] <= 1.0 and 0.0 <= test["brier"] <= 2.0
    fresh = CalibrationMonitor()
    fresh.load_state_dict(cb.state_dict())
    assert fresh.report_ == report


def test_monitor_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="n_bins"):
        CalibrationMonitor(n_bins=0)
    with pytest.raises(ValueError, match="n_bins"):
        CalibrationFamily(n_bins=-1)
