"""Errors of ``recframe tune``: user errors print as one line (:func:`recframe.errors.friendly_errors`)."""

from __future__ import annotations

import argparse

__all__ = ["SpaceError", "TrialFailed", "TrialPruned", "TuneError"]


class TuneError(argparse.ArgumentError):
    """A user error of ``recframe tune`` (space file, metric, storage): one line naming the file or key."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


class SpaceError(TuneError):
    """A bad search-space file: the message names the file and the key."""


class TrialFailed(Exception):
    """A trial that ran to its end without a usable validation result (a diverged model, no best checkpoint).

    Such a trial is a finished, failed trial: it counts against the budget and is not rerun.
    """


class TrialPruned(Exception):
    """A trial the pruner stopped after a validation (``epoch``, ``value``: the metric it was stopped at).

    Such a trial is finished: it counts against the budget, is not rerun and has no value.
    """

    def __init__(self, epoch: int, value: float) -> None:
        super().__init__(f"pruned after the validation of epoch {epoch} ({value:.4f})")
        self.epoch, self.value = epoch, value
