"""The search loop of ``recframe tune``: resume the study, run trials until the budget is spent, write."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from recframe.checkpoint_io import furthest_last_checkpoint
from recframe.tuning.errors import TrialFailed, TrialPruned, TuneError
from recframe.tuning.objective import check_overrides, normalise_metric, overrides, run_trial
from recframe.tuning.results import shown, trial_dir, write_best, write_json
from recframe.tuning.space import SearchSpace, load_space
from recframe.tuning.study import (
    FINISHED,
    best_trial,
    exclusive,
    n_finished,
    open_study,
    recover_interrupted,
    rerun_map,
    state_of,
    trial_record,
)

__all__ = ["TuneSettings", "tune"]

SAMPLERS = ("tpe", "grid")
PRUNERS = ("none", "median", "hyperband")
DIRECTIONS = ("maximize", "minimize")


@dataclass(frozen=True)
class TuneSettings:
    """What ``recframe tune`` searches and where it keeps the study.

    Attributes:
        config: the run config (as for ``recframe fit --config``).
        space: the search-space YAML (:mod:`recframe.tuning.space`).
        trials: the trial budget: finished trials (complete or failed) the study ends with. A grid study stops
            at the grid's size when that is smaller.
        sampler: ``tpe`` (Optuna's TPE; its first 10 trials are random) or ``grid``.
        metric: the validation metric chosen on (``val/ndcg@10``); test metrics are never computed.
        direction: ``maximize`` or ``minimize`` the metric.
        storage: the study folder (default ``runs/tune/<config name>``).
        seed: seeds the sampler (TPE: reseeded with ``seed + trials so far`` before each trial, so its draws
            depend on the study's history, not on how many processes produced it; grid: fixes the order of its
            points). Training uses the config's ``seed_everything``.
        pruner: ``none`` (default: every trial trains to its end), ``median`` (Optuna's ``MedianPruner``: a
            trial stops after a validation whose metric is worse than the median of the earlier trials' at the
            same epoch) or ``hyperband`` (Optuna's ``HyperbandPruner``, the epochs of validation as its
            resource, minimum 1, reduction factor 3). A pruned trial counts against the budget, so one budget
            buys more settings; give every model of a comparison the same pruner, as the same budget.
        pruner_startup_trials: ``median`` only: trials that run to their end before it prunes (Optuna's
            default, 5).
    """

    config: Path
    space: Path
    trials: int
    sampler: str = "tpe"
    metric: str = "val/ndcg@10"
    direction: str = "maximize"
    storage: Path | None = None
    seed: int = 0
    pruner: str = "none"
    pruner_startup_trials: int = 5

    def storage_dir(self) -> Path:
        """``storage``, or ``runs/tune/<config name>``."""
        if self.storage is not None:
            return Path(self.storage)
        return Path("runs") / "tune" / Path(self.config).stem


def tune(settings: TuneSettings, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Run (or continue) the study of ``settings`` until its trial budget is spent; return the summary.

    Writes each trial's resolved config and result, ``best.yaml`` and ``study.json`` under the storage folder
    (:mod:`recframe.tuning.results`). A rerun of the same command after a kill continues the study.
    """
    if settings.sampler not in SAMPLERS:
        raise TuneError(f"--sampler {settings.sampler}: use one of {', '.join(SAMPLERS)}")
    if settings.direction not in DIRECTIONS:
        raise TuneError(f"--direction {settings.direction}: use one of {', '.join(DIRECTIONS)}")
    if settings.pruner not in PRUNERS:
        raise TuneError(f"--pruner {settings.pruner}: use one of {', '.join(PRUNERS)}")
    if settings.pruner_startup_trials < 0:
        raise TuneError(f"--pruner-startup-trials {settings.pruner_startup_trials}: use a whole number >= 0")
    if settings.trials < 1:
        raise TuneError(f"--trials {settings.trials}: the budget is a whole number >= 1")
    config = Path(settings.config)
    try:
        config_text = config.read_bytes()
    except OSError:
        raise TuneError(f"{config}: no such config file; pass --config with an existing YAML file") from None
    space = load_space(settings.space)
    metric = normalise_metric(settings.metric)
    grid_size = space.grid_size() if settings.sampler == "grid" else None
    target = min(settings.trials, grid_size) if grid_size is not None else settings.trials
    storage = settings.storage_dir()
    identity = {"config_sha256": hashlib.sha256(config_text).hexdigest(), "space_sha256": space.digest(),
                "sampler": settings.sampler, "seed": settings.seed, "metric": metric,
                "direction": settings.direction}
    if settings.pruner != "none":  # a study without a pruner keeps the identity it had before pruners existed
        identity["pruner"] = _pruner_spec(settings)
    check_overrides(config, space.candidates(), space.source)
    optuna.logging.set_verbosity(logging.ERROR)
    with exclusive(storage):
        study = open_study(storage, identity, settings.direction)
        study.pruner = _make_pruner(settings)
        for number in recover_interrupted(study):
            echo(f"trial {number} was interrupted; it is rerun with the same parameters")
            _write_interrupted(storage, study.trials[number])
        study.set_user_attr("budgets", [*study.user_attrs.get("budgets", []), settings.trials])
        if grid_size is not None and grid_size < settings.trials:
            echo(f"the grid has {grid_size} points: the study ends after {grid_size} trials")
        while n_finished(study) < target:
            _run_one(settings, space, metric, storage, study, target, echo)
        summary = _summary(settings, space, metric, storage, study, target, grid_size)
        write_json(storage / "study.json", summary)
    best = summary["best"]
    if best:
        echo(f"{summary['n_finished']} finished trials; best: trial {best['number']}, "
             f"{metric} = {best['value']:.4f} -> {shown(storage / 'best.yaml')}")
    else:
        echo(f"{summary['n_finished']} finished trials, none complete; no best.yaml was written")
    return summary


def _write_interrupted(storage: Path, trial: optuna.trial.FrozenTrial) -> None:
    """Record an interrupted trial in its ``result.json`` (a killed process could not)."""
    write_json(trial_dir(storage, trial.number) / "result.json",
               {"number": trial.number, "state": "interrupted", "params": dict(trial.params), "value": None,
                "error": trial.user_attrs.get("error", "the process stopped during the trial"),
                "rerun": "queued with the same parameters; study.json names it (rerun_as)"})


def _make_sampler(kind: str, space: SearchSpace, seed: int, n_trials: int) -> optuna.samplers.BaseSampler:
    """The sampler for the next trial. TPE is reseeded with ``seed + n_trials`` (its draws then depend on
    the study's history, not on the processes that wrote it); the grid keeps ``seed``, which fixes the order
    of its points, so every process maps grid ids to the same points."""
    if kind == "grid":
        return optuna.samplers.GridSampler(space.grid(), seed=seed)
    return optuna.samplers.TPESampler(seed=seed + n_trials)


def _pruner_spec(settings: TuneSettings) -> dict[str, Any]:
    """The pruner and its settings, as the study's identity and ``study.json`` record them."""
    if settings.pruner == "median":
        return {"name": "median", "n_startup_trials": settings.pruner_startup_trials, "n_warmup_steps": 0}
    if settings.pruner == "hyperband":
        return {"name": "hyperband", "min_resource": 1, "max_resource": "auto", "reduction_factor": 3}
    return {"name": "none"}


def _make_pruner(settings: TuneSettings) -> optuna.pruners.BasePruner:
    """Optuna's pruner for ``settings.pruner`` (:func:`_pruner_spec`'s settings)."""
    spec = _pruner_spec(settings)
    if spec["name"] == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=spec["n_startup_trials"],
                                           n_warmup_steps=spec["n_warmup_steps"])
    if spec["name"] == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=spec["min_resource"],
                                              max_resource=spec["max_resource"],
                                              reduction_factor=spec["reduction_factor"])
    return optuna.pruners.NopPruner()


def _run_one(settings: TuneSettings, space: SearchSpace, metric: str, storage: Path, study: optuna.Study,
             target: int, echo: Callable[[str], None]) -> None:
    """Run one trial (a queued rerun first): train and validate it, record it in the study, write its files.

    Optuna's ``optimize`` runs it (one trial), so samplers see the trial life cycle they expect. A trial that
    raises anything but :class:`TrialFailed` (an interrupt, an error in the config, the data or the code) is
    left interrupted, to be rerun by the next run, and the error stops the search.
    """
    n_trials = len(study.get_trials(deepcopy=False))
    study.sampler = _make_sampler(settings.sampler, space, settings.seed, n_trials)
    record: dict[str, Any] = {}

    def objective(trial: optuna.Trial) -> float:
        params = space.suggest(trial)
        folder = trial_dir(storage, trial.number)
        trial.set_user_attr("dir", shown(folder))
        record.update(number=trial.number, params=params, overrides=overrides(params), metric=metric,
                      config=shown(folder / "config.yaml"))
        resume = _interrupted_checkpoint(study, storage, trial.user_attrs.get("rerun_of"))
        if resume is not None:
            echo(f"trial {trial.number} continues from {shown(resume)}")
        def report(epoch: int, value: float) -> bool:
            trial.report(value, step=epoch)
            return trial.should_prune()

        try:
            pruning = {"report": report} if settings.pruner != "none" else {}
            result = run_trial(settings.config, params, folder, metric, resume_from=resume, **pruning)
        except TrialPruned as exc:
            trial.set_user_attr("pruned_at_epoch", exc.epoch)
            trial.set_user_attr("pruned_value", exc.value)
            record.update(state="pruned", value=None, pruned_at_epoch=exc.epoch, pruned_value=exc.value)
            raise optuna.TrialPruned(str(exc)) from None
        except TrialFailed as exc:
            trial.set_user_attr("failure", str(exc))
            record.update(state="failed", value=None, failure=str(exc))
            raise
        except BaseException as exc:
            error = " ".join(str(exc).split())[:500] or type(exc).__name__
            trial.set_user_attr("error", error)
            write_json(folder / "result.json",
                       {**record, "state": "interrupted", "value": None, "error": error})
            raise
        trial.set_user_attr("result", {k: v for k, v in result.items() if k != "value"})
        record.update(state="complete", **result)
        return result["value"]

    study.optimize(objective, n_trials=1, catch=(TrialFailed,))
    folder = trial_dir(storage, record["number"])
    params = record["params"]
    write_json(folder / "result.json", record)
    best = _best_counted(study, target)
    if best is not None:
        write_best(storage, settings.config, {"number": best.number, "value": best.value,
                                              "params": best.params}, metric)
    done = n_finished(study)
    shown_params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v!r}"
                             for k, v in params.items())
    outcome = f"{metric} = {record['value']:.4f}" if record["state"] == "complete" else record["state"]
    if record["state"] == "pruned":
        outcome = f"pruned after epoch {record['pruned_at_epoch']} ({metric} {record['pruned_value']:.4f})"
    best_text = f"best {best.value:.4f} (trial {best.number})" if best is not None else "none complete yet"
    echo(f"trial {record['number']} [{done}/{target}] {shown_params}: {outcome}; {best_text}")
    write_json(storage / "study.json", _summary(settings, space, metric, storage, study, target,
                                                space.grid_size() if settings.sampler == "grid" else None))


def _interrupted_checkpoint(study: optuna.Study, storage: Path, rerun_of: int | None) -> Path | None:
    """The furthest ``last.ckpt`` the interrupted attempts of a rerun left: the trial it reruns, that
    trial's own ``rerun_of`` and so on back (each attempt logs into its own trial folder), or ``None``."""
    folders, seen = [], set()
    while rerun_of is not None and rerun_of not in seen:
        seen.add(rerun_of)
        folders.append(trial_dir(storage, rerun_of))
        rerun_of = study.trials[rerun_of].user_attrs.get("rerun_of")
    return furthest_last_checkpoint(*folders) if folders else None


def _counted(study: optuna.Study, target: int) -> list[optuna.trial.FrozenTrial]:
    """The first ``target`` finished trials by number: the ones the budget covers."""
    finished = [t for t in study.get_trials(deepcopy=False) if state_of(t) in FINISHED]
    return sorted(finished, key=lambda t: t.number)[:target]


def _best_counted(study: optuna.Study, target: int) -> optuna.trial.FrozenTrial | None:
    complete = [t for t in _counted(study, target) if state_of(t) == "complete"]
    return best_trial(complete, study.direction)


def _summary(settings: TuneSettings, space: SearchSpace, metric: str, storage: Path, study: optuna.Study,
             target: int, grid_size: int | None) -> dict[str, Any]:
    from recframe.callbacks import library_versions

    trials = study.get_trials(deepcopy=False)
    reruns = rerun_map(study)
    best = _best_counted(study, target)
    counts = {state: sum(state_of(t) == state for t in trials)
              for state in ("complete", "failed", "pruned", "interrupted")}
    return {
        "config": shown(settings.config),
        "space": shown(settings.space),
        "search_space": space.describe(),
        "sampler": settings.sampler,
        "seed": settings.seed,
        "metric": metric,
        "direction": settings.direction,
        "selection": "validation only: each trial's value is the metric of its best-validation checkpoint; "
                     "no test metric is computed",
        "pruner": _pruner_spec(settings),
        "trial_budget": settings.trials,
        "budget_history": study.user_attrs.get("budgets", []),
        "grid_size": grid_size,
        "n_finished": counts["complete"] + counts["failed"] + counts["pruned"],
        "n_counted": len(_counted(study, target)),
        "n_complete": counts["complete"],
        "n_failed": counts["failed"],
        "n_pruned": counts["pruned"],
        "n_interrupted": counts["interrupted"],
        "best": None if best is None else {
            "number": best.number, "value": best.value, "params": dict(best.params),
            "overrides": overrides(dict(best.params)), "config": shown(storage / "best.yaml"),
            "trial_config": shown(trial_dir(storage, best.number) / "config.yaml")},
        "trials": [trial_record(t, reruns) for t in trials],
        "versions": library_versions(),
    }
