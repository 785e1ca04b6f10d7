"""Constructor settings and checkpoints that do not fit the config (issue 33 items 2 and 3).

* A bad model, data or callback setting of ``recframe fit`` is one ``config error`` line naming the key,
  before any data loads (no 89-line jsonargparse message, no ZeroDivisionError after loading).
* ``--ckpt_path`` with another model class, or with a data setting that reshapes a weight, is refused in
  one line; a model setting that the checkpoint's own value replaces gets one warning line.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch

from recframe.checkpoint_io import CheckpointError
from recframe.checkpoint_match import compare_checkpoint_to_config
from recframe.cli import main, run_cli
from recframe.config_checks import SettingError
from recframe.constructor_errors import constructor_config_error
from recframe.data.datamodule import RecDataModule
from recframe.models import BPRMF, SASRec
from tests.cli_support import QUIET, SMOKE, one_error_line, run_error


@pytest.fixture()
def no_data_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the data module builds its split (the data loads)."""
    def refuse(self: RecDataModule) -> None:
        raise AssertionError("the data loaded before the bad setting was refused")

    monkeypatch.setattr(RecDataModule, "_build_split", refuse)




# ------------------------------------------------------------------------ item 2: constructor settings
@pytest.mark.parametrize(("override", "needles"), [
    (["--model.init_args.lr", "-1"], ["model.init_args.lr=-1.0", "> 0", "SASRec"]),
    (["--model.init_args.n_heads", "3"],
     ["model.init_args.n_heads=3", "must divide hidden=32", "1, 2, 4, 8"]),
    (["--model.init_args.dropout", "1.5"], ["model.init_args.dropout=1.5", "[0, 1)"]),
    (["--data.max_len", "-3"], ["data.max_len=-3", ">= 1"]),
    (["--data.batch_size", "0"], ["data.batch_size=0", ">= 1"]),
    (["--data.eval_batch_size", "0"], ["data.eval_batch_size=0", ">= 1"]),
    (["--trainer.callbacks+=calib_ext.callback.CalibrationMonitor", "--trainer.callbacks.n_bins", "0"],
     ["trainer.callbacks[0].init_args.n_bins", "positive integer", "CalibrationMonitor"]),
])
def test_a_bad_setting_is_one_config_error_before_the_data_loads(
        in_tmp: Path, no_data_load: None, override: list[str], needles: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    err = run_error("fit", ["--config", str(SMOKE / "sasrec.yaml"), *override], capsys)
    line = one_error_line(err, "config error", *needles)
    assert "Subtypes" not in err and "Given value" not in err and "ZeroDivisionError" not in err, err
    assert len(line) < 400, line


def test_a_model_setting_of_another_model_class_is_named(in_tmp: Path, no_data_load: None,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    err = run_error("fit", ["--config", str(SMOKE / "bprmf.yaml"), "--model.init_args.dim", "0"], capsys)
    one_error_line(err, "config error", "model.init_args.dim=0", "BPRMF")


def test_validate_and_test_check_settings_too(in_tmp: Path, no_data_load: None,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("validate", "test"):
        err = run_error(command, ["--config", str(SMOKE / "sasrec.yaml"), "--data.batch_size", "0"], capsys)
        one_error_line(err, "config error", "data.batch_size=0")


def test_the_traceback_shows_the_constructor_error_when_asked(in_tmp: Path, monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    monkeypatch.setenv("RECFRAME_TRACEBACK", "1")
    with pytest.raises(SettingError, match="batch_size=0"):
        main(["fit", "--config", str(SMOKE / "sasrec.yaml"), "--data.batch_size", "0", *QUIET])


def test_n_heads_is_one_stderr_line_in_a_real_process(tmp_path: Path) -> None:
    """The case that printed 89 lines: the console entry point prints the config error and nothing else."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("RECFRAME_TRACEBACK", None)
    cmd = [sys.executable, "-m", "recframe.cli", "fit", "--config", str(SMOKE / "sasrec.yaml"),
           "--model.init_args.n_heads", "3", *QUIET]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip() and not ln.startswith("Seed set")]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("recframe: config error") and "model.init_args.n_heads=3" in lines[0]


def test_model_constructors_refuse_bad_settings_by_name() -> None:
    cases = [(SASRec, {"n_heads": 3, "hidden": 32}, "n_heads"), (SASRec, {"lr": 0.0}, "lr"),
             (SASRec, {"n_heads": 4, "n_kv_heads": 3}, "n_kv_heads"), (SASRec, {"max_len": 0}, "max_len"),
             (BPRMF, {"dim": -1}, "dim"), (BPRMF, {"weight_decay": -0.1}, "weight_decay"),
             (BPRMF, {"lr": float("nan")}, "lr"), (SASRec, {"n_layers": -1}, "n_layers")]
    for cls, settings, key in cases:
        with pytest.raises(SettingError) as exc:
            cls(n_items=10, n_users=5, **settings)
        assert exc.value.key == key and exc.value.owner == cls.__name__, (cls, settings, exc.value)
        assert f"{key}=" in str(exc.value)
    SASRec(n_items=10, hidden=32, n_heads=4, n_layers=0, dropout=0.0)  # in range: builds
    with pytest.raises(SettingError, match="n_items=0"):
        BPRMF(n_items=0, n_users=5)


def test_data_module_refuses_bad_settings_before_loading(no_data_load: None) -> None:
    for key, value in [("max_len", -3), ("batch_size", 0), ("eval_batch_size", 0), ("num_workers", -1),
                       ("user_k", -2), ("batch_size", 2.5), ("batch_size", True)]:
        with pytest.raises(SettingError) as exc:
            RecDataModule(dataset="synthetic", **{key: value})
        assert exc.value.key == key, (key, value)
    RecDataModule(dataset="synthetic", max_len=1, batch_size=1, num_workers=0)  # in range: stores only


class _Probe(L.Callback):
    def __init__(self, window: int = 5, depth: int = 1) -> None:
        if depth < 1:
            raise TypeError(f"depth={depth}; give at least one level")
        if window < 1:
            raise ValueError("the probe needs a positive size")
        self.window, self.depth = window, depth


def test_a_callback_constructor_error_is_mapped_to_its_entry() -> None:
    entries = [{"class_path": "calib_ext.callback.CalibrationMonitor"}, {"class_path": "tests.x._Probe"}]
    with pytest.raises(TypeError) as exc:
        _Probe(depth=0)
    error = constructor_config_error(exc.value, entries)
    assert error is not None and str(error).startswith("trainer.callbacks[1].init_args.depth: depth=0")
    with pytest.raises(ValueError) as exc2:  # the message names no argument: the entry is named
        _Probe(window=0)
    error = constructor_config_error(exc2.value, entries)
    assert error is not None
    assert str(error).startswith("trainer.callbacks[1]: the probe needs a positive size")
    assert constructor_config_error(ValueError("raised outside any constructor")) is None


# ------------------------------------------------------------------------ item 3: checkpoint vs config
@pytest.fixture(scope="module")
def sasrec_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("ckpt_match")
    cli = run_cli(["--config", str(SMOKE / "sasrec.yaml"), "--trainer.max_epochs", "1", *QUIET,
                   "--trainer.logger.init_args.save_dir", str(tmp / "runs")], run=False)
    cli.trainer.fit(cli.model, cli.datamodule)
    return next((tmp / "runs").glob("*/version_*/checkpoints/last.ckpt"))


def test_a_data_setting_that_reshapes_a_weight_is_refused_naming_it(
        in_tmp: Path, sasrec_ckpt: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = run_error("test", ["--config", str(SMOKE / "sasrec.yaml"), "--ckpt_path", str(sasrec_ckpt),
                              "--data.max_len", "10"], capsys)
    one_error_line(err, "data.max_len=10", "max_len=20", "pos_emb.weight", "[10, 32]", "[20, 32]")
    assert "size mismatch" not in err


def test_a_checkpoint_of_another_model_class_is_refused(in_tmp: Path, sasrec_ckpt: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    err = run_error("test", ["--config", str(SMOKE / "bprmf.yaml"), "--ckpt_path", str(sasrec_ckpt)], capsys)
    one_error_line(err, "holds a SASRec model", "config's model is BPRMF")
    assert "test/ndcg" not in capsys.readouterr().out


def test_an_ignored_model_setting_is_one_warning_line(in_tmp: Path, sasrec_ckpt: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    args = ["test", "--config", str(SMOKE / "sasrec.yaml"), "--ckpt_path", str(sasrec_ckpt), *QUIET,
            "--trainer.logger", "false"]
    assert main(args) == 0
    assert "warning" not in capsys.readouterr().err  # the config it was trained with: nothing to say
    assert main([*args, "--model.init_args.hidden", "16", "--model.init_args.dropout", "0.5"]) == 0
    warnings = [ln for ln in capsys.readouterr().err.splitlines() if "warning" in ln]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("recframe test: warning: ")
    assert "model.init_args.hidden=16 (checkpoint: 32)" in warnings[0]
    assert "model.init_args.dropout=0.5 (checkpoint: 0.2)" in warnings[0]


def test_compare_checkpoint_to_config_directly() -> None:
    model = SASRec(n_items=10, hidden=8, n_heads=2, max_len=6)
    ckpt = {"hyper_parameters": {"_class_path": "recframe.models.SASRec", **model.hparams},
            "state_dict": {k: torch.zeros(v.shape) for k, v in model.state_dict().items()}}
    same = dict(model.hparams, addons=None, n_items=None)  # n_items is linked later; None and [] are alike
    assert compare_checkpoint_to_config(ckpt, "m.ckpt", "recframe.models.sasrec.SASRec", same, {}) == []
    ignored = compare_checkpoint_to_config(ckpt, "m.ckpt", "recframe.models.SASRec",
                                           {**same, "inner": 16, "new_setting": 1}, {})
    assert [(s.key, s.given, s.stored) for s in ignored] == [("inner", 16, 256)]
    # a linked setting that leaves every shape alone passes (the data checks its own fingerprint)
    assert compare_checkpoint_to_config(ckpt, "m.ckpt", "recframe.models.SASRec", {**same, "max_len": 6},
                                        {"max_len": "data.max_len"}) == []
    with pytest.raises(CheckpointError, match=r"data\.max_len=4 does not fit checkpoint m\.ckpt"):
        compare_checkpoint_to_config(ckpt, "m.ckpt", "recframe.models.SASRec", {**same, "max_len": 4},
                                     {"max_len": "data.max_len"})
    with pytest.raises(CheckpointError, match="holds a SASRec model .* config's model is BPRMF"):
        compare_checkpoint_to_config(ckpt, "m.ckpt", "recframe.models.BPRMF", {}, {})
