"""The study storage of ``recframe tune``: an Optuna study in ``STORAGE/study.db`` (SQLite), one process.

A study is bound to what it searches (its *identity*: the config's and the space's content digests, sampler,
seed, metric and direction); a rerun with another identity on the same storage is refused. Trial states as
``recframe tune`` reports them:

* ``complete``: trained and validated; its value counts.
* ``failed``: ran to its end without a usable result (the model diverged, no best checkpoint); it counts
  against the trial budget and is not rerun.
* ``pruned``: stopped by the pruner (``--pruner``) after a validation whose metric fell behind the earlier
  trials' at the same epoch; it counts against the trial budget, has no value and is not rerun.
* ``interrupted``: the process died or stopped during the trial (a kill, Ctrl-C, a crash). The next run
  marks it failed in the storage and queues a rerun with the same parameters (``rerun_of``); it does not count
  against the budget.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from recframe.tuning.errors import TuneError
from recframe.tuning.results import shown

__all__ = ["STUDY_NAME", "best_trial", "exclusive", "n_finished", "open_study", "recover_interrupted",
           "rerun_map", "state_of", "storage_url", "trial_record"]

STUDY_NAME = "recframe-tune"
FINISHED = ("complete", "failed", "pruned")


@contextlib.contextmanager
def exclusive(storage: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``storage`` for this process (released by the OS if the process dies)."""
    storage.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # no advisory locks on this platform: one process at a time is the user's to keep
        yield
        return
    with open(storage / ".lock", "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TuneError(f"{shown(storage)}: another recframe tune is running on this storage; wait for "
                            "it to end or pass another --storage") from None
        yield


def storage_url(storage: Path) -> str:
    """The SQLite URL of the study database in ``storage``."""
    return f"sqlite:///{(storage / 'study.db').resolve()}"


def open_study(storage: Path, identity: dict[str, Any], direction: str,
               sampler: optuna.samplers.BaseSampler | None = None) -> optuna.Study:
    """Create or load the study in ``storage``; refuse one started with another identity."""
    study = optuna.create_study(study_name=STUDY_NAME, storage=storage_url(storage), direction=direction,
                                sampler=sampler, load_if_exists=True)
    saved = study.user_attrs.get("identity")
    if saved is None:
        study.set_user_attr("identity", identity)
    elif saved != identity:
        differ = [key for key in identity if saved.get(key) != identity[key]]
        raise TuneError(f"{shown(storage)} holds a study with another {', '.join(differ)}; rerun the command "
                        "that started it to continue it, or pass a new --storage")
    return study


def state_of(trial: FrozenTrial) -> str:
    """``complete``, ``failed``, ``interrupted``, ``running``, ``waiting`` or ``pruned`` (module doc)."""
    if trial.state == TrialState.FAIL:
        return "failed" if "failure" in trial.user_attrs else "interrupted"
    return trial.state.name.lower()


def n_finished(study: optuna.Study) -> int:
    """Trials that count against the budget: complete, failed and pruned ones."""
    return sum(state_of(t) in FINISHED for t in study.get_trials(deepcopy=False))


def recover_interrupted(study: optuna.Study) -> list[int]:
    """Mark trials a dead process left running as failed and queue one rerun of each interrupted trial.

    Call it while holding :func:`exclusive` (no other process can own a running trial then). Returns the
    numbers of the interrupted trials queued now; a queued rerun carries ``rerun_of`` and runs before any
    new trial.
    """
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study.tell(trial.number, state=TrialState.FAIL)
    trials = study.get_trials(deepcopy=False)
    rerun = {t.user_attrs.get("rerun_of") for t in trials}
    queued = []
    for trial in trials:
        if state_of(trial) == "interrupted" and trial.number not in rerun:
            study.enqueue_trial(trial.params, user_attrs={"rerun_of": trial.number})
            queued.append(trial.number)
    return queued


def best_trial(trials: list[FrozenTrial], direction: optuna.study.StudyDirection) -> FrozenTrial | None:
    """The complete trial of ``trials`` with the best value (ties: the earliest), or ``None``."""
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    if not complete:
        return None
    sign = -1.0 if direction == optuna.study.StudyDirection.MAXIMIZE else 1.0
    return min(complete, key=lambda t: (sign * float(t.value), t.number))


def trial_record(trial: FrozenTrial, rerun_as: dict[int, int]) -> dict[str, Any]:
    """One trial as ``study.json`` lists it (its ``result.json`` has the same keys plus the run details)."""
    record: dict[str, Any] = {"number": trial.number, "state": state_of(trial), "params": dict(trial.params),
                              "value": trial.value if trial.state == TrialState.COMPLETE else None}
    for key in ("dir", "failure", "error", "rerun_of", "pruned_at_epoch", "pruned_value"):
        if key in trial.user_attrs:
            record[key] = trial.user_attrs[key]
    if trial.number in rerun_as:
        record["rerun_as"] = rerun_as[trial.number]
    result = trial.user_attrs.get("result")
    if isinstance(result, dict):
        record["valid"] = result.get("valid")
    return record


def rerun_map(study: optuna.Study) -> dict[int, int]:
    """interrupted trial number -> the number of the trial that reran it."""
    return {t.user_attrs["rerun_of"]: t.number for t in study.get_trials(deepcopy=False)
            if "rerun_of" in t.user_attrs}
