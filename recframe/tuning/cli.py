"""``recframe tune --config FILE --space SPACE.yaml --trials N``: hyperparameter search on validation.

Each trial trains ``--config`` with the trial's values as ``recframe fit`` would (in-process LightningCLI) and
is scored by ``--metric`` of its best-validation checkpoint; test data is never scored. The study lives in
``--storage`` (an SQLite file there): rerunning the same command after a kill continues it, rerunning the
trial that was interrupted. Outputs: each trial's resolved config and validation result, ``best.yaml`` (the
config with the best values) and ``study.json`` (settings, the trial budget, every trial, the best).
``--pruner median|hyperband`` stops a trial after a validation that falls behind the earlier trials' at the
same epoch (pruned trials count against the budget).
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``recframe tune``."""
    from recframe.tuning.runner import DIRECTIONS, PRUNERS, SAMPLERS

    parser = argparse.ArgumentParser(
        prog="recframe tune",
        description="Hyperparameter search on validation (Optuna): each trial trains --config with the "
                    "trial's values as `recframe fit` does; rerun the same command to resume.")
    parser.add_argument("--config", required=True, type=Path,
                        help="run config, as for `recframe fit --config`")
    parser.add_argument("--space", required=True, type=Path,
                        help="search-space YAML: dotted config keys -> {type: float|int|categorical, ...}")
    parser.add_argument("--trials", required=True, type=int,
                        help="trial budget: finished trials the study ends with (the same for every model)")
    parser.add_argument("--sampler", choices=SAMPLERS, default="tpe", help="tpe (default) or grid")
    parser.add_argument("--metric", default="val/ndcg@10",
                        help="validation metric chosen on (default val/ndcg@10; case-insensitive)")
    parser.add_argument("--direction", choices=DIRECTIONS, default="maximize", help="default maximize")
    parser.add_argument("--storage", type=Path, default=None,
                        help="study folder (default runs/tune/<config name>); rerun to continue its study")
    parser.add_argument("--seed", type=int, default=0, help="sampler seed (training uses the config's seed)")
    parser.add_argument("--pruner", choices=PRUNERS, default="none",
                        help="stop unpromising trials after a validation: none (default), median or "
                             "hyperband (Optuna's); a pruned trial counts against the budget")
    parser.add_argument("--pruner-startup-trials", type=int, default=5,
                        help="median: trials that run to their end before it prunes (default 5)")
    return parser


def main(argv: list[str]) -> int:
    """Run ``recframe tune``; user errors end in one line (``recframe tune: config error: ...``), exit 2."""
    from recframe.cli import quiet_lightning
    from recframe.errors import friendly_errors
    from recframe.tuning.runner import TuneSettings, tune

    ns = build_parser().parse_args(argv)
    quiet_lightning()
    with friendly_errors(prog="recframe tune"):
        tune(TuneSettings(config=ns.config, space=ns.space, trials=ns.trials, sampler=ns.sampler,
                          metric=ns.metric, direction=ns.direction, storage=ns.storage, seed=ns.seed,
                          pruner=ns.pruner, pruner_startup_trials=ns.pruner_startup_trials))
    return 0
