"""Model selection monitors validation NDCG@10 whatever order the cut-offs are listed in."""

from __future__ import annotations

import lightning as L
import pytest

from recframe.data.datamodule import RecDataModule
from recframe.models import Popularity


@pytest.mark.parametrize("ks", [[5, 10, 20], [20, 10], [5, 20]])
def test_val_ndcg_is_ndcg_at_10_when_computed(ks: list[int]) -> None:
    dm = RecDataModule(dataset="synthetic", synthetic={"n_users": 60, "n_items": 40, "seed": 0}, split="loo",
                       eval_ks=ks)
    trainer = L.Trainer(max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    model = Popularity(n_items=dm.n_items if dm.n_items else 40)
    trainer.fit(model, dm)
    metrics = trainer.validate(model, dm, verbose=False)[0]
    expected = "val/ndcg@10" if 10 in ks else f"val/ndcg@{ks[0]}"
    assert metrics["val_ndcg"] == pytest.approx(metrics[expected])
