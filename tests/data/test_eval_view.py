"""EvaluationView: the loader's batches, raw and dense ids, read-only, and callbacks reading only it."""

from __future__ import annotations

import lightning as L
import numpy as np
import pytest
import torch

from causal_ext.abstraction.callback import GenreHistogramCAE
from causal_ext.parents.callback import IndRMFeatureReport
from recframe.data.datamodule import RecDataModule
from recframe.data.eval_view import EvaluationView
from recframe.data.interactions import DataError, ItemFeatures

SYNTHETIC = {"n_users": 120, "n_items": 150, "n_clusters": 3, "mean_length": 15, "seed": 0}


def _datamodule(**kw) -> RecDataModule:
    kw = {"split": "ratio", "max_len": 8, "eval_batch_size": 32, **kw}
    return RecDataModule(dataset="synthetic", synthetic=SYNTHETIC, **kw)


@pytest.mark.parametrize("split", ["loo", "ratio"])
@pytest.mark.parametrize("stage", ["valid", "test"])
def test_batches_are_the_eval_loader_batches(split: str, stage: str) -> None:
    dm = _datamodule(split=split)
    loader = dm.val_dataloader() if stage == "valid" else dm.test_dataloader()
    view = dm.eval_view(stage)
    expected, got = list(loader), list(view.batches())
    assert len(got) == len(expected) > 1
    for a, b in zip(expected, got, strict=True):
        assert a.keys() == b.keys() == {"users", "history", "seen", "targets", "labels"}
        for k in a:
            assert a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]), k
    # other sizes and lengths: the loader of a datamodule with those settings
    other = _datamodule(split=split, max_len=3, eval_batch_size=50)
    loader = other.val_dataloader() if stage == "valid" else other.test_dataloader()
    for a, b in zip(loader, view.batches(max_len=3, size=50), strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_users_histories_and_targets_raw_and_dense() -> None:
    dm = _datamodule()
    sp, view = dm.split, dm.eval_view("test")
    assert (view.stage, view.n_items, view.n_users, len(view)) == ("test", dm.n_items, dm.n_users,
                                                                    len(dm.eval_set("test").users))
    known = sp.train.concat(sp.valid)
    u = int(view.users[3])
    assert view.raw_users[3] == sp.train.user_ids[u]
    np.testing.assert_array_equal(view.history(u), known.histories.of(u))
    np.testing.assert_array_equal(view.history(u, raw=True), sp.train.item_ids[known.histories.of(u)])
    items, labels = view.targets(u)
    lo, hi = sp.test.histories.indptr[u], sp.test.histories.indptr[u + 1]
    np.testing.assert_array_equal(items, sp.test.histories.items[lo:hi])
    np.testing.assert_array_equal(labels, sp.test.histories.labels[lo:hi])
    assert set(np.unique(labels)) <= {-1, 0, 1}
    np.testing.assert_array_equal(view.targets(u, raw=True)[0], sp.train.item_ids[items])
    np.testing.assert_array_equal(view.item_popularity, sp.train.item_popularity())
    assert view.item_features.categories[1] == tuple(sp.train.item_features.categories[1])
    valid = dm.eval_view("valid")
    np.testing.assert_array_equal(valid.history(u), sp.train.histories.of(u))


def test_the_view_is_read_only_and_leaves_the_datamodule_writable() -> None:
    dm = _datamodule()
    view = dm.eval_view("test")
    arrays = [view.users, view.raw_users, view.histories.items, view.histories.indptr, view.heldout.labels,
              view.item_ids, view.item_popularity, view.item_features.year]
    for arr in arrays:
        with pytest.raises(ValueError, match="read-only"):
            arr[0] = arr[1]
    with pytest.raises(ValueError, match="read-only"):
        view.history(int(view.users[0]))[0] = 1
    with pytest.raises(TypeError):
        view.item_features.categories[1][0] = "x"  # type: ignore[index]
    with pytest.raises(AttributeError, match="read-only"):
        view.users = np.zeros(3, dtype=np.int64)
    with pytest.raises(AttributeError):
        view.item_features.year = None  # type: ignore[misc]
    # batches are fresh copies: changing one changes neither the view nor the next batches
    first = next(view.batches())
    first["history"].zero_()
    assert next(view.batches())["history"].any()
    # the datamodule's own arrays keep their flags
    assert dm.split.train.item.flags.writeable and dm.split.train.item_features.year.flags.writeable
    with pytest.raises(DataError, match="stage must be 'valid' or 'test'"):
        dm.eval_view("train")  # type: ignore[arg-type]
    with pytest.raises(DataError, match="size >= 1"):
        next(view.batches(size=0))


class PlantedView(RecDataModule):
    """Offers callbacks a view whose item features are ``planted``, not those of ``split``."""

    planted: ItemFeatures

    def eval_view(self, stage):  # type: ignore[override]
        view = super().eval_view(stage)
        return EvaluationView(stage, self.eval_set(stage), n_items=self.n_items, n_users=self.n_users,
                              max_len=self.max_len, batch_size=self.eval_batch_size,
                              user_ids=self.split.train.user_ids, item_ids=view.item_ids,
                              item_features=self.planted, item_popularity=view.item_popularity)


def test_the_causal_callbacks_read_the_view() -> None:
    """IndRM selects a feature only the view has; the CAE takes its genres from the view's categories."""
    from causal_ext.abstraction.callback import primary_genres
    from causal_ext.abstraction.reference_models import GenreScorer
    from tests.causal.parents.test_callback import PlantedScores

    dm = PlantedView(dataset="synthetic", synthetic=SYNTHETIC, split="loo", max_len=8)
    n = dm.n_items
    rng = np.random.default_rng(0)
    planted = np.r_[0.0, rng.normal(size=n)]
    dm.planted = ItemFeatures(categories=[[]] + [[f"g{i % 3}"] for i in range(1, n + 1)],
                              extra={"planted": planted, "noise": rng.normal(size=n + 1)})
    scores = np.r_[0.0, 3.0 * planted[1:] + rng.uniform(-0.1, 0.1, n)]
    indrm = IndRMFeatureReport(indrm={"search": "exhaustive"}, max_categories=0)
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[indrm])
    trainer.test(PlantedScores(scores), dm, verbose=False)
    assert indrm.report_["features"] == ["noise", "planted"] and indrm.report_["parents"] == ["planted"]

    genre, names = primary_genres(dm.planted, n, max_genres=3)
    assert sorted(names) == ["g0", "g1", "g2", "other"]
    cae = GenreHistogramCAE(n_interventions=5, max_genres=3, max_histories=40)
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cae])
    trainer.test(GenreScorer(genre, "histogram"), dm, verbose=False)
    assert cae.report_["genres"] == names and cae.report_["n_histories"] == 40
    assert names != primary_genres(dm.split.train.item_features, n, max_genres=3)[1]
