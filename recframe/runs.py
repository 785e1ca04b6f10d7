"""Run an experiment from a config in-process: fit, then validate and test the best checkpoint.

Used by ``make demo``, the benchmarks and the slow real-data tests, so all of
them measure a model exactly as ``recframe fit`` + ``recframe test`` would.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def fit_and_test(
    config: str | Path,
    extra: list[str] | None = None,
    quiet: bool = True,
    ckpt_path: str | Path | None = None,
    after_test: Callable[[Any, Any], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Fit from ``config`` (plus CLI-style overrides), test the best-validation checkpoint.

    ``after_test(model, datamodule)``, if given, runs on the tested (best-validation) model and its
    returned entries are added to the result (e.g. per-user test ranks for a paired comparison).

    ``ckpt_path`` resumes an interrupted fit from its ``last.ckpt`` (at the same thread count the result
    equals an uninterrupted run's; ``resumed_from`` names the checkpoint).

    ``train_seconds`` is the fit's wall time as Lightning's ``Timer`` keeps it: its state travels in every
    checkpoint, so a resumed fit adds the time the earlier processes had spent up to that checkpoint (work
    lost after it and redone here is counted once). ``train_seconds_complete`` is False only for a fit
    resumed from a checkpoint that carried no timer state (written before this was recorded); its
    ``train_seconds`` then covers this process alone.

    Returns the train wall time, epochs run, the best checkpoint's epoch, the
    seed, the data fingerprint, the code that finished the run (:func:`code_version`) and the
    ``valid``/``test`` metric dicts (keys like ``ndcg@10``).
    """
    from recframe.cli import run_cli

    flags = ["--trainer.enable_model_summary", "false"]
    if quiet:
        flags += ["--trainer.enable_progress_bar", "false"]
    cli = run_cli(["--config", str(config), *flags, *(extra or [])], run=False)
    trainer, model, dm = cli.trainer, cli.model, cli.datamodule
    if quiet:  # no progress bar: one line per validation and evaluation pass instead
        from recframe.callbacks import ProgressLines

        trainer.callbacks.append(ProgressLines(Path(str(config)).stem))
    timer = _train_timer(trainer)
    trainer.fit(model, dm, ckpt_path=str(ckpt_path) if ckpt_path else None)
    train_s = timer.time_elapsed("train")
    began, ended = timer.start_time("train"), timer.end_time("train")
    carried_s = train_s - (ended - began) if began is not None and ended is not None else train_s
    best = trainer.checkpoint_callback.best_model_path or None
    if best is None:  # e.g. a time cap hit before the first validation: the last weights get tested
        import logging

        logging.getLogger("recframe.runs").warning(
            "%s: no best-validation checkpoint exists (did validation run?); testing the last weights, which "
            "the result marks with selected_by_validation=False", config)
    val = trainer.validate(model, dm, ckpt_path=best, verbose=False)[0]
    test = trainer.test(model, dm, ckpt_path=best, verbose=False)[0]
    # on the CPU: the hook's batches come from the datamodule's loaders, which the trainer moved for its own
    # loops only (a GPU-trained model would otherwise meet CPU tensors)
    device = trainer.strategy.root_device
    extra_results = after_test(model.cpu().eval(), dm) if after_test is not None else {}
    return {
        "device": device_name(device),
        "config": _shown(config),
        "overrides": list(extra or []),
        "train_seconds": round(train_s, 1),
        "train_seconds_complete": not ckpt_path or carried_s > 0,
        "resumed_from": _shown(ckpt_path) if ckpt_path else None,
        "code": code_version(),
        "epochs": trainer.current_epoch,
        "best_checkpoint_epoch": _epoch_of(best),
        "best_checkpoint": best,
        "selected_by_validation": best is not None,
        "seed": cli.config.get("seed_everything"),
        "data_fingerprint": dm.fingerprint,
        "valid": {k[len("val/"):]: v for k, v in val.items() if k.startswith("val/")},
        "test": {k[len("test/"):]: v for k, v in test.items() if k.startswith("test/")},
        **extra_results,
    }


def code_version(root: str | Path | None = None) -> dict[str, Any] | None:
    """The git commit (``commit``, short) of the checkout recframe runs from and whether its tracked files
    had uncommitted changes (``dirty``), or ``None`` outside a git checkout (an installed wheel) or without
    git. A run record carries it, so a number can be traced to the code that produced it; a run resumed
    across commits records the code that finished it (its ``resumed_from`` says it was resumed)."""
    import subprocess

    root = Path(root) if root is not None else Path(__file__).resolve().parent.parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short=12", "HEAD")
    if not commit:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}


def device_name(device: Any) -> str:
    """``cpu``, or the accelerator's name (``cuda:0 NVIDIA ...``): results trained on a GPU say so."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return f"{device} {torch.cuda.get_device_name(device)}"
    return str(device)


def _train_timer(trainer: Any) -> Any:
    """The trainer's ``Timer`` callback (present when ``max_time`` is set), or a new one without a limit."""
    from lightning.pytorch.callbacks import Timer

    for callback in trainer.callbacks:
        if isinstance(callback, Timer):
            return callback
    timer = Timer()
    trainer.callbacks.append(timer)
    return timer


def _shown(path: str | Path) -> str:
    """``path`` relative to the working directory when inside it, so recorded results name no machine path."""
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _epoch_of(path: str | None) -> int | None:
    if not path or "epoch=" not in path:
        return None
    return int(path.split("epoch=")[1].split("-")[0].split(".")[0])
