"""One trial of ``recframe tune``: fit a config with overrides exactly as ``recframe fit`` does, validate
its best checkpoint, and return the validation result. Test data is never scored.

Trials run in-process through :func:`recframe.cli.run_cli`, the LightningCLI that ``recframe fit`` runs (the
same parser, links, defaults, callbacks and checkpoint rules; :func:`recframe.runs.fit_and_test` uses it the
same way). A subprocess per trial would add an interpreter start and the torch/Lightning imports to every
trial and buy only isolation from a crash, which the study storage already survives: a killed process
loses at most its running trial, and the next run reruns it.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import math
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from recframe.tuning.errors import TrialFailed, TrialPruned, TuneError
from recframe.tuning.results import shown, write_text
from recframe.tuning.space import Scalar, override_value

__all__ = ["check_overrides", "normalise_metric", "overrides", "run_trial"]


def normalise_metric(name: str) -> str:
    """``val/NDCG@10`` -> ``val/ndcg@10`` (``ndcg@10`` alone means the validation metric); test is refused."""
    key = name.strip().lower()
    if key.startswith("test/") or key.startswith("test_"):
        raise TuneError(f"--metric {name}: tuning chooses on validation only; name a validation metric "
                        "such as val/ndcg@10")
    if key.startswith("val_"):
        key = "val/" + key[len("val_"):]
    if not key.startswith("val/"):
        key = "val/" + key
    if key == "val/":
        raise TuneError("--metric is empty; name a validation metric such as val/ndcg@10")
    return key


def overrides(params: dict[str, Scalar]) -> list[str]:
    """The ``recframe fit`` command-line overrides that set ``params`` (``--KEY VALUE`` pairs)."""
    out: list[str] = []
    for key, value in params.items():
        out += [f"--{key}", override_value(value)]
    return out


Report = Callable[[int, float], bool]
"""``report(epoch, value) -> stop``: called after each validation of a fit with ``metric``'s value; True
stops the trial there (the pruner's decision)."""


def run_trial(config: str | Path, params: dict[str, Scalar], trial_dir: Path, metric: str,
              resume_from: Path | None = None, report: Report | None = None) -> dict[str, Any]:
    """Fit ``config`` with ``params`` (logs in ``trial_dir``), validate its best checkpoint, return a record.

    ``resume_from``: the ``last.ckpt`` an interrupted attempt of the same parameters left; the fit continues
    from it (its best-so-far checkpoint state included, :class:`recframe.callbacks.BestCheckpoint`), so the
    trial ends as an uninterrupted one would, and ``train_seconds`` adds the earlier attempts' time up to
    that checkpoint (Lightning's ``Timer`` state travels in it).

    The trial's resolved config is written to ``trial_dir/config.yaml`` before training. The returned record
    holds ``value`` (``metric`` of the best-validation checkpoint), ``valid`` (every validation metric of
    that checkpoint, keys like ``ndcg@10``), the checkpoint and its monitor, epochs, train seconds, device,
    seed and the data fingerprint. Raises :class:`TrialFailed` when the model diverged (non-finite scores or
    metric) or no best-validation checkpoint exists, and :class:`TuneError` when ``metric`` is not a
    validation metric.

    ``report`` (a pruner): called after every validation of the fit with the epoch and ``metric``; when it
    returns True the fit stops after that epoch and :class:`TrialPruned` is raised (no final validation).
    """
    from recframe.cli import run_cli

    logger = {"class_path": "lightning.pytorch.loggers.CSVLogger",
              "init_args": {"save_dir": str(trial_dir.parent), "name": trial_dir.name}}
    flags = ["--trainer.enable_model_summary", "false", "--trainer.enable_progress_bar", "false",
             "--trainer.logger", json.dumps(logger)]
    with _quiet_trial():
        return _fit_and_validate(run_cli(["--config", str(config), *overrides(params), *flags], run=False),
                                 trial_dir, metric, resume_from, report)


def _reporter(metric: str, report: Report) -> Any:
    """A callback that hands ``metric`` to ``report`` after each validation of a fit and stops the fit
    when ``report`` says so (``stopped``: the epoch and value, else None)."""
    import lightning as L

    class Reporter(L.Callback):
        stopped: tuple[int, float] | None = None

        def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
            if trainer.sanity_checking or trainer.state.fn != "fit":
                return
            value = trainer.callback_metrics.get(metric)
            if value is None or not math.isfinite(float(value)):
                return
            epoch = int(trainer.current_epoch)
            if report(epoch, float(value)):
                self.stopped = (epoch, float(value))
                trainer.should_stop = True

    return Reporter()


def _fit_and_validate(cli: Any, trial_dir: Path, metric: str, resume_from: Path | None,
                      report: Report | None = None) -> dict[str, Any]:
    from recframe.metrics.ranking import NonFiniteScoresError
    from recframe.runs import _epoch_of, _train_timer, device_name

    try:
        write_text(trial_dir / "config.yaml", getattr(cli, "_config_text", ""))
        trainer, model, dm = cli.trainer, cli.model, cli.datamodule
        if trainer.world_size > 1:
            raise TuneError(f"the config trains on {trainer.world_size} processes, but recframe tune trains "
                            "in one process (no DDP launch): set trainer.devices 1 and trainer.num_nodes 1")
        timer = _train_timer(trainer)
        reporter = _reporter(metric, report) if report is not None else None
        if reporter is not None:
            trainer.callbacks.append(reporter)
        try:
            trainer.fit(model, dm, ckpt_path=str(resume_from) if resume_from is not None else None)
            if reporter is not None and reporter.stopped is not None:
                raise TrialPruned(*reporter.stopped)
            train_s = timer.time_elapsed("train")
            checkpoint = trainer.checkpoint_callback
            best = checkpoint.best_model_path if checkpoint is not None else ""
            if not best:
                raise TrialFailed("no best-validation checkpoint was written (did validation run? check "
                                  "trainer.check_val_every_n_epoch and limit_val_batches)")
            logged = trainer.validate(model, dm, ckpt_path=best, verbose=False)[0]
        except NonFiniteScoresError as exc:
            raise TrialFailed(f"the model diverged: {' '.join(str(exc).split())}") from None
        if metric not in logged:
            shown_keys = ", ".join(sorted(k for k in logged if k.startswith("val/")))
            raise TuneError(f"--metric {metric} is not a validation metric of this config; it logs "
                            f"{shown_keys}")
        value = float(logged[metric])
        if not math.isfinite(value):
            raise TrialFailed(f"the model diverged: {metric} is {value}")
        return {
            "value": value,
            "valid": {k[len("val/"):]: float(v) for k, v in logged.items() if k.startswith("val/")},
            "best_checkpoint": shown(best),
            "best_checkpoint_epoch": _epoch_of(best),
            "checkpoint_monitor": getattr(checkpoint, "monitor", None),
            "epochs": trainer.current_epoch,
            "train_seconds": round(train_s, 2),
            "resumed_from": shown(resume_from) if resume_from is not None else None,
            "device": device_name(trainer.strategy.root_device),
            "seed": cli.config.get("seed_everything"),
            "data_fingerprint": getattr(dm, "fingerprint", None),
        }
    finally:
        del cli
        gc.collect()
        _empty_accelerator_cache()


@contextlib.contextmanager
def _quiet_trial() -> Iterator[None]:
    """One line per trial: Lightning's per-run notes (seed, devices, checkpoint restores) are held back, and
    so is its advice against passing ``args`` to LightningCLI from a program (tune builds the args itself)."""
    loggers = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric")]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*LightningCLI's args parameter.*")
        for lg in loggers:
            lg.setLevel(max(lg.getEffectiveLevel(), logging.WARNING))
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)


def _empty_accelerator_cache() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def check_overrides(config: str | Path, candidates: dict[str, list[Scalar]], source: str) -> None:
    """Parse ``config`` with each candidate value of each key (one key at a time) without building
    anything, so a misspelt key or a value of the wrong type stops the run before a study or trial exists.

    Raises :class:`TuneError` naming the key, the value and ``source`` (the space file), followed by the
    config parser's message.
    """
    from recframe.cli import RecCLI, run_cli

    class _ParseOnly(RecCLI):
        def instantiate_classes(self) -> None:
            """Stop after parsing and validation: no model, data or trainer is built."""

    for key, values in candidates.items():
        for value in values:
            args = ["--config", str(config), *overrides({key: value}), "--trainer.logger", "false"]
            try:
                with _quiet_trial():
                    run_cli(args, run=False, cli_class=_ParseOnly)
            except argparse.ArgumentError as exc:
                raise TuneError(f"{source}: key {key!r} = {value!r} does not fit {config}: {exc}") from None
