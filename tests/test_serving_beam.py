"""``Recommender.recommend(decode="beam")``: trie beam search serves a generative checkpoint."""

from __future__ import annotations

import lightning as L
import numpy as np
import pytest
import torch

from recframe.data.datamodule import RecDataModule
from recframe.models.generative import TIGER
from recframe.serving import Recommender
from recframe.tokenizers import RQKMeansTokenizer

SYNTH = {"n_users": 120, "n_items": 90, "n_clusters": 4, "mean_length": 15, "seed": 0}


@pytest.fixture(scope="module")
def rec() -> Recommender:
    """A small TIGER after a few training steps, served with the datamodule's serving data."""
    L.seed_everything(0)
    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH, split="loo", max_len=8, batch_size=64)
    model = TIGER(n_items=dm.n_items, n_users=dm.n_users, features="none", max_len=8, dim=16, n_layers=1,
                  n_heads=2, inner=32, tokenizer=RQKMeansTokenizer(n_levels=2, codebook_size=8))
    trainer = L.Trainer(max_steps=3, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, limit_val_batches=0)
    trainer.fit(model, dm)
    return Recommender(model.cpu(), dm.state_dict())


def _seen(rec: Recommender, user: str) -> set[str]:
    u = rec.user_ids.index(user)
    return {rec.item_ids[i] for i in rec.seen_items[rec.seen_indptr[u]:rec.seen_indptr[u + 1]]}


def test_a_whole_catalogue_beam_equals_exact_scoring(rec: Recommender) -> None:
    users = rec.user_ids[1:41]
    n_items = len(rec.item_ids) - 1
    for exclude_seen in (True, False):
        exact = rec.recommend(users=users, k=10, exclude_seen=exclude_seen)
        beam = rec.recommend(users=users, k=10, exclude_seen=exclude_seen, decode="beam", beam=n_items)
        assert beam.items == exact.items
        np.testing.assert_allclose(np.array(beam.scores), np.array(exact.scores), rtol=1e-4, atol=1e-4)


def test_a_narrow_beam_serves_valid_unseen_items_with_their_exact_scores(rec: Recommender) -> None:
    users = rec.user_ids[1:41]
    valid = {rec.item_ids[int(i)] for i in rec.model.trie.leaf_items}  # the trie's items
    out = rec.recommend(users=users, k=5, decode="beam", beam=2)
    exact_all = rec.recommend(users=users, k=len(rec.item_ids) - 1)  # every unseen item, exact score
    for r, user in enumerate(users):
        assert len(out.items[r]) == 5 and set(out.items[r]) <= valid
        assert not set(out.items[r]) & _seen(rec, user) and "[PAD]" not in out.items[r]
        exact = dict(zip(exact_all.items[r], exact_all.scores[r]))
        np.testing.assert_allclose(out.scores[r], [exact[i] for i in out.items[r]], rtol=1e-4, atol=1e-4)
        assert out.scores[r] == sorted(out.scores[r], reverse=True)


def test_beam_serves_histories_and_the_default_beam(rec: Recommender) -> None:
    history = [rec.item_ids[i] for i in (3, 7, 11)]
    out = rec.recommend(histories=[history], k=4, decode="beam")
    assert rec.can_beam and len(out.items[0]) == 4 and not set(out.items[0]) & set(history)
    full = rec.recommend(histories=[history], k=4, decode="beam", beam=len(rec.item_ids) - 1)
    assert full.items == rec.recommend(histories=[history], k=4).items


def test_nan_log_probabilities_raise(rec: Recommender, monkeypatch: pytest.MonkeyPatch) -> None:
    from recframe.metrics.ranking import NonFiniteScoresError

    generate = rec.model.generate

    def broken(history: torch.Tensor, k: int = 10, beam: int = 20):
        found = generate(history, k=k, beam=beam)
        return type(found)(found.items, torch.full_like(found.log_probs, float("nan")))

    monkeypatch.setattr(rec.model, "generate", broken)
    with pytest.raises(NonFiniteScoresError, match=rf"{type(rec.model).__name__}.*{rec.user_ids[2]}"):
        rec.recommend(users=rec.user_ids[1:3], k=3, decode="beam")
