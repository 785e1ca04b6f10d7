"""What the model tests share: the planted synthetic set, a fit-then-test run on it, and the
config schema check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import pytest

from recframe.cli import main
from recframe.data.datamodule import RecDataModule

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
#: planted item clusters: a model that reads the sequence beats Popularity by a wide margin
SYNTH = {"n_users": 300, "n_items": 150, "n_clusters": 5, "mean_length": 25, "seed": 1}


def fit_and_test_on_planted(model_cls: type[L.LightningModule], epochs: int, split: str = "loo",
                            **kwargs: Any) -> dict[str, float]:
    """Train ``model_cls(**kwargs)`` on :data:`SYNTH` (``split``, seed 0, no validation) and test it."""
    L.seed_everything(0)
    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH, split=split, max_len=25, batch_size=256)
    model = model_cls(n_items=dm.n_items, n_users=dm.n_users, **kwargs)
    trainer = L.Trainer(max_epochs=epochs, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        limit_val_batches=0)
    trainer.fit(model, dm)
    return trainer.test(model, dm, verbose=False)[0]


def assert_config_validates(config: str, class_name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``configs/<config>`` passes ``recframe fit --print_config`` (schema only) naming ``class_name``."""
    with pytest.raises(SystemExit) as exc:  # --print_config validates and exits before touching data
        main(["fit", "--config", str(CONFIGS / config), "--print_config"])
    assert exc.value.code in (0, None)
    assert f"class_path: recframe.models.{class_name}" in capsys.readouterr().out
