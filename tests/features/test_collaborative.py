"""Collaborative item tables (trained in-process, cached) and the text + CF hybrid.

One tiny SASRec run on the synthetic data (``configs/smoke/sasrec_item_table.yaml``, a few seconds) is
shared by the module; everything else is either a cache hit or fails before training.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from recframe.data.datamodule import RecDataModule
from recframe.data.synthetic import make_synthetic
from recframe.features import collaborative as co
from recframe.features import collaborative_item_embeddings, hybrid_item_features
from tests.kill_callbacks import KilledAtEpoch

CONFIG = Path("configs/smoke/sasrec_item_table.yaml")
SYNTH = {"n_users": 200, "n_items": 120, "n_clusters": 4, "mean_length": 20, "seed": 0}  # as in CONFIG


def _train(**overrides):
    return RecDataModule(dataset="synthetic", synthetic={**SYNTH, **overrides}, max_len=20).split.train


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """``(train, cache_dir, table, rng draws right after the call, rng draws had there been no call)``."""
    cache = tmp_path_factory.mktemp("collab")
    train = _train()
    torch.manual_seed(123)
    np.random.seed(123)
    random.seed(123)
    table = collaborative_item_embeddings(train, CONFIG, seed=0, cache_dir=cache)
    after = (torch.rand(3), np.random.rand(3), random.random())
    torch.manual_seed(123)
    np.random.seed(123)
    random.seed(123)
    untouched = (torch.rand(3), np.random.rand(3), random.random())
    return train, cache, table, after, untouched


# ----------------------------------------------------------------- hybrid
@pytest.mark.parametrize("w", [0.0, 0.25, 0.5, 1.0])
def test_hybrid_block_norms_split_as_weight(w):
    rng = np.random.default_rng(0)
    text = np.vstack([np.zeros(5), rng.normal(size=(6, 5))])
    collab = np.vstack([np.zeros(3), 7.0 * rng.normal(size=(6, 3))])
    h = hybrid_item_features(text, collab, collab_weight=w)
    assert h.shape == (7, 8) and h.dtype == np.float32
    assert np.all(h[0] == 0)
    np.testing.assert_allclose((h[1:, :5] ** 2).sum(1), 1 - w, atol=1e-6)
    np.testing.assert_allclose((h[1:, 5:] ** 2).sum(1), w, atol=1e-6)
    # the blocks keep their directions
    if 0 < w < 1:
        unit = collab[1:] / np.linalg.norm(collab[1:], axis=1, keepdims=True)
        np.testing.assert_allclose(h[1:, 5:] / np.sqrt(w), unit, atol=1e-6)


def test_hybrid_distance_is_the_weighted_sum_of_block_distances():
    rng = np.random.default_rng(1)
    t = np.vstack([np.zeros(4), rng.normal(size=(2, 4))])
    c = np.vstack([np.zeros(6), rng.normal(size=(2, 6))])
    h = hybrid_item_features(t, c, 0.3)
    tu = t[1:] / np.linalg.norm(t[1:], axis=1, keepdims=True)
    cu = c[1:] / np.linalg.norm(c[1:], axis=1, keepdims=True)
    want = 0.7 * ((tu[0] - tu[1]) ** 2).sum() + 0.3 * ((cu[0] - cu[1]) ** 2).sum()
    assert ((h[1] - h[2]) ** 2).sum() == pytest.approx(want, rel=1e-5)


@pytest.mark.parametrize("kwargs, match", [
    ({"collab_weight": 1.5}, "collab_weight"),
    ({"collab_weight": -0.1}, "collab_weight"),
    ({"collab": np.zeros((4, 2))}, "text has 2 items but collab 3"),
])
def test_hybrid_refuses_bad_input(kwargs, match):
    ok = np.vstack([np.zeros(2), np.ones((2, 2))])
    args = {"text": ok, "collab": ok, **kwargs}
    with pytest.raises(ValueError, match=match):
        hybrid_item_features(**args)


# ------------------------------------------------------ collaborative table
def test_table_from_a_real_run_holds_the_planted_clusters(trained):
    train, cache, table, _, _ = trained
    assert table.shape == (train.n_items + 1, 32) and table.dtype == np.float32
    assert np.all(table[0] == 0) and np.isfinite(table).all()
    cluster = make_synthetic(**SYNTH).item_cluster
    assert len(cluster) == train.n_items + 1
    unit = table[1:] / np.linalg.norm(table[1:], axis=1, keepdims=True)
    sim = unit @ unit.T
    same = cluster[1:, None] == cluster[None, 1:]
    off_diag = ~np.eye(len(sim), dtype=bool)
    # ten epochs pull items of one cluster together (measured: mean cosine 0.11 within, -0.03 across)
    assert sim[same & off_diag].mean() > sim[~same].mean() + 0.07
    info = co.read_run_info(train, CONFIG, 0, cache)
    assert info is not None and info["model"] == "recframe.models.SASRec"
    assert 2 <= info["epochs"] <= 10 and 1 <= info["best_epoch"] < info["epochs"]
    assert 0.3 < info["best_val_ndcg"] <= 1  # measured 0.555
    assert info["train_fingerprint"] == train.fingerprint


def test_nested_run_leaves_the_global_random_state_alone(trained):
    _, _, _, after, untouched = trained
    assert torch.equal(after[0], untouched[0])
    assert np.array_equal(after[1], untouched[1]) and after[2] == untouched[2]


def test_cache_hit_is_identical_and_does_not_train(trained, monkeypatch, tmp_path):
    train, cache, table, _, _ = trained

    def boom(*a, **k):
        raise AssertionError("retrained on a cache hit")

    monkeypatch.setattr(co, "train_item_table", boom)
    again = collaborative_item_embeddings(train, CONFIG, seed=0, cache_dir=cache)
    assert np.array_equal(again, table)
    # the key is the config's text, not its path: a copy elsewhere hits the same file
    copy = tmp_path / "elsewhere.yaml"
    shutil.copy(CONFIG, copy)
    assert np.array_equal(collaborative_item_embeddings(train, copy, seed=0, cache_dir=cache), table)
    assert co.collaborative_cache_path(train, copy, 0, cache) == \
        co.collaborative_cache_path(train, CONFIG, 0, cache)


def test_cache_key_covers_seed_config_and_data(trained, monkeypatch, tmp_path):
    train, cache, _, _, _ = trained
    calls = []

    def fake(config, seed=0, expected_train=None, work_dir=None):
        calls.append((str(config), seed))
        return np.zeros((train.n_items + 1, 2), dtype=np.float32), {"best_epoch": 0}

    monkeypatch.setattr(co, "train_item_table", fake)
    collaborative_item_embeddings(train, CONFIG, seed=1, cache_dir=cache)  # other seed: trains
    edited = tmp_path / "edited.yaml"
    edited.write_text(CONFIG.read_text() + "\n# edited\n")
    collaborative_item_embeddings(train, edited, seed=0, cache_dir=cache)  # other text: trains
    collaborative_item_embeddings(train, CONFIG, seed=1, cache_dir=cache)  # now cached
    collaborative_item_embeddings(train, CONFIG, cache_dir=tmp_path / "x", cache=False)  # no cache: trains
    assert calls == [(str(CONFIG), 1), (str(edited), 0), (str(CONFIG), 0)]
    assert not (tmp_path / "x").exists()
    keys = {co.collab_cache_key("a", 0, "f", "M"), co.collab_cache_key("a", 1, "f", "M"),
            co.collab_cache_key("a", 0, "g", "M"), co.collab_cache_key("a", 0, "f", "N"),
            co.collab_cache_key("b", 0, "f", "M")}
    assert len(keys) == 5


def test_killed_table_run_resumes_to_the_uninterrupted_table(trained, monkeypatch, tmp_path, caplog):
    train, _, table, _, _ = trained
    cache = tmp_path / "cache"
    import recframe.cli as cli_module  # train_item_table imports run_cli from it when it runs

    original = cli_module.run_cli

    def killed_after_two_epochs(*args, **kwargs):
        cli = original(*args, **kwargs)
        cli.trainer.callbacks.append(KilledAtEpoch(2))
        return cli

    monkeypatch.setattr(cli_module, "run_cli", killed_after_two_epochs)
    with pytest.raises(RuntimeError, match="killed"):
        collaborative_item_embeddings(train, CONFIG, seed=0, cache_dir=cache)
    work = co.collaborative_cache_path(train, CONFIG, 0, cache).with_suffix(".run")
    assert (work / "checkpoints" / "last.ckpt").is_file()
    assert not co.collaborative_cache_path(train, CONFIG, 0, cache).exists()

    monkeypatch.setattr(cli_module, "run_cli", original)
    with caplog.at_level("INFO", logger="recframe.features"):
        resumed = collaborative_item_embeddings(train, CONFIG, seed=0, cache_dir=cache)
    assert any("resuming" in r.getMessage() for r in caplog.records)
    info = co.read_run_info(train, CONFIG, 0, cache)
    assert info["resumed_from_epoch"] == 1
    assert info["epochs"] == co.read_run_info(train, CONFIG, 0, trained[1])["epochs"]
    np.testing.assert_allclose(resumed, table, rtol=0, atol=1e-6)
    assert not work.exists()  # the run folder goes once the table is cached


def test_other_training_data_is_refused_naming_both_fingerprints(tmp_path):
    other = _train(seed=1)
    mine = _train().fingerprint
    with pytest.raises(ValueError, match=f"fingerprint {mine}.*fingerprint {other.fingerprint}"):
        collaborative_item_embeddings(other, CONFIG, seed=0, cache_dir=tmp_path)
    assert not list(tmp_path.iterdir())


def test_bad_configs_are_refused(tmp_path):
    train = _train()
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        collaborative_item_embeddings(train, tmp_path / "nope.yaml", cache_dir=tmp_path)
    no_model = tmp_path / "no_model.yaml"
    no_model.write_text("data: {dataset: synthetic}\n")
    with pytest.raises(ValueError, match="model.class_path"):
        collaborative_item_embeddings(train, no_model, cache_dir=tmp_path)
    pop = tmp_path / "pop.yaml"
    pop.write_text(Path("configs/smoke/popularity.yaml").read_text())
    with pytest.raises(ValueError, match="no item_embeddings"):
        co.train_item_table(pop, 0)


def test_adopted_run_gives_the_trained_table_without_training(trained, monkeypatch, tmp_path, in_tmp):
    """`recframe fit --config CONFIG --seed_everything 0 --trainer.max_time null`, adopted, is a cache hit
    equal (same process, same thread count) to the table the in-process training produced."""
    from recframe.cli import run_cli

    train, _, table, _, _ = trained
    config = Path(__file__).resolve().parents[2] / CONFIG
    cli = run_cli(["--config", str(config), "--seed_everything", "0", "--trainer.max_time", "null",
                   "--trainer.default_root_dir", str(tmp_path), "--trainer.logger.init_args.save_dir",
                   str(tmp_path / "runs")], run=False)
    cli.trainer.fit(cli.model, cli.datamodule)
    best = cli.trainer.checkpoint_callback.best_model_path
    cache = tmp_path / "cache"
    path = co.adopt_item_table(config, best, seed=0, run_info={"train_seconds": 1.0}, cache_dir=cache)
    assert path == co.collaborative_cache_path(train, config, 0, cache)

    def boom(*a, **k):
        raise AssertionError("retrained although the run was adopted")

    monkeypatch.setattr(co, "train_item_table", boom)
    adopted = collaborative_item_embeddings(train, config, seed=0, cache_dir=cache)
    np.testing.assert_allclose(adopted, table, rtol=0, atol=1e-6)
    info = co.read_run_info(train, config, 0, cache)
    assert info["adopted_from"] == Path(best).name and info["train_seconds"] == 1.0


def test_adopting_a_checkpoint_of_another_model_is_refused(tmp_path, in_tmp):
    from recframe.cli import run_cli

    config = Path(__file__).resolve().parents[2] / "configs/smoke/popularity.yaml"
    cli = run_cli(["--config", str(config), "--trainer.default_root_dir", str(tmp_path),
                   "--trainer.logger", "false"], run=False)
    cli.trainer.fit(cli.model, cli.datamodule)
    ckpt = cli.trainer.checkpoint_callback.best_model_path or cli.trainer.checkpoint_callback.last_model_path
    sasrec = Path(__file__).resolve().parents[2] / CONFIG
    with pytest.raises(ValueError, match="Popularity"):
        co.adopt_item_table(sasrec, ckpt, seed=0, cache_dir=tmp_path / "cache")
    with pytest.raises(FileNotFoundError, match="missing.ckpt"):
        co.adopt_item_table(sasrec, tmp_path / "missing.ckpt", cache_dir=tmp_path / "cache")


def test_exported_table_imports_into_an_empty_cache_as_a_hit(trained, monkeypatch, tmp_path):
    """A cached table exported (to a results folder) and imported into an empty cache is read, not
    retrained, by the same config on the same training split, and equals the original exactly."""
    train, cache, table, _, _ = trained
    stored = co.stored_tables(CONFIG, cache)
    assert 0 in stored
    kept = co.export_item_table(stored[0], tmp_path / "kept" / "SASRec__seed0.npy")
    fresh = tmp_path / "fresh"
    path = co.import_item_table(CONFIG, kept, cache_dir=fresh)
    assert path == co.collaborative_cache_path(train, CONFIG, 0, fresh)

    def boom(*a, **k):
        raise AssertionError("retrained although the table was imported")

    monkeypatch.setattr(co, "train_item_table", boom)
    imported = collaborative_item_embeddings(train, CONFIG, seed=0, cache_dir=fresh)
    np.testing.assert_array_equal(imported, table)
    assert co.read_run_info(train, CONFIG, 0, fresh)["imported_from"] == "SASRec__seed0.npy"
    # another training split has another fingerprint, so it does not take the imported table
    assert not co.collaborative_cache_path(_train(seed=1), CONFIG, 0, fresh).exists()


def test_importing_a_table_of_an_edited_config_is_refused(trained, tmp_path):
    _, cache, _, _, _ = trained
    kept = co.export_item_table(co.stored_tables(CONFIG, cache)[0], tmp_path / "SASRec__seed0.npy")
    edited = tmp_path / "edited.yaml"
    edited.write_text(CONFIG.read_text() + "\n# edited\n")
    with pytest.raises(ValueError, match="another version"):
        co.import_item_table(edited, kept, cache_dir=tmp_path / "c")
    with pytest.raises(FileNotFoundError, match="missing.npy"):
        co.import_item_table(CONFIG, tmp_path / "missing.npy", cache_dir=tmp_path / "c")
