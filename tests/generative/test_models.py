"""TIGER and the decoder-only model end to end: train, rank exactly, beam-search, checkpoint, serve."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch

from recframe.data.datamodule import RecDataModule
from recframe.models import Popularity
from recframe.models.generative import FLASH, TIGER, SIDDecoder, TrieRec
from recframe.serving import Recommender
from recframe.tokenizers import RQKMeansTokenizer
from tests.cli_support import fit_smoke

SYNTH = {"n_users": 300, "n_items": 150, "n_clusters": 5, "mean_length": 25, "seed": 1}


@pytest.mark.parametrize("config", ["tiger.yaml", "sid_decoder.yaml"])
def test_fit_checkpoint_serve_and_beam_equals_exact(config: str, tmp_path: Path) -> None:
    cli = fit_smoke(config, tmp_path, 2)
    model, dm = cli.model.eval(), cli.datamodule
    batch = dm.eval_set("test").batch(list(range(32)), max_len=dm.max_len)
    with torch.no_grad():
        scores = model.score(batch)
        beam = model.generate(batch["history"], k=5, beam=model.trie.n_items)  # a full beam is exact
    assert torch.isinf(scores[:, 0]).all() and torch.isfinite(scores[:, 1:]).all()
    assert torch.logsumexp(scores[:, 1:], 1).le(1e-4).all()  # path probabilities sum to at most 1
    torch.testing.assert_close(torch.gather(scores, 1, beam.items), beam.log_probs, rtol=1e-4, atol=1e-4)
    assert (torch.topk(scores, 5).values - beam.log_probs).abs().max() < 1e-4

    last = next(tmp_path.glob("*/version_*/checkpoints/last.ckpt"))
    rec = Recommender.from_checkpoint(last)  # rebuilt from the stored codes: no tokenizer, no data
    assert rec.index is None
    torch.testing.assert_close(rec.model.backbone.codes, model.backbone.codes)
    user = rec.user_ids[1]
    history = [rec.item_ids[i] for i in rec.seen_items[rec.seen_indptr[1] : rec.seen_indptr[2]]]
    by_user = rec.recommend(users=[user], k=5)
    by_history = rec.recommend(histories=[history], k=5)
    assert by_user.items == by_history.items and len(by_user.items[0]) == 5


def _fit_test(model_cls, epochs: int, synthetic: dict | None = None, window_stride: int | None = None,
              **kwargs) -> float:
    L.seed_everything(0)
    dm = RecDataModule(dataset="synthetic", synthetic=synthetic or SYNTH, split="loo", max_len=10,
                       window_stride=window_stride, batch_size=64)
    model = model_cls(n_items=dm.n_items, n_users=dm.n_users, **kwargs)
    trainer = L.Trainer(
        max_epochs=epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    )
    trainer.fit(model, dm)
    return trainer.test(model, dm, verbose=False)[0]["test/ndcg@10"]


# strong planted successors, no dislikes or drift: a signal a tiny model finds in a few epochs
EASY = {"n_users": 200, "n_items": 60, "n_clusters": 3, "mean_length": 20, "seed": 1, "seq_strength": 0.95,
        "dislike_rate": 0.0, "drift": 0.0}


def test_tiger_learns_planted_successors_quickly() -> None:
    """Runs by default (seconds). Measured (seed 0, 3 epochs, a training window at every position):
    Popularity 0.113, TIGER 0.361; on synthetic seed 2, 0.251 and 0.419."""
    popularity = _fit_test(Popularity, 1, synthetic=EASY)
    ndcg = _fit_test(TIGER, 3, synthetic=EASY, window_stride=1,
                     tokenizer=RQKMeansTokenizer(n_levels=2, codebook_size=8), features="none", max_len=10,
                     dim=32, n_layers=1, n_heads=2, inner=64, lr=5e-3)
    assert ndcg > 1.5 * popularity, (ndcg, popularity)


@pytest.mark.slow
@pytest.mark.parametrize("model_cls", [TIGER, SIDDecoder])
@pytest.mark.parametrize("trierec", [False, True])
def test_generative_models_learn_the_planted_sequences(model_cls, trierec: bool) -> None:
    """Measured (seed 0, 20 epochs): Popularity 0.131; TIGER 0.322 / 0.333 with TrieRec;
    decoder-only 0.243 / 0.303 with TrieRec."""
    popularity = _fit_test(Popularity, 1)
    ndcg = _fit_test(
        model_cls,
        20,
        tokenizer=RQKMeansTokenizer(n_levels=2, codebook_size=8),
        features="none",
        max_len=10,
        dim=32,
        n_layers=1,
        n_heads=2,
        inner=64,
        lr=5e-3,
        addons=[TrieRec()] if trierec else None,
    )
    assert ndcg > 1.5 * popularity


def test_recommender_serves_a_checkpoint_written_with_the_former_trierec_flag(tmp_path: Path) -> None:
    """A full training checkpoint rewritten to the pre-add-on format (``trierec: true``, TrieRec tables under
    ``backbone.abs_enc/rel_bias``) is served without a manual migration, with the same recommendations."""
    from recframe.checkpoint_io import load_checkpoint, save_checkpoint

    fit_smoke("tiger.yaml", tmp_path, 1, "--model.init_args.addons",
              '[{"class_path": "recframe.models.generative.TrieRec"}]')
    last = next(tmp_path.glob("*/version_*/checkpoints/last.ckpt"))
    ckpt = load_checkpoint(last)
    ckpt["hyper_parameters"].pop("addons")
    ckpt["hyper_parameters"]["trierec"] = True
    state = ckpt["state_dict"]
    ckpt["state_dict"] = {k.replace("backbone.addons.0.", "backbone."): v for k, v in state.items()}
    assert any(k.startswith("backbone.abs_enc.") for k in ckpt["state_dict"])
    old = tmp_path / "old_format.ckpt"
    save_checkpoint(ckpt, old)
    new_rec, old_rec = Recommender.from_checkpoint(last), Recommender.from_checkpoint(old)
    assert [type(a) for a in old_rec.model.backbone.addons] == [TrieRec]
    users = list(new_rec.user_ids[1:6])
    assert old_rec.recommend(users=users, k=5).items == new_rec.recommend(users=users, k=5).items


def test_tokenizer_inputs_collaborative_hybrid_and_regularised(tmp_path: Path) -> None:
    """Collaborative, hybrid and LETTER-regularised IDs from a collaborative table (.npy), with errors."""
    import numpy as np

    from recframe.data.datamodule import RecDataModule
    from recframe.tokenizers import RQVAETokenizer

    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH, split="loo", max_len=10)
    dm.setup("fit")
    table = np.random.default_rng(0).normal(size=(dm.n_items + 1, 8)).astype(np.float32)
    table[0] = 0
    np.save(tmp_path / "items.npy", table)
    small = {"n_levels": 2, "codebook_size": 8}
    collab = TIGER(n_items=dm.n_items, tokenizer=RQKMeansTokenizer(**small), features="collaborative",
                   collaborative=str(tmp_path / "items.npy"), dim=16, n_heads=2, inner=32)
    np.testing.assert_array_equal(collab.item_matrix(dm.split.train), table)
    hybrid = TIGER(n_items=dm.n_items, tokenizer=RQKMeansTokenizer(**small), features="hybrid",
                   collaborative=str(tmp_path / "items.npy"), collab_weight=0.25)
    matrix = hybrid.item_matrix(dm.split.train)
    assert matrix.shape[1] > table.shape[1]  # content block + collaborative block
    np.testing.assert_allclose(np.linalg.norm(matrix[1:, -8:], axis=1), 0.5, atol=1e-5)  # sqrt(0.25)
    regularised = TIGER(n_items=dm.n_items, tokenizer=RQVAETokenizer(**small, epochs=2, collab_weight=0.5),
                        features="regularised", collaborative=str(tmp_path / "items.npy"), dim=16, n_heads=2,
                        inner=32)
    regularised.bind_data(dm.split.train)
    assert regularised.tokenizer.collaborative_fingerprint_ is not None
    with pytest.raises(ValueError, match="needs a tokenizer that learns from a collaborative matrix"):
        TIGER(n_items=dm.n_items, tokenizer=RQKMeansTokenizer(**small), features="regularised",
              collaborative=str(tmp_path / "items.npy")).bind_data(dm.split.train)
    with pytest.raises(ValueError, match="needs model.init_args.collaborative"):
        TIGER(n_items=dm.n_items, features="collaborative")


def test_hybrid_ids_can_take_the_metadata_features_as_their_content_block(tmp_path: Path) -> None:
    """``hybrid_content: none``: the hybrid's content block is the metadata features (Amazon's attribute
    multi-hot), each block L2-normalised with squared norms 1 - w : w (a hand check against both blocks)."""
    import numpy as np

    from recframe.features import item_content_features

    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH, split="loo", max_len=10)
    dm.setup("fit")
    table = np.random.default_rng(1).normal(size=(dm.n_items + 1, 6)).astype(np.float32)
    table[0] = 0
    np.save(tmp_path / "items.npy", table)
    for model_class in (TIGER, FLASH):
        model = model_class(n_items=dm.n_items, features="hybrid", hybrid_content="none",
                            collaborative=str(tmp_path / "items.npy"), collab_weight=0.36)
        matrix = model.item_matrix(dm.split.train)
        meta = item_content_features(dm.split.train.item_features, encoder="none")
        assert matrix.shape == (dm.n_items + 1, meta.shape[1] + 6)
        rows = np.linalg.norm(meta[1:], axis=1) > 0
        want_meta = meta[1:][rows] / np.linalg.norm(meta[1:][rows], axis=1, keepdims=True) * 0.8  # sqrt(.64)
        np.testing.assert_allclose(matrix[1:, : meta.shape[1]][rows], want_meta, atol=1e-5)
        want_collab = table[1:] / np.linalg.norm(table[1:], axis=1, keepdims=True) * 0.6  # sqrt(.36)
        np.testing.assert_allclose(matrix[1:, meta.shape[1]:], want_collab, atol=1e-5)
    with pytest.raises(ValueError, match="hybrid_content='none' sets the content block of features: hybrid"):
        TIGER(n_items=dm.n_items, features="collaborative", collaborative=str(tmp_path / "items.npy"),
              hybrid_content="none")
    with pytest.raises(ValueError, match="hybrid_content must be one of"):
        TIGER(n_items=dm.n_items, features="hybrid", collaborative=str(tmp_path / "items.npy"),
              hybrid_content="bag")
