"""The evaluation protocol seen from a model: chunk-size invariance and NaN scores."""

from __future__ import annotations

import lightning as L
import pytest
import torch

from recframe.data.datamodule import RecDataModule
from recframe.metrics.ranking import NonFiniteScoresError
from recframe.models import BPRMF

SYNTH = {"n_users": 120, "n_items": 80, "n_clusters": 3, "mean_length": 15, "seed": 2}


def _test(model: BPRMF, eval_batch_size: int, split: str = "loo") -> dict[str, float]:
    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH, split=split, eval_batch_size=eval_batch_size)
    trainer = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False)
    return trainer.test(model, dm, verbose=False)[0]


@pytest.mark.parametrize("split", ["loo", "ratio"])
def test_metrics_do_not_depend_on_the_evaluation_chunk_size(split: str) -> None:
    torch.manual_seed(0)
    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH)
    model = BPRMF(n_items=dm.n_items, n_users=dm.n_users, dim=8)
    whole = _test(model, 4096, split)
    for size in (1, 7):
        chunked = _test(model, size, split)
        assert chunked.keys() == whole.keys()
        for key, value in whole.items():
            assert chunked[key] == pytest.approx(value, abs=1e-12), key


class _Broken(BPRMF):
    def score(self, batch):
        s = super().score(batch)
        s[0, 3] = float("nan")
        return s


def test_nan_scores_raise_an_error_naming_the_model() -> None:
    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH)
    model = _Broken(n_items=dm.n_items, n_users=dm.n_users, dim=8)
    with pytest.raises(NonFiniteScoresError, match="_Broken"):
        _test(model, 64)
