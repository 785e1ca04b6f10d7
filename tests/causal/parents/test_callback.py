"""IndRMFeatureReport: IndRM of a trained model's item scores on item side features, at on_test_end."""

from __future__ import annotations

import json

import lightning as L
import numpy as np
import pytest

from causal_ext.parents.callback import IndRMFeatureReport, item_feature_matrix
from recframe.data.datamodule import RecDataModule
from recframe.data.interactions import ItemFeatures
from recframe.models import BPRMF
from tests.planted_scores import PlantedScores


def test_item_feature_matrix_columns():
    feats = ItemFeatures(year=np.array([0, 1990, 1990, 2000, 2010]),
                         categories=[[], ["a"], ["a", "b"], ["b"], ["c"]],
                         vectors=np.arange(15, dtype=np.float32).reshape(5, 3),
                         extra={"const": np.ones(5), "pop": np.array([0, 4, 3, 2, 1])})
    x, names = item_feature_matrix(feats, 4, max_categories=2, max_vector_dims=1)
    assert names == ["year", "cat=a", "cat=b", "vec[0]", "pop"]  # "const" does not vary: dropped
    np.testing.assert_array_equal(x[:, 1], [1, 1, 0, 0])
    with pytest.raises(ValueError, match="no side features"):
        item_feature_matrix(None, 4)


def _datamodule() -> RecDataModule:
    return RecDataModule(dataset="synthetic", split="loo", max_len=20, batch_size=256, synthetic={
        "n_users": 200, "n_items": 300, "n_clusters": 4, "mean_length": 20, "seed": 0})


def test_callback_finds_the_planted_feature_and_survives_state_dict(tmp_path):
    """Scores = 2 * [category == the most frequent one] + uniform noise: IndRM must select that indicator."""
    dm = _datamodule()
    x, names = item_feature_matrix(dm.split.train.item_features, dm.n_items)
    assert names[0] == "year" and all(n.startswith("cat=") for n in names[1:])
    rng = np.random.default_rng(0)
    planted = np.r_[0.0, 2.0 * x[:, 1] + rng.uniform(-0.5, 0.5, dm.n_items)]
    out = tmp_path / "indrm.json"
    cb = IndRMFeatureReport(output=str(out), indrm={"search": "exhaustive"})
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb])
    trainer.test(PlantedScores(planted), dm, verbose=False)
    report = json.loads(out.read_text())
    assert report == cb.report_
    assert report["features"] == names
    assert report["parents"] == [names[1]]
    assert report["n_sets_scored"] == 2 ** len(names)
    assert report["n_users"] == len(dm.eval_set("test").users)
    fresh = IndRMFeatureReport()
    fresh.load_state_dict(cb.state_dict())
    assert fresh.report_ == report


def test_callback_on_a_trained_model(tmp_path):
    """End to end on BPR-MF (2 epochs): a report over the same features, selected ones among them."""
    L.seed_everything(0)
    dm = _datamodule()
    model = BPRMF(n_items=dm.n_items, n_users=dm.n_users, dim=16, lr=0.01)
    cb = IndRMFeatureReport(max_batches=1)
    trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb])
    trainer.fit(model, dm)
    trainer.test(model, dm, verbose=False)
    assert cb.report_["model"] == "BPRMF"
    assert set(cb.report_["parents"]) <= set(cb.report_["features"])
