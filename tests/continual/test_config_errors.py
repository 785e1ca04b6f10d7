"""``recframe continual`` refuses a bad config in one line naming the file and the key, before the data load
and any training; progress is shown by default on a terminal (issue 33, items 5 and 6)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from recframe.cli import main as recframe_main
from recframe.continual import cli
from recframe.continual.baselines import BackboneSettings, Replay
from recframe.data.interactions import DataError
from tests.cli_support import refuse_work

BASE: dict[str, Any] = {
    "seeds": [0],
    "data": {"dataset": "continual-shift", "n_stages": 3,
             "synthetic": {"n_users": 30, "n_items": 240, "per_stage": 8}},
    "backbone": {"hidden": 16, "n_layers": 1, "n_heads": 1, "inner": 32, "max_len": 20, "base_epochs": 1,
                 "stage_epochs": 1},
    "methods": {"fine-tune": {}},
}


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record (and refuse) the data load and the comparison."""
    return refuse_work(monkeypatch, cli, ("build_data", "run_comparison"))


def _continual_error(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``recframe continual`` on a config file holding ``text``; its one stderr line (exit 2, < 5 s)."""
    config = tmp_path / "continual.yaml"
    config.write_text(text)
    start = time.perf_counter()
    with pytest.raises(SystemExit) as exit_:
        recframe_main(["continual", "--config", str(config)])
    assert time.perf_counter() - start < 5
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert str(config) in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "patch, needle",
    [
        ({"backbone": {"hidden": "sixteen"}}, "backbone.hidden: expected a whole number, got 'sixteen'"),
        ({"methods": {"replay": {"capacity": -5}}}, "methods.replay.capacity: -5; it must be a whole number"),
        ({"methods": {"replay": {"capacity": 2.5}}}, "methods.replay.capacity: expected a whole number"),
        ({"backbone": {"hidden": 16, "n_heads": 3}}, "backbone.n_heads: 3; it must be a divisor of hidden"),
        ({"backbone": {"dropout": 1.5}}, "backbone.dropout: 1.5; it must be in [0, 1)"),
        ({"backbone": {"lr": 0}}, "backbone.lr: 0.0; it must be > 0"),
        ({"methods": {"distillation": {"temperature": 0}}}, "methods.distillation.temperature: 0.0"),
        ({"methods": {"ewc": {"gamma": 2}}}, "methods.ewc.gamma: 2.0; it must be in [0, 1]"),
        ({"methods": {"vamirec": {"short_len": 99}}}, "methods.vamirec.short_len: 99; it must be in 1.."),
        ({"methods": {"ewc": {"lam": "big"}}}, "methods.ewc.lam: expected a number, got 'big'"),
        ({"data": {"dataset": "continual-shift", "n_stages": 1}}, "data.n_stages: 1"),
        ({"seeds": [0, True]}, "seeds: expected a non-empty list of whole numbers"),
    ],
)
def test_a_wrong_type_or_range_is_one_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_work: list[str], patch: dict, needle: str
) -> None:
    err = _continual_error(tmp_path, yaml.safe_dump({**BASE, **patch}), capsys)
    assert needle in err, err
    assert no_work == []


@pytest.mark.parametrize(
    "text, needle",
    [
        ("data:\n  dataset: ml-100k\n backbone: {}\n", "not valid YAML at line 3, column 2"),
        ("data: {dataset: ml-100k\nseeds: [0]\n", "not valid YAML at line 2"),
        ("[1, 2]\n", "expected a mapping of keys at the top level, got a list"),
        ("data: {dataset: ml-100k}\nbackbone: [16]\n", "backbone: expected a mapping, got [16]"),
    ],
)
def test_malformed_yaml_is_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_work: list[str], text: str, needle: str
) -> None:
    err = _continual_error(tmp_path, text, capsys)
    assert needle in err, err
    assert no_work == []


def test_a_refused_synthetic_keyword_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = {"dataset": "continual-shift", "n_stages": 3, "synthetic": {"n_items": 7}}
    err = _continual_error(tmp_path, yaml.safe_dump({**BASE, "data": data}), capsys)
    assert "data.synthetic: make_shift_data needs n_items divisible" in err


def test_the_settings_are_typed_and_the_learners_check_the_same_ranges() -> None:
    cfg = cli.load_config({**BASE, "backbone": {"lr": "1e-3", "hidden": 16, "n_heads": 2},
                           "methods": {"ewc": {"lam": 10}}})
    assert cfg.backbone.lr == 1e-3 and cfg.methods == {"ewc": {"lam": 10.0}}
    with pytest.raises(ValueError, match="capacity: 0"):  # the constructor refuses it before building
        Replay(None, BackboneSettings(), capacity=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_heads"):
        BackboneSettings(hidden=10, n_heads=4)
    with pytest.raises(DataError, match=r"^backbone\.hidden: expected"):  # a dict source: no file prefix
        cli.load_config({**BASE, "backbone": {"hidden": "sixteen"}})


def _fake_run(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    seen: list[bool] = []
    monkeypatch.setattr(cli, "build_data", lambda data: SimpleNamespace(
        n_stages=3, inter=SimpleNamespace(fingerprint="f")))

    def run(data: Any, settings: Any, methods: Any, seeds: Any, share: float, progress: bool) -> dict:
        seen.append(progress)
        return {"runs": {"0": {"fine-tune": {"test": {"ndcg@10": 0.1, "recall@10": 0.2}}}}}

    monkeypatch.setattr(cli, "run_comparison", run)
    return seen


def test_progress_is_on_by_default_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = _fake_run(monkeypatch)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(BASE))
    monkeypatch.setattr(cli.sys.stderr, "isatty", lambda: False)
    assert cli.main(["--config", str(config)]) == 0
    assert cli.main(["--config", str(config), "--progress"]) == 0
    monkeypatch.setattr(cli.sys.stderr, "isatty", lambda: True)
    assert cli.main(["--config", str(config)]) == 0
    assert cli.main(["--config", str(config), "--no-progress"]) == 0
    assert seen == [False, True, True, False]
