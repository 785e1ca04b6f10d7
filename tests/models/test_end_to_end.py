"""Every model trains on synthetic data with planted structure and beats popularity."""

from __future__ import annotations

import pytest

from recframe.models import BPRMF, LightGCN, Popularity, SASRec
from tests.models.sequential_support import fit_and_test_on_planted


@pytest.fixture(scope="module")
def popularity() -> dict[str, float]:
    return fit_and_test_on_planted(Popularity, 1)


def test_sasrec_learns_the_planted_sequences(popularity: dict[str, float]) -> None:
    res = fit_and_test_on_planted(SASRec, 25, max_len=25, hidden=32, n_layers=1, n_heads=2, inner=64, lr=5e-3)
    assert res["test/ndcg@10"] > 2 * popularity["test/ndcg@10"]


def test_sasrec_sampled_softmax_also_learns(popularity: dict[str, float]) -> None:
    res = fit_and_test_on_planted(SASRec, 25, max_len=25, hidden=32, n_layers=1, n_heads=2, inner=64, lr=5e-3,
                    loss_type="sampled", n_negatives=32)
    assert res["test/ndcg@10"] > 1.5 * popularity["test/ndcg@10"]


@pytest.mark.parametrize("model_cls", [BPRMF, LightGCN])
def test_collaborative_models_learn_the_planted_clusters(model_cls, popularity: dict[str, float]) -> None:
    res = fit_and_test_on_planted(model_cls, 15, dim=32, lr=1e-2)
    assert res["test/recall@20"] > popularity["test/recall@20"]


def test_signed_protocol_reports_signed_metrics() -> None:
    res = fit_and_test_on_planted(Popularity, 1, split="ratio")
    for key in ("signed_recall@10", "signed_hr@10", "signed_ndcg@10", "recall@10"):
        assert f"test/{key}" in res
    assert res["test/signed_ndcg@10"] <= res["test/ndcg@10"] + 1e-12
