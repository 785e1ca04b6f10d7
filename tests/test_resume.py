"""Resuming from last.ckpt gives exactly the run that was never interrupted."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from recframe.checkpoint_io import load_checkpoint
from recframe.cli import run_cli

SMOKE = Path(__file__).resolve().parent.parent / "configs" / "smoke"


def _fit(config: str, name: str, epochs: int, ckpt: Path | None = None) -> Path:
    args = ["fit", "--config", str(SMOKE / config), "--trainer.max_epochs", str(epochs),
            "--trainer.enable_progress_bar", "false", "--trainer.logger.init_args.name", name]
    if ckpt is not None:
        args += ["--ckpt_path", str(ckpt)]
    run_cli(args)
    return next(Path("runs", name).glob("version_*/checkpoints/last.ckpt"))


@pytest.mark.parametrize("config", ["sasrec.yaml", "bprmf.yaml"])  # dropout + shuffling; negatives
def test_stop_and_resume_equals_uninterrupted(config: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    straight = load_checkpoint(_fit(config, "straight", 4))
    half = _fit(config, "half", 2)
    assert load_checkpoint(half)["epoch"] == 1
    resumed = load_checkpoint(_fit(config, "resumed", 4, ckpt=half))
    assert resumed["epoch"] == straight["epoch"] == 3
    for key, value in straight["state_dict"].items():
        assert torch.equal(value, resumed["state_dict"][key]), key
