"""Hyperparameter search on validation for any recframe config (``recframe tune``, on Optuna).

Modules, one job each: :mod:`~recframe.tuning.space` (the search-space file),
:mod:`~recframe.tuning.objective` (one trial, trained as ``recframe fit`` does),
:mod:`~recframe.tuning.study` (the resumable study storage),
:mod:`~recframe.tuning.results` (the files written), :mod:`~recframe.tuning.runner` (the loop) and
:mod:`~recframe.tuning.cli` (the command).
"""

from recframe.tuning.errors import SpaceError, TrialFailed, TrialPruned, TuneError
from recframe.tuning.runner import TuneSettings, tune
from recframe.tuning.space import Param, SearchSpace, load_space

__all__ = ["Param", "SearchSpace", "SpaceError", "TrialFailed", "TrialPruned", "TuneError", "TuneSettings",
           "load_space", "tune"]
