"""Faults: a run killed mid-epoch resumes to the uninterrupted result; bad checkpoints are refused.

The kill test runs training in a subprocess, pauses it inside epoch 2 (a
callback writes a marker file and sleeps), sends SIGKILL, and resumes from
``last.ckpt`` (written at the end of epoch 1). The resumed run must end with the
same weights and the same test metrics as a run that was never interrupted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from recframe.checkpoint_io import CheckpointError, atomic_write, load_checkpoint, save_checkpoint
from recframe.cli import run_cli

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "configs" / "smoke" / "sasrec.yaml"
EPOCHS = 4
FLAGS = ["--data.batch_size", "32", "--trainer.max_epochs", str(EPOCHS), "--trainer.enable_progress_bar",
         "false"]

PAUSE_CALLBACK = '''
import time
from pathlib import Path
import lightning as L

class PauseAt(L.Callback):
    """Write ``marker`` after batch ``batch`` of epoch ``epoch``, then sleep until killed."""
    def __init__(self, epoch: int, batch: int, marker: str) -> None:
        self.epoch, self.batch, self.marker = epoch, batch, marker
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.current_epoch == self.epoch and batch_idx == self.batch:
            Path(self.marker).write_text("paused")
            time.sleep(600)
'''


def _fit_and_test(name: str, ckpt: Path | None = None) -> tuple[dict[str, torch.Tensor], dict[str, float]]:
    cli = run_cli(["--config", str(SMOKE), *FLAGS, "--trainer.logger.init_args.name", name], run=False)
    cli.trainer.fit(cli.model, cli.datamodule, ckpt_path=str(ckpt) if ckpt else None)
    last = next(Path("runs", name).glob("version_*/checkpoints/last.ckpt"))
    metrics = cli.trainer.test(cli.model, cli.datamodule, ckpt_path=str(last), verbose=False)[0]
    return load_checkpoint(last)["state_dict"], metrics


def test_sigkill_mid_epoch_then_resume_equals_uninterrupted(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pause_point.py").write_text(PAUSE_CALLBACK)
    marker = tmp_path / "paused.marker"
    (tmp_path / "pause.yaml").write_text(
        "trainer:\n  callbacks:\n    - class_path: pause_point.PauseAt\n"
        f"      init_args: {{epoch: 2, batch: 3, marker: '{marker}'}}\n")
    # one thread, like the in-process runs below (tests/conftest.py): float sums depend on the thread count
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "recframe.cli", "fit", "--config", str(SMOKE), "--config", "pause.yaml",
         *FLAGS, "--trainer.logger.init_args.name", "killed"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            if proc.poll() is not None:
                pytest.fail(f"training exited before the pause point:\n{proc.stderr.read().decode()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail("training did not reach the pause point within 240 s")
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stderr.close()

    last = next(Path("runs", "killed").glob("version_*/checkpoints/last.ckpt"))
    assert load_checkpoint(last)["epoch"] == 1  # epoch 2 was cut short; its work is lost, nothing else
    assert not list(last.parent.glob(".*.tmp")), "a temporary checkpoint file was left behind"

    straight_state, straight_metrics = _fit_and_test("straight")
    resumed_state, resumed_metrics = _fit_and_test("resumed", ckpt=last)
    assert resumed_metrics == straight_metrics  # exact: every printed digit agrees
    for key, value in straight_state.items():
        assert torch.equal(value, resumed_state[key]), key


def test_failed_write_keeps_the_previous_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "last.ckpt"
    save_checkpoint({"epoch": 1, "w": torch.ones(3)}, path)

    def dies_halfway(fh) -> None:
        fh.write(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt  # stands in for a kill between writing and renaming

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, dies_halfway)
    assert load_checkpoint(path)["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["last.ckpt"]


def test_bit_flipped_checkpoint_is_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "flipped.ckpt"
    save_checkpoint({"epoch": 1, "w": torch.arange(4096, dtype=torch.float32)}, path)
    raw = bytearray(path.read_bytes())
    for offset in range(40, len(raw) - 40, max(1, len(raw) // 64)):  # scribble over the archive
        raw[offset] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="flipped.ckpt is truncated or corrupted"):
        load_checkpoint(path)
