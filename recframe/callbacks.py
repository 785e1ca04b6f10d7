"""Callbacks shared by the core and the extension packages.

* ``RunMetadata`` makes every checkpoint traceable (DESIGN invariant 3): the
  resolved config, the seed, the data fingerprint and the library versions are
  stored under ``checkpoint["recframe"]`` as plain strings and numbers, so the
  file still loads with ``weights_only=True``.
* ``ReportCallback`` is the base of callbacks that report on a run (causal and
  calibration methods): ``report_``, its JSON ``state_dict``, the atomic write of
  the report file and logging; its data come from the datamodule's read-only
  :class:`~recframe.data.eval_view.EvaluationView`.
* ``BestCheckpoint`` keeps the best-validation checkpoint; its best-so-far score
  survives a resume that logs into a new version directory.
* ``RandomState`` stores the random generators' state in each checkpoint and
  puts it back when training resumes, so a resumed run draws the same shuffles,
  negatives and dropout masks as an uninterrupted one.
* ``ProgressLines`` prints one line per validation and per evaluation pass, for
  runs without a progress bar (the benchmarks' logs).
"""

from __future__ import annotations

import json
import logging
import platform
import random
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from recframe.checkpoint_io import atomic_write
from recframe.data.eval_view import EvaluationView
from recframe.tokenizers.sid_table import to_plain

log = logging.getLogger(__name__)

_LIBRARIES = ("recframe", "torch", "lightning", "numpy", "scipy", "torch_geometric", "faiss-cpu",
              "jsonargparse", "scikit-learn", "POT", "causal-learn", "sentence-transformers")


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries a result depends on (plus Python)."""
    out = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


class RunMetadata(L.Callback):
    """Stores config, seed, data fingerprint and versions in each checkpoint.

    Args:
        config_text: the resolved YAML config (the CLI fills it in).
        seed: the global seed of the run (the CLI fills it in).
    """

    def __init__(self, config_text: str = "", seed: int | None = None) -> None:
        self.config_text = config_text
        self.seed = seed

    def describe(self, trainer: L.Trainer) -> dict[str, Any]:
        """The metadata dict for this run."""
        dm = getattr(trainer, "datamodule", None)
        return {
            "config": self.config_text,
            "seed": -1 if self.seed is None else int(self.seed),
            "data_fingerprint": getattr(dm, "fingerprint", "") if dm is not None else "",
            "versions": library_versions(),
            "model_class": f"{type(trainer.lightning_module).__module__}."
                           f"{type(trainer.lightning_module).__qualname__}",
        }

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        checkpoint["recframe"] = self.describe(trainer)


class ReportCallback(L.Callback):
    """Base of callbacks that compute a report about a run (a causal or calibration method).

    A subclass computes its report in whatever hook fits, reading the data only through
    :meth:`eval_view` (the datamodule's read-only :class:`~recframe.data.eval_view.EvaluationView`),
    and hands it to :meth:`publish`, which

    * keeps it in ``report_`` as plain JSON data (numpy scalars and arrays become numbers and
      lists, so ``report_`` equals what the file and a restored checkpoint hold);
    * writes it as indented JSON to ``output`` when set, atomically (temp file + rename), so a
      reader never sees half a report;
    * logs the given scalar metrics to every logger of the trainer, as ``<log_prefix>/<name>``.

    ``state_dict`` stores the report as one JSON string, so it survives checkpoint and resume
    and the checkpoint still loads with ``torch.load(weights_only=True)``. The state is keyed by the
    report's output (:attr:`state_key`, e.g. ``CalibrationMonitor{'output': 'calib.json'}``), so several
    instances of one class, each with its own ``output``, keep their own reports in one checkpoint; without
    an ``output`` the key is the class name. Checkpoints written when every report was keyed by its class
    name still load: an instance whose key is missing takes the class-name entry when it is the trainer's
    only instance of its class.

    Args:
        output: JSON file for the report (None: keep it in memory and in checkpoints only).
    """

    #: prefix of the metric names :meth:`publish` logs (``indrm`` gives ``indrm/<name>``)
    log_prefix: str = "report"

    def __init__(self, output: str | None = None) -> None:
        self.output = output
        self.report_: dict[str, Any] | None = None

    @staticmethod
    def eval_view(trainer: L.Trainer, stage: Literal["valid", "test"]) -> EvaluationView:
        """The read-only evaluation data of ``stage`` from the trainer's datamodule."""
        dm = getattr(trainer, "datamodule", None)
        view = getattr(dm, "eval_view", None)
        if view is None:
            raise ValueError("a ReportCallback reads its data from the trainer's datamodule, but "
                             f"{type(dm).__name__} has no eval_view(stage); pass a "
                             "recframe.data.datamodule.RecDataModule to trainer.fit/test (datamodule=...).")
        return view(stage)

    def publish(self, trainer: L.Trainer, report: dict[str, Any],
                metrics: dict[str, float] | None = None) -> dict[str, Any]:
        """Keep ``report`` in ``report_``, write it to ``output`` and log ``metrics``; returns ``report_``."""
        self.report_ = to_plain(report, where=f"the report of {type(self).__name__}")
        if self.output and trainer.is_global_zero:  # under DDP every rank holds the report; one writes it
            self.write_report(self.output)
        if metrics:
            named = {f"{self.log_prefix}/{k}": float(v) for k, v in metrics.items()}
            for logger in trainer.loggers:
                logger.log_metrics(named, step=trainer.global_step)
        return self.report_

    def write_report(self, path: str | Path) -> None:
        """Write ``report_`` as indented JSON to ``path`` atomically."""
        if self.report_ is None:
            raise ValueError(f"{type(self).__name__} has no report to write yet; it is made by the run.")
        data = json.dumps(self.report_, indent=2).encode()
        atomic_write(Path(path), lambda fh: fh.write(data))
        log.info("%s: report written to %s", type(self).__name__, path)

    @property
    def state_key(self) -> str:
        """The checkpoint key of this report: the class name and ``output`` as given (the class name alone
        when there is no ``output``)."""
        if self.output is None:
            return super().state_key
        return self._generate_state_key(output=str(self.output))

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        """Map a report stored under the former class-name key to :attr:`state_key` (Lightning then loads it
        through :meth:`load_state_dict`). Only the trainer's sole instance of a class claims it: with several,
        the old entry cannot say whose report it is, and none is restored (a warning says so)."""
        states = checkpoint.get("callbacks")
        old = type(self).__qualname__
        if not isinstance(states, dict) or old not in states or self.state_key in states:
            return  # nothing stored under the old key, or the report is under its own key already
        same_class = [cb for cb in trainer.callbacks if type(cb) is type(self)]
        if len(same_class) > 1:
            log.warning("%s: the checkpoint holds one report under the old key %r and this trainer has %d "
                        "instances of %s; it is restored to none of them (give the run one instance to "
                        "restore it).", old, old, len(same_class), old)
            return
        states[self.state_key] = states[old]
        log.info("%s: report restored from the checkpoint's old key %r (written before reports were keyed by "
                 "output)", self.state_key, old)

    def state_dict(self) -> dict[str, Any]:
        """The last report as a JSON string (plain data, safe for ``weights_only`` loading)."""
        return {"report": json.dumps(self.report_) if self.report_ is not None else ""}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the last report."""
        text = state_dict.get("report", "")
        self.report_ = json.loads(text) if text else None


class RandomState(L.Callback):
    """Checkpoints the torch (CPU and CUDA), numpy and Python random states.

    Lightning restores model, optimiser and loop state on resume but not the
    global generators, so without this a resumed run shuffles and samples
    differently from an uninterrupted one. The state is captured when a
    checkpoint is written (after the epoch's validation, whose data loaders
    also draw from the generator) and applied at ``on_train_start``, after all
    set-up that could itself draw random numbers. Everything is stored as
    tensors and plain lists, so checkpoints still load with ``weights_only=True``.
    """

    def __init__(self) -> None:
        self._pending: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, Any]:
        np_state = np.random.get_state()
        py_state = random.getstate()
        state: dict[str, Any] = {
            "torch": torch.get_rng_state(),
            "numpy": {"keys": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                      "has_gauss": int(np_state[3]), "gauss": float(np_state[4])},
            "python": {"version": py_state[0], "state": list(py_state[1]),
                       "gauss": py_state[2]},
        }
        if torch.cuda.is_available():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._pending = state_dict

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        state, self._pending = self._pending, None
        if not state:
            return
        torch.set_rng_state(state["torch"])
        np_state = state["numpy"]
        np.random.set_state(("MT19937", np_state["keys"].numpy().astype(np.uint32), np_state["pos"],
                             np_state["has_gauss"], np_state["gauss"]))
        py = state["python"]
        random.setstate((py["version"], tuple(py["state"]), py["gauss"]))
        if "cuda" in state and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda"])


class BestCheckpoint(ModelCheckpoint):
    """A monitored ``ModelCheckpoint`` whose best-so-far state survives a resume into a new directory.

    Resuming ``recframe fit --ckpt_path .../version_0/checkpoints/last.ckpt`` logs into a new version
    directory. Lightning then restores only ``best_model_path`` and forgets the best *score*, so the first
    validation after the resume counts as the new best even when it is worse, and the run tests a
    different checkpoint than an uninterrupted one would. This class restores the score, the best-k
    bookkeeping and the file paths (they still point at the earlier directory, whose files exist) whatever
    the directory, so "best" means the same with and without the interruption. When a better model comes
    after the resume, the superseded best file in the earlier directory is *kept*: Lightning removes only
    files under the current ``dirpath`` (a resumed run must not delete files of a directory it does not own),
    so an interrupted run can leave one stale ``best-*.ckpt`` per earlier version. ``best_model_path`` and
    the tested checkpoint are unaffected.
    """

    @property
    def state_key(self) -> str:
        """A plain ``ModelCheckpoint``'s key for these settings, so checkpoints stay interchangeable."""
        return super().state_key.replace(type(self).__qualname__, "ModelCheckpoint", 1)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the best-so-far state even when the checkpoint directory changed."""
        super().load_state_dict({**state_dict, "dirpath": self.dirpath})


# The head probe, one of the seams extensions use, lives in its own module; it is re-exported here.
from recframe.heads import (  # noqa: E402, F401
    AttentionSite,
    HeadCapture,
    HeadProjections,
    attention_sites,
    head_projections,
    head_value_output_maps,
    patch_heads,
    read_heads,
    scale_heads,
)


class ProgressLines(L.Callback):
    """One plain line per validation during a fit (epoch, the monitored metric, the best so far, the time
    since the fit started) and one at the start and end of every validate/test pass outside a fit, on stdout:
    a run whose progress bar is off (a benchmark writing to a log file) still shows where it is, and a long
    exact test says that it is running.

    Args:
        name: prefix of every line (the run's name).
        monitor: the logged metric to show (default ``val_ndcg``, what the configs' early stopping watches).
        mode: ``"max"`` or ``"min"``: which way ``monitor`` improves, for the best value shown.
    """

    def __init__(self, name: str, monitor: str = "val_ndcg", mode: str = "max") -> None:
        if mode not in ("max", "min"):
            raise ValueError(f"ProgressLines mode must be 'max' or 'min', got {mode!r}")
        self.name, self.monitor, self.mode = name, monitor, mode
        self._best: float | None = None
        self._fit_start = 0.0
        self._pass_start = 0.0

    def _say(self, text: str) -> None:
        print(f"[{self.name}] {text}", flush=True)

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._fit_start = time.monotonic()
        self._say(f"fit from epoch {trainer.current_epoch} to at most {trainer.max_epochs}")

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.state.fn != "fit":
            self._pass_start = time.monotonic()
            self._say("validation pass of the selected checkpoint started")

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        if trainer.state.fn != "fit":
            self._say(f"validation pass done in {time.monotonic() - self._pass_start:.0f} s")
            return
        value = trainer.callback_metrics.get(self.monitor)
        shown = "n/a" if value is None else f"{float(value):.4f}"
        if value is not None:
            better = max if self.mode == "max" else min
            self._best = float(value) if self._best is None else better(self._best, float(value))
        best_shown = "" if self._best is None else f" (best of this fit {self._best:.4f})"
        seconds = int(time.monotonic() - self._fit_start)
        clock = f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        epoch = f"epoch {trainer.current_epoch + 1}/{trainer.max_epochs}"
        self._say(f"{epoch}: {self.monitor} {shown}{best_shown}, {clock} into this fit")

    def on_test_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._pass_start = time.monotonic()
        self._say("test pass of the selected checkpoint started")

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._say(f"test pass done in {time.monotonic() - self._pass_start:.0f} s")
