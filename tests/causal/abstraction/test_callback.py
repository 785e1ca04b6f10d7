"""GenreHistogramCAE: 0 for a model that reads only the genre histogram, > 0 for one that reads the
last item; configured from YAML and checkpointed on a tiny trained SASRec."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch

from causal_ext.abstraction.callback import (
    GenreHistogram,
    GenreHistogramCAE,
    TopKGenreShare,
    canonical_histories,
    primary_genres,
)
from causal_ext.abstraction.reference_models import GenreScorer
from recframe.data.datamodule import RecDataModule
from recframe.data.interactions import ItemFeatures
from recframe.models import BPRMF

SYNTHETIC = {"n_users": 200, "n_items": 300, "n_clusters": 4, "mean_length": 20, "seed": 0}


def _datamodule() -> RecDataModule:
    return RecDataModule(dataset="synthetic", split="loo", max_len=20, batch_size=256, synthetic=SYNTHETIC)


def _trainer(cb, **kw) -> L.Trainer:
    return L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                     enable_model_summary=False, callbacks=[cb], **kw)


def test_value_maps_and_canonical_histories():
    genre = np.array([2, 0, 0, 1, 1, 1, 2])  # item 0 is padding ("other" = 2)
    hm = GenreHistogram(genre, 3)
    hist = np.array([[0, 1, 3, 4], [0, 0, 0, 6]])
    np.testing.assert_array_equal(hm.abstract([hist]), [[1, 2, 0], [0, 0, 1]])
    grounded = hm.ground(np.array([[2, 1, 0], [0, 3, 1]]), [(5,)], np.random.default_rng(0))[0]
    np.testing.assert_array_equal(hm.abstract([grounded]), [[2, 1, 0], [0, 3, 1]])
    assert (grounded[0] > 0).sum() == 3 and len(set(grounded[1][grounded[1] > 0])) == 4
    share = TopKGenreShare(genre, 3, k=2, popularity=np.array([0, 5, 1, 9, 2, 2, 0]))
    scores = np.array([[-np.inf, 3, 0, 2, 0, 0, 0]])
    np.testing.assert_allclose(share.abstract([scores]), [[0.5, 0.5, 0]])
    np.testing.assert_allclose(share.abstract(share.ground(np.array([[0.0, 1.0, 0.0]]), [(7,)], None)),
                               [[0, 1, 0]])
    pools = [np.array([1, 2]), np.array([3, 4, 5]), np.array([6])]
    canon = canonical_histories(np.array([[1, 2, 0]]), pools, 4)
    np.testing.assert_array_equal(canon, [[0, 1, 3, 4]])
    feats = ItemFeatures(categories=[[], ["a"], ["b", "a"], ["a"], [], ["c"]])
    g, names = primary_genres(feats, 5, max_genres=2)
    assert names == ["a", "b", "other"] and g.tolist() == [2, 0, 1, 0, 2, 2]
    with pytest.raises(ValueError, match="no categories"):
        primary_genres(ItemFeatures(), 5)


def test_planted_models_give_known_answers(tmp_path):
    dm = _datamodule()
    genre, _ = primary_genres(dm.split.train.item_features, dm.n_items)
    out = tmp_path / "cae.json"
    ok = GenreHistogramCAE(output=str(out), n_interventions=30)
    _trainer(ok).test(GenreScorer(genre, "histogram"), dm, verbose=False)
    assert ok.report_["cae"] == {"mse": 0.0, "js": 0.0, "mmd": 0.0}
    assert json.loads(out.read_text()) == ok.report_
    assert ok.report_["n_histories"] == len(dm.eval_set("test").users)
    bad = GenreHistogramCAE(n_interventions=30)
    _trainer(bad).test(GenreScorer(genre, "last"), dm, verbose=False)
    for direction in ("top_down", "bottom_up"):
        assert all(v > 0.1 for v in bad.report_["scores"][direction].values()), bad.report_
    fresh = GenreHistogramCAE()
    fresh.load_state_dict(bad.state_dict())
    assert fresh.report_ == bad.report_


def test_rejects_models_that_ignore_the_history():
    dm = _datamodule()
    model = BPRMF(n_items=dm.n_items, n_users=dm.n_users, dim=8)
    with pytest.raises(ValueError, match="uses_history"):
        _trainer(GenreHistogramCAE(n_interventions=5)).test(model, dm, verbose=False)
    with pytest.raises(ValueError, match="top_k"):
        GenreHistogramCAE(top_k=0)


def test_yaml_config_trained_sasrec_and_weights_only_checkpoint(tmp_path: Path, monkeypatch):
    from recframe.cli import run_cli

    monkeypatch.chdir(tmp_path)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "seed_everything: 0\n"
        "model:\n  class_path: recframe.models.SASRec\n"
        "  init_args: {hidden: 16, n_layers: 1, n_heads: 1, inner: 32, lr: 0.005}\n"
        "data:\n  dataset: synthetic\n"
        f"  synthetic: {json.dumps(SYNTHETIC)}\n"
        "  max_len: 20\n  batch_size: 256\n"
        "trainer:\n  max_steps: 20\n  enable_progress_bar: false\n  enable_model_summary: false\n"
        "  callbacks:\n    - class_path: causal_ext.abstraction.callback.GenreHistogramCAE\n"
        "      init_args: {output: cae.json, n_interventions: 20, top_k: 5, distances: [mse, mmd]}\n")
    cli = run_cli(["--config", str(cfg)], run=False)
    cb = next(c for c in cli.trainer.callbacks if isinstance(c, GenreHistogramCAE))
    assert (cb.n_interventions, cb.top_k, cb.distances) == (20, 5, ["mse", "mmd"])
    cli.trainer.fit(cli.model, cli.datamodule)
    cli.trainer.test(cli.model, cli.datamodule, verbose=False)
    report = json.loads((tmp_path / "cae.json").read_text())
    assert report["model"] == "SASRec" and set(report["cae"]) == {"mse", "mmd"}
    assert all(0.0 <= v <= 4.0 for v in report["cae"].values())
    cli.trainer.save_checkpoint(tmp_path / "m.ckpt")
    ckpt = torch.load(tmp_path / "m.ckpt", weights_only=True)
    state = next(v for k, v in ckpt["callbacks"].items() if "GenreHistogramCAE" in k)
    restored = GenreHistogramCAE()
    restored.load_state_dict(state)
    assert restored.report_ == report
