"""``recframe unlearn`` refuses a bad config in one line naming the file and the key, before any work: the
checkpoint is not loaded and no method (nor the retrain reference) trains (issue 33, items 4-6)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from recframe.cli import main as recframe_main
from recframe.data.interactions import DataError
from recframe.unlearning import pipeline
from recframe.unlearning.cli import load_config, training_config
from recframe.unlearning.concepts import parse_concept
from recframe.unlearning.pipeline import run_unlearning, step_progress
from recframe.unlearning.settings import parse_methods
from tests.cli_support import refuse_work

CONCEPT = 'genre == "Horror"'


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record (and refuse) every step that does work: loading the checkpoint, the data, any training."""
    return refuse_work(monkeypatch, pipeline, ("load_generative", "retrain_without", "run_ga", "run_npo",
                                              "run_tracer", "RecDataModule"))


def _unlearn_error(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``recframe unlearn`` on a config file holding ``text``; its one stderr line (exit 2, < 5 s)."""
    config = tmp_path / "unlearn.yaml"
    config.write_text(text)
    (tmp_path / "model.ckpt").write_bytes(b"not read")
    start = time.perf_counter()
    with pytest.raises(SystemExit) as exit_:
        recframe_main(["unlearn", "--config", str(config)])
    assert time.perf_counter() - start < 5
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert str(config) in err, err
    return err


def _config(tmp_path: Path, **extra: Any) -> str:
    methods = {"retrain": {"max_epochs": 2}, "ga": {"steps": 5}, "npo": {}, "suppression": {}, "tracer": {}}
    return yaml.safe_dump({"checkpoint": str(tmp_path / "model.ckpt"), "concept": CONCEPT, "methods": methods}
                          | extra)


@pytest.mark.parametrize(
    "method, setting, needle",
    [
        ("ga", {"steps": "five"}, "methods.ga.steps: expected a whole number, got 'five'"),
        ("npo", {"lr": 0}, "methods.npo.lr: 0.0; it must be > 0"),
        ("suppression", {"threshold": 7}, "methods.suppression.threshold: 7.0; it must be in [0, 1)"),
        ("tracer", {"reassign": "maybe"}, "methods.tracer.reassign: expected true or false"),
        ("retrain", {"patience": -1}, "methods.retrain.patience: -1; it must be >= 0"),
        ("npo", {"beta": 0}, "methods.npo.beta: 0.0; it must be > 0"),
    ],
)
def test_a_bad_setting_of_any_method_is_one_line_before_any_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_work: list[str], method: str, setting: dict,
    needle: str,
) -> None:
    # the bad method runs after the retrain reference (and the others listed first): still refused first
    text = yaml.safe_dump({"checkpoint": str(tmp_path / "model.ckpt"), "concept": CONCEPT,
                           "methods": {"retrain": {}, "ga": {}, "npo": {}, "suppression": {}, "tracer": {},
                                       f"{method}@bad": setting}})
    err = _unlearn_error(tmp_path, text, capsys)
    assert needle.replace(f"methods.{method}.", f"methods.{method}@bad.") in err, err
    assert no_work == []


def test_eval_batch_size_zero_is_refused_not_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_work: list[str]
) -> None:
    err = _unlearn_error(tmp_path, _config(tmp_path, eval_batch_size=0), capsys)
    assert "eval_batch_size: 0; it must be >= 1" in err
    assert no_work == []
    with pytest.raises(DataError, match="eval_batch_size"):  # the Python entry point too
        run_unlearning(None, {}, {}, parse_concept(CONCEPT), {"suppression": {}}, eval_batch_size=0)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("checkpoint: m.ckpt\nconcept: genre == 'Horror'\nmethods:\n  ga: {steps: 3\n  npo: {}\n",
         "not valid YAML at line 5, column 6"),
        ("checkpoint: m.ckpt\n concept: x\n", "not valid YAML at line 2, column 9"),
        ("- checkpoint\n- concept\n", "expected a mapping of keys at the top level, got a list"),
        ("checkpoint: m.ckpt\nconcept: genre == 'Horror'\nmethods: [ga]\n", "methods: expected a mapping"),
    ],
)
def test_malformed_yaml_is_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_work: list[str], text: str, needle: str
) -> None:
    err = _unlearn_error(tmp_path, text, capsys)
    assert needle in err, err
    assert "Traceback" not in err and no_work == []


def test_run_unlearning_checks_every_method_before_the_data_load(no_work: list[str]) -> None:
    methods = {"retrain": {}, "tracer": {"coherence_weight": -1.0}}
    with pytest.raises(DataError, match=r"methods\.tracer\.coherence_weight: -1\.0; it must be >= 0"):
        run_unlearning(None, {}, {}, parse_concept(CONCEPT), methods)
    assert no_work == []


def test_settings_keep_their_types_and_numeric_strings_are_numbers(tmp_path: Path) -> None:
    # YAML 1.1 reads 1e-4 (no dot) as a string; it is the number the user meant
    cfg = load_config({"checkpoint": "m.ckpt", "concept": CONCEPT,
                       "methods": {"ga": {"lr": "1e-4", "steps": 3}, "suppression@a": {"threshold": 0}}})
    assert cfg["methods"] == {"ga": {"lr": 1e-4, "steps": 3}, "suppression@a": {"threshold": 0.0}}
    checked = parse_methods(cfg["methods"])
    assert checked["ga"].kind == "ga" and checked["suppression@a"].kind == "suppression"
    with pytest.raises(DataError, match=r"methods\.ga\.steps: expected a whole number, got 2\.5"):
        parse_methods({"ga": {"steps": 2.5}})
    with pytest.raises(DataError, match=r"methods\.ga\.lr: expected a number, got 'fast'"):
        parse_methods({"ga": {"lr": "fast"}})
    with pytest.raises(DataError, match=r"methods\.gd: unknown method"):
        parse_methods({"gd": {}})


def _fit_config(folder: Path, runs: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "decoder_tiny.yaml"
    path.write_text(yaml.safe_dump({"trainer": {"logger": {
        "class_path": "lightning.pytorch.loggers.CSVLogger",
        "init_args": {"save_dir": str(runs), "name": "decoder_tiny"}}}}))
    return path


def test_a_missing_checkpoint_names_the_config_that_trains_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_work: list[str]
) -> None:
    fit = _fit_config(tmp_path / "configs", tmp_path / "runs")
    config = tmp_path / "configs" / "unlearn.yaml"
    config.write_text(yaml.safe_dump({"checkpoint": str(tmp_path / "runs" / "decoder_tiny"),
                                      "concept": CONCEPT}))
    with pytest.raises(SystemExit) as exit_:
        recframe_main(["unlearn", "--config", str(config)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "checkpoint:" in err and "does not exist" in err and f"recframe fit --config {fit}" in err, err
    # a run folder without a best checkpoint: the same hint
    (tmp_path / "runs" / "decoder_tiny" / "version_0").mkdir(parents=True)
    with pytest.raises(SystemExit):
        recframe_main(["unlearn", "--config", str(config)])
    err = capsys.readouterr().err.strip()
    assert "holds no best-*.ckpt" in err and f"recframe fit --config {fit}" in err, err
    assert no_work == []


def test_training_config_finds_the_run_folder_or_a_file_inside_it(tmp_path: Path) -> None:
    fit = _fit_config(tmp_path / "configs" / "sub", tmp_path / "runs")
    (tmp_path / "configs" / "broken.yaml").write_text("a: [")  # unreadable configs are skipped
    run = tmp_path / "runs" / "decoder_tiny"
    assert training_config(run, [tmp_path / "configs"]) == fit
    assert training_config(run / "version_0" / "checkpoints" / "best.ckpt", [tmp_path / "configs"]) == fit
    assert training_config(tmp_path / "runs" / "other", [tmp_path / "configs"]) is None
    assert training_config(run, [tmp_path / "nowhere"]) is None


def test_fine_tuning_progress_is_a_bar_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    with step_progress("tracer", 3, enabled=True) as update:
        assert update is not None
        for step in range(3):
            update(step, 1.5 - step)
    err = capsys.readouterr().err
    assert "tracer:" in err and "/3 " in err  # tqdm redraws at most every 0.1 s: the last frame may not show
    with step_progress("ga", 3, enabled=False) as update:
        assert update is None
