"""Every config of the valence-aware benchmark fits end to end (on synthetic data, one epoch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recframe import Recommender
from recframe.runs import fit_and_test

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
NEW = ["sirens_ml100k_signed", "lightgcn_neg_ml100k_signed", "bprmf_valence_ml100k_signed",
       "lightgcn_valence_ml100k_signed", "sasrec_valence_ml100k_signed", "sirens_valence_ml100k_signed",
       "lightgcn_neg_valence_ml100k_signed"]
SYNTH = {"n_users": 40, "n_items": 30, "n_clusters": 3, "mean_length": 12, "dislike_rate": 0.3, "seed": 0}


@pytest.mark.parametrize("name", NEW)
def test_config_fits_and_reports_signed_metrics(name: str, tmp_path: Path) -> None:
    captured = {}

    def keep(model, dm):  # the tested model, to check what the config built
        captured["model"] = model
        return {}

    result = fit_and_test(CONFIGS / f"{name}.yaml", [
        "--data.dataset", "synthetic", "--data.synthetic", json.dumps(SYNTH),
        "--data.metric_families", '[{"class_path": "recframe.metrics.DislikedHitsFamily"}]',
        "--trainer.max_epochs", "1", "--trainer.check_val_every_n_epoch", "1",
        "--trainer.logger.init_args.save_dir", str(tmp_path)], after_test=keep)
    test = result["test"]
    for key in ("ndcg@10", "signed_ndcg@10", "signed_recall@10", "disliked_hits@10"):
        assert key in test
    assert result["selected_by_validation"]
    addons = captured["model"].hparams["addons"]
    expected = ["ValenceMargin"] if "valence" in name else []
    assert [a["class_path"].rsplit(".", 1)[1] for a in addons] == expected
    # the checkpoint alone (weights_only) serves through FAISS: add-ons rebuilt, graph buffers restored
    rec = Recommender.from_checkpoint(result["best_checkpoint"])
    assert rec.index is not None
    served = rec.recommend(users=["u1", "u2"], k=5)
    assert [type(a).__name__ for a in rec.model.attached_addons()] == expected
    assert all(len(row) == 5 for row in served.items)
