"""Training-step cost on short-history data (Amazon windows): the layouts that skip padding against the
dense ones, for the semantic-ID backbones and the sequential models. Two switches, each the same function on
the real tokens:

* target rows: ``compact`` decodes only the real targets (the decoder runs one row per target), against the
  broadcast window (every window position decoded, the padded ones dropped);
* the history stream: ``packed`` runs the token-wise layers of TIGER's encoder and of the decoder-only
  stream on the real history tokens only (``SIDBackbone.run_stream``), against the dense ``[B, S]`` layout.

Run (after ``recframe data prepare amazon-beauty``)::

    python -m benchmarks.generative_train_step                   # every row (about 15 minutes at one thread)
    python -m benchmarks.generative_train_step --steps 10 --no-write

Each arm is a real ``recframe fit`` on the config (``configs/amazon/tiger_beauty.yaml``; the decoder-only row
is ``configs/amazon/decoder_collab_beauty.yaml`` with ``features: none``, i.e. attribute IDs, so that no
SASRec table has to be trained first; the TrieRec row likewise) for ``--steps`` optimiser steps,
validation off, with the backbone's ``loss(..., compact=...)`` and the history layout
(:func:`recframe.models.layers.pinned_packing`) pinned; the first ``--warmup`` steps are not timed.
Three arms per backbone: broadcast + dense stream (the baseline: the code before either switch), compact +
dense stream, compact + packed stream (the default on these data). The paths are the same function
(``tests/generative/test_backbones.py`` and ``tests/models/test_layers_gqa.py`` check values and
gradients). The seconds are the median over the timed steps of one training step (forward, backward,
optimiser), at ``--threads`` threads on the CPU, as wall time and as the process's CPU time (the machine
may be shared).
Writes ``benchmarks/results/generative_train_step.{json,md}``: per backbone, every arm, the ratios to the
baseline, the share of real targets in the batches, and the device.

SASRec, BERT4Rec and FLASH (their Beauty configs) have no target-row layout; they share the sequence
encoder (:func:`recframe.models.layers.encode_sequence`), which packs the same way. They run two arms:
dense and packed.
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
ATTRIBUTE_IDS = ["--model.init_args.features", "none"]
ROWS = {
    "TIGER": ("configs/amazon/tiger_beauty.yaml", []),
    "TIGER + TrieRec": ("configs/amazon/tiger_collab_trierec_beauty.yaml", ATTRIBUTE_IDS),
    "Decoder-only": ("configs/amazon/decoder_collab_beauty.yaml", ATTRIBUTE_IDS),
    "SASRec": ("configs/amazon/sasrec_beauty.yaml", []),
    "BERT4Rec": ("configs/amazon/bert4rec_beauty.yaml", []),
    "FLASH": ("configs/amazon/flash_beauty.yaml", []),
}
#: rows whose loss has no target-row layout (the shared sequence encoder only): two arms
SEQUENTIAL = {"SASRec", "BERT4Rec", "FLASH"}
#: (compact target rows, packed stream) per arm, the first the baseline; None: the model has no such switch
ARMS = ((False, False), (True, False), (True, True))
SEQUENTIAL_ARMS = ((None, False), (None, True))


def arms_of(row: str) -> tuple[tuple[bool | None, bool], ...]:
    """The arms a row runs: three for a semantic-ID backbone, dense and packed for a sequential model."""
    return SEQUENTIAL_ARMS if row in SEQUENTIAL else ARMS


def _timer() -> Any:
    import lightning as L

    class StepTimer(L.Callback):
        """Pins a semantic-ID backbone's loss to one target layout and times each training step."""

        def __init__(self, compact: bool | None) -> None:
            self.compact = compact
            self.seconds: list[float] = []
            self.cpu_seconds: list[float] = []
            self.real: list[float] = []
            self._start = (0.0, 0.0)

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            if self.compact is not None:
                backbone = pl_module.backbone
                backbone.loss = functools.partial(type(backbone).loss, backbone, compact=self.compact)

        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
            self.real.append(float((batch["target" if "target" in batch else "input"] > 0).float().mean()))
            self._start = (time.perf_counter(), time.process_time())

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                               batch_idx: int) -> None:
            self.seconds.append(time.perf_counter() - self._start[0])
            self.cpu_seconds.append(time.process_time() - self._start[1])

    return StepTimer


def measure(row: str, compact: bool | None, packed: bool, args: argparse.Namespace) -> dict[str, Any]:
    """One arm: ``--steps`` timed training steps of ``row`` with the loss pinned to ``compact`` (unless
    ``None``) and every history encoder to ``packed`` (:func:`recframe.models.layers.pinned_packing`)."""
    from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint

    from recframe.cli import run_cli
    from recframe.models.layers import pinned_packing

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
    with pinned_packing(packed):
        trainer.fit(model, dm)
    timed = timer.seconds[args.warmup:]
    return {"row": row, "config": config, "overrides": extra, "compact": compact, "packed": packed,
            "s_per_step": statistics.median(timed),
            "cpu_s_per_step": statistics.median(timer.cpu_seconds[args.warmup:]), "steps": len(timed),
            "real_target_share": statistics.mean(timer.real), "batch_size": int(dm.batch_size),
            "window": int(dm.max_len), "device": str(trainer.strategy.root_device),
            "threads": torch.get_num_threads()}


def markdown(rows: list[dict[str, Any]]) -> str:
    """Per model: each arm's wall and CPU seconds per step, and the speed-ups over the baseline arm (CPU)."""
    lines = ["| model | dense (broadcast rows, dense stream) s/step | compact rows, dense stream s/step | "
             "compact rows, packed stream s/step | speed-up compact | speed-up compact + packed | "
             "real targets | steps | device |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name in dict.fromkeys(r["row"] for r in rows):
        arms = {(r["compact"], r.get("packed", False)): r for r in rows if r["row"] == name}
        base = arms[arms_of(name)[0]]
        if name in SEQUENTIAL:  # no target rows: dense | - | packed
            packed = arms[SEQUENTIAL_ARMS[1]]
            timed: list[dict[str, Any] | None] = [base, None, packed]
            ratios = ["–", f"x{base['cpu_s_per_step'] / packed['cpu_s_per_step']:.2f}"]
        else:
            timed = [arms[a] for a in ARMS]
            ratios = [f"x{base['cpu_s_per_step'] / arms[a]['cpu_s_per_step']:.2f}" for a in ARMS[1:]]
        cells = ["–" if r is None else f"{r['s_per_step']:.3f} ({r['cpu_s_per_step']:.3f} CPU)"
                 for r in timed]
        lines.append(f"| {name} | {' | '.join(cells)} | {' | '.join(ratios)} | "
                     f"{base['real_target_share']:.1%} | {base['steps']} | {base['device']} |")
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
    rows = [measure(row, compact, packed, args) for row in args.rows for compact, packed in arms_of(row)]
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
