"""Training-step cost of the semantic-ID backbones on short-history data: compact target rows against the
broadcast window (the decoder runs one row per target; ``compact`` decodes only the real targets).

Run (after ``recframe data prepare amazon-beauty``)::

    python -m benchmarks.generative_train_step                                   # TIGER and decoder-only
    python -m benchmarks.generative_train_step --steps 10 --no-write

Each arm is a real ``recframe fit`` on the config (``configs/amazon/tiger_beauty.yaml``; the decoder-only row
is ``configs/amazon/decoder_collab_beauty.yaml`` with ``features: none``, i.e. attribute IDs, so that no
SASRec table has to be trained first) for ``--steps`` optimiser steps, validation off, with the backbone's
``loss(..., compact=...)`` pinned to one path; the first ``--warmup`` steps are not timed. Both paths are
the same function (``tests/generative/test_backbones.py`` checks values and gradients). The seconds are the
median over the timed steps of one training step (forward, backward, optimiser), at ``--threads`` threads
on the CPU. Writes ``benchmarks/results/generative_train_step.{json,md}``: per backbone, both arms, the
ratio, the share of real targets in the batches, and the device.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import write_results

ROOT = Path(__file__).resolve().parent.parent
ROWS = {
    "TIGER": ("configs/amazon/tiger_beauty.yaml", []),
    "Decoder-only": ("configs/amazon/decoder_collab_beauty.yaml", ["--model.init_args.features", "none"]),
}


def _timer() -> Any:
    import lightning as L

    class StepTimer(L.Callback):
        """Pins the backbone's loss to one path and times each training step."""

        def __init__(self, compact: bool) -> None:
            self.compact, self.seconds, self.real = compact, [], []
            self._start = 0.0

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            backbone = pl_module.backbone
            backbone.loss = functools.partial(type(backbone).loss, backbone, compact=self.compact)

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            self.real.append(float((batch["target"] > 0).float().mean()))
            self._start = time.perf_counter()

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                               batch_idx: int) -> None:
            self.seconds.append(time.perf_counter() - self._start)

    return StepTimer


def measure(row: str, compact: bool, args: argparse.Namespace) -> dict[str, Any]:
    """One arm: ``--steps`` timed training steps of ``row`` with the loss pinned to ``compact``."""
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from recframe.cli import run_cli

    config, extra = ROWS[row]
    cli = run_cli(["--config", str(ROOT / config), "--seed_everything", str(args.seed),
                   "--trainer.max_steps", str(args.steps + args.warmup), "--trainer.limit_val_batches", "0",
                   "--trainer.logger", "false",
                   "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
                   "--trainer.accelerator", "cpu", *extra], run=False)
    trainer, model, dm = cli.trainer, cli.model, cli.datamodule
    unwatched = (EarlyStopping, ModelCheckpoint)  # both watch val_ndcg, and validation is off
    trainer.callbacks[:] = [c for c in trainer.callbacks if not isinstance(c, unwatched)]
    timer = _timer()(compact)
    trainer.callbacks.append(timer)
    trainer.fit(model, dm)
    timed = timer.seconds[args.warmup:]
    return {"row": row, "config": config, "overrides": extra, "compact": compact,
            "s_per_step": statistics.median(timed), "steps": len(timed),
            "real_target_share": statistics.mean(timer.real), "batch_size": int(dm.batch_size),
            "window": int(dm.max_len), "device": str(trainer.strategy.root_device),
            "threads": torch.get_num_threads()}


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| backbone | broadcast s/step | compact s/step | speed-up | real targets | steps | device |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for name in dict.fromkeys(r["row"] for r in rows):
        arms = {r["compact"]: r for r in rows if r["row"] == name}
        full, compact = arms[False], arms[True]
        lines.append(f"| {name} | {full['s_per_step']:.3f} | {compact['s_per_step']:.3f} | "
                     f"x{full['s_per_step'] / compact['s_per_step']:.2f} | {full['real_target_share']:.1%} | "
                     f"{full['steps']} | {full['device']} |")
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    ap.add_argument("--steps", type=int, default=30, help="timed training steps per arm")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.warmup < 0 or args.threads < 1:
        ap.error("--steps and --threads must be >= 1, --warmup >= 0")
    return args


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    args = parse(argv)
    torch.set_num_threads(args.threads)
    rows = [measure(row, compact, args) for row in args.rows for compact in (False, True)]
    table = markdown(rows)
    if not args.no_write:
        given = sys.argv[1:] if argv is None else argv
        command = "python -m benchmarks.generative_train_step " + " ".join(given)
        write_results("generative_train_step", {"command": command.strip(), "settings": vars(args),
                                                "rows": rows}, table)
    print(table)
    return rows


if __name__ == "__main__":
    main()
