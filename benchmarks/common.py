"""Shared pieces of the benchmark scripts: timed fit/test through the CLI, result files.

Every benchmark writes ``benchmarks/results/NAME.json`` (numbers plus what is
needed to trace them: command, seed, data fingerprint, library versions, machine)
and ``benchmarks/results/NAME.md`` (a markdown table).
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from recframe.callbacks import library_versions
from recframe.checkpoint_io import atomic_write

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    """CPU count and platform of the machine that produced a result."""
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "processor": platform.processor()}


def fit_and_test(config: Path, extra: list[str] | None = None) -> dict[str, Any]:
    """Fit from ``config`` via the CLI, test the best checkpoint; return metrics and timings."""
    from recframe.cli import run_cli

    cli = run_cli(["--config", str(config), "--trainer.enable_progress_bar", "false",
                   "--trainer.enable_model_summary", "false", *(extra or [])], run=False)
    trainer, model, dm = cli.trainer, cli.model, cli.datamodule
    start = time.perf_counter()
    trainer.fit(model, dm)
    train_s = time.perf_counter() - start
    best = trainer.checkpoint_callback.best_model_path or None
    val = trainer.validate(model, dm, ckpt_path=best, verbose=False)[0]
    test = trainer.test(model, dm, ckpt_path=best, verbose=False)[0]
    return {
        "config": str(config),
        "train_seconds": round(train_s, 1),
        "epochs": trainer.current_epoch,
        "best_checkpoint_epoch": _epoch_of(best),
        "seed": cli.config.get("seed_everything"),
        "data_fingerprint": dm.fingerprint,
        "valid": {k[4:]: v for k, v in val.items() if k.startswith("val/")},
        "test": {k[5:]: v for k, v in test.items() if k.startswith("test/")},
    }


def _epoch_of(path: str | None) -> int | None:
    if not path or "epoch=" not in path:
        return None
    return int(path.split("epoch=")[1].split("-")[0].split(".")[0])


def write_results(name: str, payload: dict[str, Any], markdown: str) -> tuple[Path, Path]:
    """Write ``NAME.json`` (with versions and machine) and ``NAME.md`` atomically."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {**payload, "versions": library_versions(), "machine": machine(),
               "date": time.strftime("%Y-%m-%d")}
    js, md = RESULTS / f"{name}.json", RESULTS / f"{name}.md"
    atomic_write(js, lambda fh: fh.write(json.dumps(payload, indent=2, default=str).encode()))
    atomic_write(md, lambda fh: fh.write(markdown.encode()))
    return js, md
