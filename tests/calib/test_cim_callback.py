"""CIMCallback end to end: a tiny SASRec trained on synthetic data with planted clusters and sequences, tested
with the callback; the report equals a direct CIMDetector run on the same evaluation view, is written as JSON,
logged, and survives the checkpoint round trip."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch

from calib_ext.cim import CIMDetector, RecommenderAdapter
from calib_ext.cim.callback import CIMCallback, view_batches
from calib_ext.cim.detector import auroc_table
from recframe.data.datamodule import RecDataModule
from recframe.models import SASRec

SYNTHETIC = {"n_users": 150, "n_items": 120, "n_clusters": 4, "mean_length": 15, "seed": 0}


def test_cim_callback_reports_aurocs_after_test(tmp_path: Path) -> None:
    L.seed_everything(0)
    dm = RecDataModule(dataset="synthetic", split="loo", max_len=12, batch_size=64, synthetic=SYNTHETIC)
    model = SASRec(n_items=dm.n_items, n_users=dm.n_users, max_len=12, hidden=16, n_layers=1, n_heads=2,
                   inner=32, dropout=0.1, attn_dropout=0.1, lr=5e-3)
    out = tmp_path / "cim.json"
    cb = CIMCallback(output=str(out), keep_fractions=[0.5], n_clusters=6, max_users=100, batch_size=32)
    trainer = L.Trainer(max_epochs=8, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb], limit_val_batches=0)
    trainer.fit(model, dm)
    trainer.test(model, dm, verbose=False)
    report = json.loads(out.read_text())
    assert report == cb.report_ and report["n"] == 100
    assert set(report["auroc"]) == {"wrong_top1", "miss@10"}
    for row in report["auroc"].values():
        assert set(row) == {"semantic_divergence", "eed", "eed_same_view", "max_prob", "entropy"}
        assert all(0.0 <= v <= 1.0 for v in row.values())
    assert set(report["ms_per_example"]) == {"semantic_divergence", "eed", "max_prob", "entropy"}
    assert report["settings"]["keep_fractions"] == [0.5]
    # the trained model learned the planted sequences: far better than chance, yet it makes errors to detect
    assert 0.1 < report["error_rate"]["miss@10"] < 0.9
    # the same numbers from a direct run on the same view
    model.eval()
    ad = RecommenderAdapter(model)
    direct = CIMDetector(keep_fractions=(0.5,), n_clusters=6, progress=False).fit(ad)
    res = direct.score(ad, view_batches(dm.eval_view("test"), 32, 100))
    table = auroc_table(res)
    for err, row in report["auroc"].items():
        for score, value in row.items():
            assert value == pytest.approx(table[err][score], abs=1e-9)
    # the callback's state is its report as JSON, as for every ReportCallback
    restored = CIMCallback()
    restored.load_state_dict(cb.state_dict())
    assert restored.report_ == report


def test_view_batches_cut_after_max_users() -> None:
    dm = RecDataModule(dataset="synthetic", split="loo", max_len=12, batch_size=64, synthetic=SYNTHETIC)
    dm.setup("test")
    view = dm.eval_view("test")
    users = torch.cat([b["users"] for b in view_batches(view, 16, 37)])
    np.testing.assert_array_equal(users.numpy(), view.users[:37])
    assert sum(len(b["users"]) for b in view_batches(view, 16, None)) == len(view)


def test_callback_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="max_users"):
        CIMCallback(max_users=0)
    with pytest.raises(ValueError, match="keep_fractions"):
        CIMCallback(keep_fractions=[0.0])


@pytest.mark.slow
def test_cim_callback_on_ml100k(ml100k_root: Path, tmp_path: Path) -> None:
    """Real data: SASRec trained for 2 epochs on ML-100K (leave-one-out), CIM on the first 128 test users."""
    L.seed_everything(0)
    dm = RecDataModule(dataset="ml-100k", root=str(ml100k_root), split="loo", max_len=50, batch_size=128)
    dm.setup("fit")
    model = SASRec(n_items=dm.n_items, n_users=dm.n_users, max_len=50)
    cb = CIMCallback(output=str(tmp_path / "cim.json"), max_users=128)
    trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb], limit_val_batches=0)
    trainer.fit(model, dm)
    trainer.test(model, dm, verbose=False)
    report = cb.report_
    assert report["n"] == 128 and 0.5 < report["error_rate"]["miss@10"] < 1.0
    # after 2 epochs the model ranks far better than chance (HR@10 of a random ranking is ~0.006)
    assert 1.0 - report["error_rate"]["miss@10"] > 0.03
    for row in report["auroc"].values():
        assert all(0.0 <= v <= 1.0 for v in row.values() if v == v)
    assert report["ms_per_example"]["eed"] > report["ms_per_example"]["max_prob"]
