"""FLASH: parallel code heads, exact item scoring by one gather, semantic alignment, serving."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from recframe.data.datamodule import RecDataModule
from recframe.models import Popularity
from recframe.models.generative import FLASH
from recframe.models.generative.flash import drop_codes
from recframe.serving import Recommender
from recframe.tokenizers import SimHashTokenizer
from tests.cli_support import fit_smoke

EASY = {"n_users": 200, "n_items": 60, "n_clusters": 3, "mean_length": 20, "seed": 1, "seq_strength": 0.95,
        "dislike_rate": 0.0, "drift": 0.0}


def _built(n_items: int = 12, seed: int = 0, **kwargs) -> FLASH:
    torch.manual_seed(seed)
    model = FLASH(n_items=n_items, dim=16, n_layers=1, n_heads=2, inner=32, max_len=6, **kwargs)
    rng = np.random.default_rng(seed)
    codes = np.concatenate([np.zeros((1, 3), np.int64), rng.integers(0, [4, 4, 2], size=(n_items, 3))])
    model.build_heads(codes, (4, 4, 2))
    return model.eval()


def test_parallel_heads_score_equals_a_slow_per_item_reference() -> None:
    model = _built(align_weight=0.0)
    history = torch.tensor([[0, 0, 3, 5, 1, 7], [2, 4, 6, 8, 10, 12]])
    with torch.no_grad():
        scores = model.score({"history": history})
        h = model.encode(history)[:, -1]
        logits = model.head_logits(h)
    assert torch.isinf(scores[:, 0]).all()
    for b in range(2):
        for item in range(1, 13):
            ref = sum(float(F.log_softmax(logits[level][b], -1)[int(model.codes[item, level])])
                      for level in range(3))
            assert abs(float(scores[b, item]) - ref) < 1e-5


def test_head_logits_are_scaled_cosines() -> None:
    model = _built(align_weight=0.0, scale=7.0)
    h = torch.randn(5, 16)
    logits = model.head_logits(h)
    for level in range(3):
        q, table = model.head_proj[level](h), model.code_emb[level].weight
        cos = F.cosine_similarity(q[:, None], table[None], dim=-1)
        torch.testing.assert_close(logits[level], 7.0 * cos, rtol=1e-5, atol=1e-5)
        assert logits[level].abs().max() <= 7.0 + 1e-5  # |cos| <= 1


def test_scores_form_a_distribution_when_every_code_combination_is_an_item() -> None:
    """With every (c_1, c_2) pair exactly one item, the item scores form a joint distribution (sum 1)."""
    model = FLASH(n_items=6, dim=16, n_layers=1, n_heads=2, inner=32, max_len=4, align_weight=0.0)
    codes = np.array([[0, 0]] + [[a, b] for a in range(3) for b in range(2)])
    model.build_heads(codes, (3, 2))
    with torch.no_grad():
        scores = model.eval().score({"history": torch.tensor([[0, 1, 2, 3]])})
    assert abs(float(torch.logsumexp(scores[0, 1:], 0))) < 1e-5


def test_codebook_dropout_zeroes_whole_code_embeddings_and_rescales_the_rest() -> None:
    torch.manual_seed(0)
    out = drop_codes(torch.ones(20000, 3, 5), 0.25)
    per_code = out[..., 0]
    assert ((out == 0) | torch.isclose(out, torch.tensor(1 / 0.75))).all()
    assert (out == per_code[..., None]).all()  # a code's whole embedding is kept or dropped
    assert abs(float((per_code == 0).float().mean()) - 0.25) < 0.01
    assert abs(float(out.mean()) - 1.0) < 0.02  # inverted dropout keeps the expectation
    assert drop_codes(torch.ones(3, 2, 4), 0.0).eq(1).all()


def test_encode_is_deterministic_in_eval_mode() -> None:
    model = _built(align_weight=0.0, codebook_dropout=0.5)
    history = torch.tensor([[0, 0, 3, 5, 1, 7]])
    with torch.no_grad():
        torch.testing.assert_close(model.encode(history), model.encode(history))


def test_alignment_loss_is_zero_when_the_projection_reproduces_the_content() -> None:
    model = _built(align_weight=1.0)
    reps = model.item_representation(torch.arange(13))
    model.align_proj = torch.nn.Linear(16, 16, bias=False)
    with torch.no_grad():
        model.align_proj.weight.copy_(torch.eye(16) * 3.0)
    model.content = F.normalize(reps.detach(), dim=-1)
    with torch.no_grad():
        assert float(model.alignment_loss(torch.tensor([0, 1, 2, 2, 5]))) == pytest.approx(0.0, abs=1e-6)
    model.content = -model.content  # opposite directions: 1 - cos = 2
    with torch.no_grad():
        assert float(model.alignment_loss(torch.tensor([1, 2, 5]))) == pytest.approx(2.0, abs=1e-6)


def _fit_test(model_cls, epochs: int, **kwargs) -> tuple[float, object, object]:
    L.seed_everything(0)
    dm = RecDataModule(dataset="synthetic", synthetic=EASY, split="loo", max_len=10, window_stride=1,
                       batch_size=64)
    model = model_cls(n_items=dm.n_items, n_users=dm.n_users, **kwargs)
    trainer = L.Trainer(max_epochs=epochs, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, limit_val_batches=0)
    trainer.fit(model, dm)
    return trainer.test(model, dm, verbose=False)[0]["test/ndcg@10"], model, trainer


def test_flash_learns_planted_successors() -> None:
    """Measured (seed 0, 4 epochs): Popularity 0.113, FLASH 0.33."""
    popularity, _, _ = _fit_test(Popularity, 1)
    ndcg, _, _ = _fit_test(
        FLASH, 4, tokenizer=SimHashTokenizer(n_levels=3, bits_per_level=4), features="none",
        max_len=10, dim=32, n_layers=1, n_heads=2, inner=64, lr=5e-3, align_weight=0.1)
    assert ndcg > 1.5 * popularity, (ndcg, popularity)


def test_a_fitted_checkpoint_serves_the_models_own_ranking(tmp_path: Path) -> None:
    cli = fit_smoke("flash.yaml", tmp_path, 1)
    model = cli.model.eval()
    last = next(tmp_path.glob("*/version_*/checkpoints/last.ckpt"))
    rec = Recommender.from_checkpoint(last)  # rebuilt from the stored codes: no tokenizer, no data
    assert rec.index is None
    torch.testing.assert_close(rec.model.codes, model.codes)
    served = rec.recommend(histories=[[rec.item_ids[i] for i in (1, 2, 3)]], k=5)
    with torch.no_grad():
        direct = model.score({"history": torch.tensor([[1, 2, 3]])})
    direct[0, [1, 2, 3]] = float("-inf")  # serving masks the given history
    assert served.items[0] == [rec.item_ids[i] for i in torch.topk(direct[0], 5).indices.tolist()]


@pytest.mark.parametrize("kwargs, key", [
    ({"codebook_dropout": 1.0}, "codebook_dropout"),
    ({"scale": 0.0}, "scale"),
    ({"align_weight": -1.0}, "align_weight"),
    ({"features": "collaborative"}, "features"),
    ({"features": "regularised", "collaborative": "items.npy"}, "features"),
    ({"features": "hybrid", "collaborative": "items.npy", "collab_weight": 2.0}, "collab_weight"),
])
def test_invalid_settings_name_their_key(kwargs: dict, key: str) -> None:
    with pytest.raises(ValueError, match=key):
        FLASH(n_items=10, **kwargs)


def test_scoring_before_build_says_how_to_fix() -> None:
    with pytest.raises(RuntimeError, match="bind_data"):
        FLASH(n_items=10).score({"history": torch.tensor([[1, 2]])})


def _successor_table(train, n_items: int, dim: int = 16) -> np.ndarray:
    """A collaborative item table from interactions alone: each item's row of the next-item count matrix
    (training split, time order per user), reduced by a truncated SVD; row 0 (padding) is zero."""
    order = np.lexsort((train.timestamp, train.user))
    user, item = train.user[order], train.item[order]
    same = user[1:] == user[:-1]
    counts = np.zeros((n_items + 1, n_items + 1))
    np.add.at(counts, (item[:-1][same], item[1:][same]), 1.0)
    u, s, _ = np.linalg.svd(counts[1:, 1:], full_matrices=False)
    table = np.zeros((n_items + 1, dim), np.float32)
    table[1:] = u[:, :dim] * s[:dim]
    return table


def test_collaborative_ids_are_the_simhash_of_the_given_table(tmp_path: Path) -> None:
    dm = RecDataModule(dataset="synthetic", synthetic=EASY, split="loo", max_len=10)
    dm.setup("fit")
    table = _successor_table(dm.split.train, dm.n_items)
    np.save(tmp_path / "items.npy", table)
    hashing = {"n_levels": 3, "bits_per_level": 4, "seed": 3}
    model = FLASH(n_items=dm.n_items, tokenizer=SimHashTokenizer(**hashing), features="collaborative",
                  collaborative=str(tmp_path / "items.npy"), dim=16, n_layers=1, n_heads=2, inner=32)
    model.bind_data(dm.split.train)
    reference = SimHashTokenizer(**hashing).fit(table)  # the same hyperplanes over the same rows
    np.testing.assert_array_equal(model.codes.numpy(), np.asarray(reference.codes))
    expected = F.normalize(torch.as_tensor(table), dim=-1)
    torch.testing.assert_close(model.content, expected)
    with pytest.raises(ValueError, match="needs model.init_args.collaborative"):
        FLASH(n_items=dm.n_items, features="hybrid")


def test_flash_on_collaborative_ids_learns_planted_successors(tmp_path: Path) -> None:
    """IDs hashed from an interaction-only table (no content) still carry the planted successors.
    Measured (seed 0, 4 epochs): Popularity 0.113, FLASH on collaborative IDs 0.93 (on the content IDs of
    the test above, 0.33): a successor table hashes successors apart far better than the features do."""
    dm = RecDataModule(dataset="synthetic", synthetic=EASY, split="loo", max_len=10)
    dm.setup("fit")
    np.save(tmp_path / "items.npy", _successor_table(dm.split.train, dm.n_items))
    popularity, _, _ = _fit_test(Popularity, 1)
    ndcg, model, _ = _fit_test(
        FLASH, 4, tokenizer=SimHashTokenizer(n_levels=3, bits_per_level=4), features="collaborative",
        collaborative=str(tmp_path / "items.npy"), max_len=10, dim=32, n_layers=1, n_heads=2, inner=64,
        lr=5e-3, align_weight=0.1)
    assert model.features == "collaborative"
    assert ndcg > 4 * popularity, (ndcg, popularity)
