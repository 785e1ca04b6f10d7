"""Resuming from last.ckpt gives exactly the run that was never interrupted."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

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


def test_best_score_survives_a_resume_into_a_new_version_directory(tmp_path: Path) -> None:
    """Lightning alone forgets the best score when the directory changes; then a worse epoch would win."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    from recframe.callbacks import BestCheckpoint

    old_dir, new_dir = tmp_path / "version_0" / "checkpoints", tmp_path / "version_1" / "checkpoints"
    best = str(old_dir / "best-epoch=3-val_ndcg=0.2000.ckpt")
    saved = ModelCheckpoint(dirpath=old_dir, monitor="val_ndcg", mode="max")
    saved.best_model_score, saved.best_model_path = torch.tensor(0.2), best
    saved.best_k_models, saved.kth_best_model_path = {best: torch.tensor(0.2)}, best
    saved.kth_value = torch.tensor(0.2)
    state = saved.state_dict()

    plain = ModelCheckpoint(dirpath=new_dir, monitor="val_ndcg", mode="max")
    with pytest.warns(UserWarning, match="dirpath has changed"):
        plain.load_state_dict(state)
    assert plain.best_model_score is None  # the behaviour BestCheckpoint exists to fix

    ours = BestCheckpoint(dirpath=new_dir, monitor="val_ndcg", mode="max")
    assert ours.state_key == plain.state_key  # finds the state a plain ModelCheckpoint wrote
    ours.load_state_dict(state)
    assert ours.best_model_path == best and float(ours.best_model_score) == pytest.approx(0.2)
    assert ours.best_k_models == {best: torch.tensor(0.2)} and ours.dirpath == str(new_dir)
    # a worse validation after the resume does not replace the restored best
    one_process = SimpleNamespace(strategy=SimpleNamespace(reduce_boolean_decision=lambda d, all=True: d))
    assert not ours.check_monitor_top_k(one_process, torch.tensor(0.1))
    assert ours.check_monitor_top_k(one_process, torch.tensor(0.3))
