"""Every model trains on synthetic data with planted structure and beats popularity."""

from __future__ import annotations

import lightning as L
import pytest

from recframe.data.datamodule import RecDataModule
from recframe.models import BPRMF, LightGCN, Popularity, SASRec

SYNTH = {"n_users": 300, "n_items": 150, "n_clusters": 5, "mean_length": 25, "seed": 1}


def _fit_test(model_cls, epochs: int, split: str = "loo", **kwargs) -> dict[str, float]:
    L.seed_everything(0)
    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH, split=split, max_len=25, batch_size=256)
    model = model_cls(n_items=dm.n_items, n_users=dm.n_users, **kwargs)
    trainer = L.Trainer(max_epochs=epochs, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        limit_val_batches=0)
    trainer.fit(model, dm)
    return trainer.test(model, dm, verbose=False)[0]


@pytest.fixture(scope="module")
def popularity() -> dict[str, float]:
    return _fit_test(Popularity, 1)


def test_sasrec_learns_the_planted_sequences(popularity: dict[str, float]) -> None:
    res = _fit_test(SASRec, 25, max_len=25, hidden=32, n_layers=1, n_heads=2, inner=64, lr=5e-3)
    assert res["test/ndcg@10"] > 2 * popularity["test/ndcg@10"]


def test_sasrec_sampled_softmax_also_learns(popularity: dict[str, float]) -> None:
    res = _fit_test(SASRec, 25, max_len=25, hidden=32, n_layers=1, n_heads=2, inner=64, lr=5e-3,
                    loss_type="sampled", n_negatives=32)
    assert res["test/ndcg@10"] > 1.5 * popularity["test/ndcg@10"]


@pytest.mark.parametrize("model_cls", [BPRMF, LightGCN])
def test_collaborative_models_learn_the_planted_clusters(model_cls, popularity: dict[str, float]) -> None:
    res = _fit_test(model_cls, 15, dim=32, lr=1e-2)
    assert res["test/recall@20"] > popularity["test/recall@20"]


def test_signed_protocol_reports_signed_metrics() -> None:
    res = _fit_test(Popularity, 1, split="ratio")
    for key in ("signed_recall@10", "signed_hr@10", "signed_ndcg@10", "recall@10"):
        assert f"test/{key}" in res
    assert res["test/signed_ndcg@10"] <= res["test/ndcg@10"] + 1e-12
