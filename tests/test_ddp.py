"""DDP on 2 CPU processes (gloo) trains and evaluates like one process.

Rank ``r`` takes positions ``r, r + 2, ...`` of every global batch
(:class:`recframe.data.datamodule.EpochShuffle`), losses are rescaled to the
global-batch mean (``RecModel._global_batch_mean``) and evaluation sums are
added across ranks before metrics are computed. So 2 processes with batch 32
each follow one process with batch 64: same weights to float tolerance, same
metrics. Dropout is off because each rank draws its own dropout masks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "configs" / "smoke" / "sasrec.yaml"

DRIVER = '''
import json, sys
import torch
from recframe.cli import run_cli

out, devices, batch = sys.argv[1], sys.argv[2], sys.argv[3]
cli = run_cli(["--config", sys.argv[4], "--model.init_args.dropout", "0",
               "--model.init_args.attn_dropout", "0",
               "--data.batch_size", batch, "--trainer.max_epochs", "3", "--trainer.accelerator", "cpu",
               "--trainer.devices", devices, "--trainer.strategy", "ddp" if devices != "1" else "auto",
               "--trainer.enable_progress_bar", "false", "--trainer.logger.init_args.name", "ddp" + devices],
              run=False)
cli.trainer.fit(cli.model, cli.datamodule)
metrics = cli.trainer.test(cli.model, cli.datamodule, verbose=False)[0]
if cli.trainer.global_rank == 0:
    torch.save(cli.model.state_dict(), out + ".pt")
    with open(out + ".json", "w") as fh:
        json.dump({"metrics": metrics, "world": cli.trainer.world_size}, fh)
'''


def _run(tmp_path: Path, devices: int, batch: int) -> tuple[dict, dict]:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = tmp_path / f"out{devices}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(script), str(out), str(devices), str(batch), str(SMOKE)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"{devices}-process run failed:\n{proc.stderr[-4000:]}")
    result = json.loads(Path(f"{out}.json").read_text())
    assert result["world"] == devices
    return result["metrics"], torch.load(f"{out}.pt", weights_only=True)


def test_two_process_ddp_matches_one_process(tmp_path: Path) -> None:
    single_metrics, single_state = _run(tmp_path, 1, 64)
    ddp_metrics, ddp_state = _run(tmp_path, 2, 32)
    assert single_metrics.keys() == ddp_metrics.keys()
    for key, value in single_metrics.items():
        assert ddp_metrics[key] == pytest.approx(value, abs=1e-5), key
    # weights agree to float tolerance; the loosest entries are the attention key biases, whose true
    # gradient is zero (softmax ignores a per-query constant), so Adam scales round-off up to ~1e-5
    for key, value in single_state.items():
        torch.testing.assert_close(ddp_state[key], value, rtol=1e-4, atol=1e-4, msg=key)


@pytest.mark.parametrize("n", [200, 193, 129, 130])
def test_rank_batches_together_are_the_single_process_batches(n: int) -> None:
    from recframe.data.datamodule import EpochShuffle

    def batches(sampler: EpochShuffle, size: int) -> list[list[int]]:
        order = list(sampler)
        assert len(order) == len(sampler)
        return [order[i:i + size] for i in range(0, len(order), size)]

    single = EpochShuffle(n, seed=3, batch_size=64)
    single.set_epoch(5)
    ranks = [EpochShuffle(n, seed=3, batch_size=32, num_replicas=2, rank=r) for r in (0, 1)]
    for sampler in ranks:
        sampler.set_epoch(5)
    per_rank = [batches(s, 32) for s in ranks]
    assert len(per_rank[0]) == len(per_rank[1])  # every rank runs the same number of steps
    joined = [sorted(a + b) for a, b in zip(*per_rank)]
    expected = [sorted(b) for b in batches(single, 64)]
    if n % 64 == 1:  # a final global batch smaller than the world size is dropped under DDP
        expected = expected[:-1]
    assert joined == expected
