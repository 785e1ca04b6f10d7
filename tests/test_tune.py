"""recframe tune: space-file errors, a grid search chosen on validation only, resuming after a kill."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from recframe.cli import main
from recframe.tuning import SpaceError, TrialFailed, TuneError, TuneSettings, load_space, tune
from recframe.tuning import runner as tune_runner

ROOT = Path(__file__).resolve().parent.parent
BPRMF = ROOT / "configs" / "smoke" / "bprmf.yaml"
LR_SPACE = "model.init_args.lr: {type: categorical, choices: [1.0e-4, 5.0e-2]}\n"



@pytest.fixture()
def no_test_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any test-stage evaluation fails the test: tuning must never score test data."""
    import lightning.pytorch as lp

    from recframe.models.base import RecModel

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("recframe tune ran the test stage")

    monkeypatch.setattr(lp.Trainer, "test", refuse)
    monkeypatch.setattr(RecModel, "test_step", refuse)


def _space(tmp: Path, text: str, name: str = "space.yaml") -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def _settings(tmp: Path, space: Path, trials: int, **kw: Any) -> TuneSettings:
    return TuneSettings(config=BPRMF, space=space, trials=trials, storage=tmp / "study", **kw)


BAD_SPACES = [
    ("model.init_args.lr: {type: float, low: 0.1, high: 0.01}", "model.init_args.lr", "above high"),
    ("model.init_args.lr: {type: gaussian, low: 0.1, high: 1}", "model.init_args.lr",
     "float, int, categorical"),
    ("model.init_args.dim: {type: int, low: 8, high: 64.5}", "model.init_args.dim", "whole numbers"),
    ("model.init_args.lr: {type: float, low: 0.0, high: 1.0, log: true}", "model.init_args.lr", "low > 0"),
    ("model.init_args.lr: {type: float, low: 1.0e-4, high: 1.0, log: true, step: 0.1}", "model.init_args.lr",
     "log and step"),
    ("model.init_args.dim: {type: categorical, choices: []}", "model.init_args.dim", "non-empty list"),
    ("model.init_args.dim: {type: categorical, choices: [[8, 16]]}", "model.init_args.dim", "not a scalar"),
    ("model.init_args.lr: {type: float, low: 1.0e-4, high: 0.1, spread: 3}", "model.init_args.lr",
     "unknown setting 'spread'"),
    ("model.init_args.lr: {type: float, low: 1.0e-4, high: 0.1, grid: [0.5]}", "model.init_args.lr",
     "outside"),
    ("model.init_args.lr: {type: float, low: abc, high: 0.1}", "model.init_args.lr", "write a number"),
    ("model.init_args.lr: 0.01", "model.init_args.lr", "distribution mapping"),
    ("lr: {type: float, low: 1.0e-4, high: 0.1}", "'lr'", "starts with one of"),
    ("model.init_args.max_len: {type: int, low: 5, high: 10}", "model.init_args.max_len", "data.max_len"),
    ("trainer.logger.init_args.save_dir: {type: categorical, choices: [a]}", "trainer.logger", "--storage"),
]


@pytest.mark.parametrize(("text", "key", "fix"), BAD_SPACES)
def test_bad_space_is_one_error_naming_file_and_key(tmp_path: Path, text: str, key: str, fix: str) -> None:
    path = _space(tmp_path, text + "\n")
    with pytest.raises(SpaceError) as exc:
        load_space(path)
    message = str(exc.value)
    assert str(path) in message and key in message and fix in message
    assert "\n" not in message


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "model.init_args.lr: {type: float\n"])
def test_space_that_is_not_a_mapping_names_the_file(tmp_path: Path, text: str) -> None:
    path = _space(tmp_path, text)
    with pytest.raises(SpaceError, match="space.yaml"):
        load_space(path)
    with pytest.raises(SpaceError, match="no such search-space file"):
        load_space(tmp_path / "missing.yaml")


def test_space_reads_every_distribution(tmp_path: Path) -> None:
    space = load_space(_space(tmp_path, (
        "model.init_args.lr: {type: float, low: 1e-4, high: 1e-2, log: true, grid: [1e-3, 1e-2]}\n"
        "model.init_args.dim: {type: int, low: 16, high: 64, step: 16}\n"
        "model.init_args.optimizer: {type: categorical, choices: [adam, adamw]}\n")))
    lr, dim, opt = space.params
    assert (lr.kind, lr.low, lr.high, lr.log, lr.grid) == ("float", 1e-4, 1e-2, True, (1e-3, 1e-2))
    assert space.grid() == {"model.init_args.lr": [1e-3, 1e-2], "model.init_args.dim": [16, 32, 48, 64],
                            "model.init_args.optimizer": ["adam", "adamw"]}
    assert space.grid_size() == 16
    assert opt.choices == ("adam", "adamw") and dim.step == 16


def test_grid_needs_points_for_a_float(tmp_path: Path) -> None:
    space = load_space(_space(tmp_path, "model.init_args.lr: {type: float, low: 1.0e-4, high: 0.1}\n"))
    with pytest.raises(SpaceError, match=r"space\.yaml: key 'model\.init_args\.lr': --sampler grid needs"):
        space.grid()


def test_cli_prints_one_line_for_a_bad_space_and_a_misspelt_key(in_tmp: Path, capsys) -> None:
    bad = _space(in_tmp, "model.init_args.lr: {type: float, low: 1, high: 0.5}\n")
    with pytest.raises(SystemExit) as exc:
        main(["tune", "--config", str(BPRMF), "--space", str(bad), "--trials", "2"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("recframe tune: config error: ") and "space.yaml" in err
    assert "model.init_args.lr" in err
    assert len(err.splitlines()) == 1
    # a key the config's schema lacks stops before any study or trial exists, naming the key
    typo = _space(in_tmp, "model.init_args.lrr: {type: categorical, choices: [0.01]}\n", "typo.yaml")
    with pytest.raises(SystemExit):
        main(["tune", "--config", str(BPRMF), "--space", str(typo), "--trials", "2", "--storage", "st"])
    err = capsys.readouterr().err
    assert "typo.yaml: key 'model.init_args.lrr'" in err and "lrr" in err
    assert not (in_tmp / "st").exists()


def test_test_metric_is_refused(in_tmp: Path) -> None:
    with pytest.raises(TuneError, match="validation only"):
        tune(_settings(in_tmp, _space(in_tmp, LR_SPACE), 1, metric="test/ndcg@10"))


def _no_test_keys(node: Any, where: str) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            assert not str(key).lower().startswith("test"), f"{where} has a test key {key!r}"
            _no_test_keys(value, where)
    elif isinstance(node, list):
        for value in node:
            _no_test_keys(value, where)


def test_grid_search_picks_the_best_validation_trial_and_never_tests(in_tmp: Path, no_test_stage: None,
                                                                      capsys) -> None:
    space = _space(in_tmp, LR_SPACE)
    assert main(["tune", "--config", str(BPRMF), "--space", str(space), "--trials", "5", "--sampler", "grid",
                 "--metric", "val/NDCG@10", "--storage", "study"]) == 0
    study_dir = in_tmp / "study"
    summary = json.loads((study_dir / "study.json").read_text())
    assert summary["trial_budget"] == 5 and summary["grid_size"] == 2  # the grid ends the study at 2
    assert summary["metric"] == "val/ndcg@10" and summary["n_complete"] == 2
    results = [json.loads(p.read_text()) for p in sorted(study_dir.glob("trials/trial_*/result.json"))]
    assert sorted(r["params"]["model.init_args.lr"] for r in results) == [1e-4, 5e-2]
    values = {r["number"]: r["value"] for r in results}
    assert len(set(values.values())) == 2  # the two settings differ on validation
    best = max(values, key=values.get)
    assert summary["best"]["number"] == best and summary["best"]["value"] == pytest.approx(values[best])
    for r in results:  # the value is the metric of the best-validation checkpoint's validation pass
        assert r["value"] == pytest.approx(r["valid"]["ndcg@10"]) and "best-epoch=" in r["best_checkpoint"]
        lr = r["params"]["model.init_args.lr"]
        resolved = yaml.safe_load((in_tmp / r["config"]).read_text())
        assert resolved["model"]["init_args"]["lr"] == pytest.approx(lr)
    # no test metric anywhere: not in the JSON outputs, not in any trial's training log
    for path in [study_dir / "study.json", *study_dir.glob("trials/*/result.json")]:
        _no_test_keys(json.loads(path.read_text()), str(path))
    for log in study_dir.glob("trials/*/version_*/metrics.csv"):
        assert "test" not in log.read_text().splitlines()[0]
    # best.yaml is the config with the best value, and recframe fit resolves it to that value
    tuned = yaml.safe_load((study_dir / "best.yaml").read_text())
    assert tuned["model"]["init_args"]["lr"] == summary["best"]["params"]["model.init_args.lr"]
    assert tuned["model"]["init_args"]["dim"] == 32
    assert tuned["data"] == yaml.safe_load(BPRMF.read_text())["data"]
    out = capsys.readouterr().out
    assert "best: trial" in out and "val/ndcg@10" in out


def test_resume_continues_the_study_and_reruns_an_interrupted_trial(in_tmp: Path, no_test_stage: None,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    space = _space(in_tmp, LR_SPACE)
    first = tune(_settings(in_tmp, space, 1), echo=lambda _: None)
    assert first["n_complete"] == 1
    # the same command with a larger budget continues: one more trial, two in all
    second = tune(_settings(in_tmp, space, 2), echo=lambda _: None)
    assert second["n_complete"] == 2 and [t["number"] for t in second["trials"]] == [0, 1]
    assert second["budget_history"] == [1, 2] and second["trial_budget"] == 2

    # a kill in the middle of trial 2 (here Ctrl-C inside the trial) leaves it running in the storage
    real_run_trial = tune_runner.run_trial

    def interrupted(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise KeyboardInterrupt

    monkeypatch.setattr(tune_runner, "run_trial", interrupted)
    with pytest.raises(KeyboardInterrupt):
        tune(_settings(in_tmp, space, 3), echo=lambda _: None)
    monkeypatch.setattr(tune_runner, "run_trial", real_run_trial)
    lines: list[str] = []
    third = tune(_settings(in_tmp, space, 3), echo=lines.append)
    states = {t["number"]: t for t in third["trials"]}
    assert states[2]["state"] == "interrupted" and states[2]["rerun_as"] == 3
    assert states[3]["state"] == "complete" and states[3]["rerun_of"] == 2
    assert states[3]["params"] == states[2]["params"]
    assert third["n_complete"] == 3 and third["n_interrupted"] == 1 and third["n_finished"] == 3
    assert any("trial 2 was interrupted" in line for line in lines)
    # nothing is left to run: the same command again changes nothing
    again = tune(_settings(in_tmp, space, 3), echo=lambda _: None)
    assert again["n_complete"] == 3 and len(again["trials"]) == 4

    # a SIGKILL leaves the trial RUNNING in the storage (SystemExit passes Optuna by, as a kill would)
    def killed(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise SystemExit(137)

    monkeypatch.setattr(tune_runner, "run_trial", killed)
    with pytest.raises(SystemExit):
        tune(_settings(in_tmp, space, 4), echo=lambda _: None)
    monkeypatch.setattr(tune_runner, "run_trial", real_run_trial)
    import optuna

    db = in_tmp / "study" / "study.db"
    stored = optuna.load_study(study_name="recframe-tune", storage=f"sqlite:///{db}")
    assert stored.trials[-1].state == optuna.trial.TrialState.RUNNING and stored.trials[-1].number == 4
    fourth = tune(_settings(in_tmp, space, 4), echo=lambda _: None)
    states = {t["number"]: t for t in fourth["trials"]}
    assert states[4]["state"] == "interrupted" and states[5]["rerun_of"] == 4
    assert states[5]["state"] == "complete" and fourth["n_complete"] == 4 and fourth["n_interrupted"] == 2
    # the storage belongs to this study: another metric is refused with one line naming the fix
    with pytest.raises(TuneError, match="another metric.*new --storage"):
        tune(_settings(in_tmp, space, 3, metric="val/hr@10"), echo=lambda _: None)


def test_failed_trial_counts_against_the_budget_and_is_not_rerun(in_tmp: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []

    def diverges(config: Any, params: dict[str, Any], trial_dir: Path, metric: str,
                 resume_from: Path | None = None) -> dict[str, Any]:
        calls.append(params)
        if len(calls) == 1:
            raise TrialFailed("the model diverged: val/ndcg@10 is nan")
        return {"value": 0.5, "valid": {"ndcg@10": 0.5}}

    monkeypatch.setattr(tune_runner, "run_trial", diverges)
    summary = tune(_settings(in_tmp, _space(in_tmp, LR_SPACE), 2, sampler="grid"), echo=lambda _: None)
    assert len(calls) == 2 and summary["n_failed"] == 1 and summary["n_complete"] == 1
    assert summary["trials"][0]["failure"].startswith("the model diverged")
    assert summary["best"]["number"] == 1
    assert json.loads((in_tmp / "study/trials/trial_0000/result.json").read_text())["state"] == "failed"


@pytest.mark.parametrize(("seed", "order", "pruned"), [(0, [5e-2, 1e-4], [1]), (1, [1e-4, 5e-2], [])])
def test_median_pruner_stops_a_trial_behind_the_earlier_ones_and_counts_it(
        in_tmp: Path, no_test_stage: None, seed: int, order: list[float], pruned: list[int]) -> None:
    """Planted: lr 1e-4 barely trains in 3 epochs, 5e-2 does. With one startup trial the median pruner stops
    the weak setting after its first validation when the strong one ran first (seed 0's grid order), and
    never stops the strong one (seed 1's order)."""
    space = _space(in_tmp, LR_SPACE)
    summary = tune(_settings(in_tmp, space, 2, sampler="grid", seed=seed, pruner="median",
                             pruner_startup_trials=1), echo=lambda _: None)
    assert [t["params"]["model.init_args.lr"] for t in summary["trials"]] == order  # the grid's order
    assert [t["number"] for t in summary["trials"] if t["state"] == "pruned"] == pruned
    assert summary["n_pruned"] == len(pruned) and summary["n_finished"] == 2  # a pruned trial is counted
    assert summary["pruner"] == {"name": "median", "n_startup_trials": 1, "n_warmup_steps": 0}
    assert summary["best"]["params"]["model.init_args.lr"] == 5e-2
    for number in pruned:
        record = json.loads((in_tmp / f"study/trials/trial_{number:04d}/result.json").read_text())
        assert record["state"] == "pruned" and record["value"] is None and record["pruned_at_epoch"] == 0
        assert record["pruned_value"] < summary["best"]["value"]
        log = (in_tmp / f"study/trials/trial_{number:04d}/version_0/metrics.csv").read_text().splitlines()
        assert {row.split(",")[0] for row in log[1:]} == {"0"}  # trained one epoch of the config's 3


def test_a_study_keeps_its_pruner(in_tmp: Path) -> None:
    space = _space(in_tmp, LR_SPACE)
    tune(_settings(in_tmp, space, 1, sampler="grid"), echo=lambda _: None)
    with pytest.raises(TuneError, match="another pruner"):
        tune(_settings(in_tmp, space, 2, sampler="grid", pruner="hyperband"), echo=lambda _: None)
    with pytest.raises(TuneError, match="--pruner bad: use one of none, median, hyperband"):
        tune(_settings(in_tmp, space, 2, pruner="bad"), echo=lambda _: None)


def test_one_process_per_storage(in_tmp: Path) -> None:
    import fcntl

    storage = in_tmp / "study"
    storage.mkdir()
    with open(storage / ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(TuneError, match="another recframe tune is running"):
            tune(_settings(in_tmp, _space(in_tmp, LR_SPACE), 1), echo=lambda _: None)


@pytest.mark.parametrize("space", sorted((ROOT / "configs" / "spaces").rglob("*.yaml")),
                         ids=lambda p: str(p.relative_to(ROOT / "configs" / "spaces")))
def test_shipped_spaces_fit_the_config_they_name(space: Path) -> None:
    """Each shipped space parses, has a grid, and every value fits the config its ``# Run:`` line names."""
    from recframe.tuning.objective import check_overrides

    parsed = load_space(space)
    assert parsed.grid_size() >= 2
    run = next(line for line in space.read_text().splitlines() if line.startswith("# Run: recframe tune"))
    config = ROOT / run.split("--config ")[1].split()[0]
    check_overrides(config, parsed.candidates(), str(space))


def test_the_amazon_search_plan_gives_every_model_the_same_budget() -> None:
    """One budget, fixed before the search: every Amazon space is a 12-point grid, and its run line asks for
    12 grid trials with the same pruner."""
    spaces = sorted((ROOT / "configs" / "spaces" / "amazon").glob("*.yaml"))
    assert {p.stem for p in spaces} == {"bprmf", "lightgcn", "gru4rec", "bert4rec", "sasrec", "tiger",
                                        "decoder", "flash"}
    for path in spaces:
        assert load_space(path).grid_size() == 12, path.name
        run = next(line for line in path.read_text().splitlines() if line.startswith("# Run: recframe tune"))
        assert run.endswith("--trials 12 --sampler grid --pruner median --pruner-startup-trials 3"), path.name


def test_a_killed_trial_continues_from_its_last_checkpoint(in_tmp: Path, no_test_stage: None,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A trial killed part-way is rerun from the ``last.ckpt`` it left and ends as the uninterrupted one."""
    import lightning.pytorch as lp

    from tests.kill_callbacks import KilledAtEpoch

    space = _space(in_tmp, "model.init_args.lr: {type: categorical, choices: [5.0e-2]}\n")
    whole = tune(TuneSettings(config=BPRMF, space=space, trials=1, storage=in_tmp / "whole"),
                 echo=lambda _: None)
    real_fit = lp.Trainer.fit

    def killed_fit(self, *args: Any, **kwargs: Any) -> Any:
        self.callbacks.append(KilledAtEpoch(2))  # stops when epoch 2 starts: 2 epochs and last.ckpt written
        return real_fit(self, *args, **kwargs)

    monkeypatch.setattr(lp.Trainer, "fit", killed_fit)
    with pytest.raises(RuntimeError, match="killed"):
        tune(_settings(in_tmp, space, 1), echo=lambda _: None)
    monkeypatch.setattr(lp.Trainer, "fit", real_fit)
    lines: list[str] = []
    resumed = tune(_settings(in_tmp, space, 1), echo=lines.append)
    assert any("trial 1 continues from study/trials/trial_0000/" in line for line in lines), lines
    rerun = json.loads((in_tmp / "study" / "trials" / "trial_0001" / "result.json").read_text())
    assert rerun["resumed_from"].startswith("study/trials/trial_0000/") and rerun["epochs"] == 3
    reference = json.loads((in_tmp / "whole" / "trials" / "trial_0000" / "result.json").read_text())
    assert resumed["best"]["value"] == pytest.approx(whole["best"]["value"], rel=1e-6)
    assert rerun["best_checkpoint_epoch"] == reference["best_checkpoint_epoch"]
    for key, value in reference["valid"].items():
        assert rerun["valid"][key] == pytest.approx(value, rel=1e-6, abs=1e-9), key
