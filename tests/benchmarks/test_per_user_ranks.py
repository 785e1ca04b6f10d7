"""Per-user test ranks: the ranks a ``trainer.test`` pass records equal a fresh scoring of the test set, and
``per_user.test_ranks`` reuses them instead of scoring again."""

from __future__ import annotations

import lightning as L
import pytest

from benchmarks.per_user import test_ranks as per_user_test_ranks


@pytest.fixture(scope="module")
def tested():
    from recframe.data.datamodule import RecDataModule
    from recframe.models import BPRMF

    L.seed_everything(0)
    synthetic = {"n_users": 120, "n_items": 60, "n_clusters": 3, "mean_length": 12, "seed": 0}
    dm = RecDataModule(dataset="synthetic", synthetic=synthetic, split="loo", max_len=20, batch_size=256,
                       eval_batch_size=32)
    model = BPRMF(n_items=dm.n_items, n_users=dm.n_users, dim=8, lr=1e-2)
    trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(model, dm)
    test = trainer.test(model, dm, verbose=False)[0]
    assert 0 < test["test/hr@10"] < 1  # a trained model that ranks some targets, not all, in its top 10
    return model, dm, test


def test_recorded_ranks_equal_a_second_scoring_and_skip_it(tested, monkeypatch):
    model, dm, test = tested
    assert len(model.test_ranks) == dm.n_users  # leave-one-out: every user has a test item
    recorded = per_user_test_ranks(model, dm)
    recorded_full = per_user_test_ranks(model, dm, k=10_000)
    saved, model.test_ranks = model.test_ranks, {}
    try:
        rescored = per_user_test_ranks(model, dm)
        rescored_full = per_user_test_ranks(model, dm, k=10_000)
    finally:
        model.test_ranks = saved
    assert recorded == rescored and recorded_full == rescored_full
    hit10 = sum(r < 10 for r in recorded_full.values()) / len(recorded_full)
    assert hit10 == pytest.approx(test["test/hr@10"], abs=1e-6)  # the evaluator's own HR@10

    def no_scoring(batch):
        raise AssertionError("scored the test set again")

    monkeypatch.setattr(model, "score", no_scoring)
    assert per_user_test_ranks(model, dm) == recorded


def test_partial_records_are_scored_afresh(tested):
    model, dm, _ = tested
    saved = model.test_ranks
    model.test_ranks = dict(list(saved.items())[:5])  # e.g. one process's shard under DDP
    try:
        unrecorded = type("Unrecorded", (), {"score": model.score})()  # the same scores, no record
        assert per_user_test_ranks(model, dm) == per_user_test_ranks(unrecorded, dm)
    finally:
        model.test_ranks = saved
