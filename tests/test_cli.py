"""The recframe command: config errors, checkpoints with metadata, atomic writes, clear failures."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from recframe.checkpoint_io import CheckpointError, load_checkpoint, save_checkpoint
from recframe.cli import main, run_cli
from recframe.data.datamodule import RecDataModule
from recframe.data.interactions import DataError

SMOKE = Path(__file__).resolve().parent.parent / "configs" / "smoke"
QUIET = ["--trainer.enable_progress_bar", "false"]



def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_wrong_key_stops_before_any_work_naming_key_and_file(in_tmp: Path, capsys) -> None:
    bad = _write(in_tmp / "bad.yaml", "model:\n  class_path: recframe.models.SASRec\n"
                 "  init_args: {hiddn: 3}\ndata: {dataset: synthetic}\n")
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--config", str(bad)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "config error in" in err and "bad.yaml" in err and "hiddn" in err
    assert len(err.splitlines()) < 20  # one clear message, not the whole usage text
    assert not (in_tmp / "runs").exists()


def test_wrong_type_names_the_key(in_tmp: Path, capsys) -> None:
    bad = _write(in_tmp / "bad.yaml", "model:\n  class_path: recframe.models.Popularity\n"
                 "data: {dataset: synthetic, max_len: twenty}\n")
    with pytest.raises(SystemExit):
        main(["fit", "--config", str(bad)])
    assert 'data.max_len' in capsys.readouterr().err


def test_unknown_dataset_is_one_clear_error(in_tmp: Path, capsys) -> None:
    cfg = _write(in_tmp / "c.yaml", "model:\n  class_path: recframe.models.Popularity\n"
                 "data: {dataset: no-such-dataset}\n")
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--config", str(cfg), *QUIET])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "no-such-dataset" in err and "ml-100k" in err and "Traceback" not in err


def test_fit_writes_checkpoints_with_run_metadata(in_tmp: Path) -> None:
    main(["fit", "--config", str(SMOKE / "popularity.yaml"), *QUIET])
    ckpts = sorted(in_tmp.glob("runs/smoke_popularity/version_0/checkpoints/*.ckpt"))
    assert [p.name for p in ckpts if p.name == "last.ckpt"] == ["last.ckpt"]
    ckpt = torch.load(ckpts[0], weights_only=True)  # plain containers and tensors only
    meta = ckpt["recframe"]
    assert "recframe.models.Popularity" in meta["config"] and "seed_everything: 0" in meta["config"]
    assert meta["seed"] == 0 and len(meta["data_fingerprint"]) == 16
    assert {"torch", "lightning", "numpy", "python"} <= set(meta["versions"])
    assert (in_tmp / "runs/smoke_popularity/version_0/metrics.csv").read_text().count("val/ndcg@10") == 1
    # the same data settings give the same fingerprint
    dm = RecDataModule(dataset="synthetic", synthetic={"n_users": 200, "n_items": 120, "n_clusters": 4,
                                                       "mean_length": 20, "seed": 0}, max_len=20,
                       batch_size=256)
    assert dm.fingerprint == meta["data_fingerprint"]


def test_checkpoint_writes_are_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "model.ckpt"
    save_checkpoint({"w": torch.ones(3)}, target)

    def crash(obj, fh) -> None:
        fh.write(b"partial")
        raise KeyboardInterrupt  # killed mid-write

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint({"w": torch.zeros(3)}, target)
    monkeypatch.undo()
    assert torch.equal(load_checkpoint(target)["w"], torch.ones(3))  # old file intact
    assert [p.name for p in tmp_path.iterdir()] == ["model.ckpt"]  # no temp file left


def test_truncated_or_missing_checkpoint_is_refused_clearly(tmp_path: Path) -> None:
    good = tmp_path / "good.ckpt"
    save_checkpoint({"w": torch.randn(100, 100)}, good)
    bad = tmp_path / "bad.ckpt"
    shutil.copy(good, bad)
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="bad.ckpt is truncated or corrupted"):
        load_checkpoint(bad)
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.ckpt")


def test_checkpoint_with_code_is_refused(tmp_path: Path) -> None:
    evil = tmp_path / "evil.ckpt"
    torch.save({"obj": Path("x")}, evil)  # a pickled class instance, not plain data
    with pytest.raises(CheckpointError, match="evil.ckpt"):
        load_checkpoint(evil)


def test_empty_split_after_filtering_names_the_fix() -> None:
    dm = RecDataModule(dataset="synthetic", synthetic={"n_users": 30, "n_items": 20, "seed": 0},
                       user_k=10_000)
    with pytest.raises(DataError, match="user_k"):
        _ = dm.split


def test_table_without_column_map_is_a_clear_error(tmp_path: Path) -> None:
    csv = _write(tmp_path / "t.csv", "u,i\n1,2\n")
    dm = RecDataModule(dataset=str(csv))
    with pytest.raises(DataError, match="data.columns"):
        _ = dm.split


def test_data_list_command(capsys) -> None:
    assert main(["data", "list"]) == 0
    assert "ml-100k" in capsys.readouterr().out


def test_in_process_runs_also_store_the_resolved_config(in_tmp: Path) -> None:
    from recframe.runs import fit_and_test

    res = fit_and_test(SMOKE / "popularity.yaml")
    assert res["test"]["ndcg@10"] > 0
    ckpt = torch.load(next(in_tmp.glob("runs/smoke_popularity/version_0/checkpoints/last.ckpt")),
                      weights_only=True)
    assert "recframe.models.Popularity" in ckpt["recframe"]["config"]


def test_test_subcommand_restores_a_graph_model_exactly(in_tmp: Path) -> None:
    from recframe.runs import fit_and_test

    fitted = fit_and_test(SMOKE / "lightgcn.yaml", ["--trainer.max_epochs", "2"])
    best = next(in_tmp.glob("runs/smoke_lightgcn/version_0/checkpoints/best-*.ckpt"))
    cli = run_cli(["test", "--config", str(SMOKE / "lightgcn.yaml"), "--ckpt_path", str(best), *QUIET])
    restored = {k[len("test/"):]: v for k, v in cli.trainer.callback_metrics.items() if k.startswith("test/")}
    assert restored.keys() == fitted["test"].keys()
    for key, value in fitted["test"].items():
        assert float(restored[key]) == pytest.approx(value, abs=1e-7), key


def test_quiet_runs_print_one_line_per_validation_and_evaluation_pass(in_tmp: Path, capsys) -> None:
    from recframe.runs import fit_and_test

    fit_and_test(SMOKE / "lightgcn.yaml", ["--trainer.max_epochs", "2"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[lightgcn] ")]
    assert lines[0] == "[lightgcn] fit from epoch 0 to at most 2"
    epochs = [line for line in lines if " epoch " in line and "val_ndcg " in line]
    assert [line.split(":")[0] for line in epochs] == ["[lightgcn] epoch 1/2", "[lightgcn] epoch 2/2"]
    values = [float(line.split("val_ndcg ")[1].split()[0].rstrip(",")) for line in epochs]
    assert epochs[1].split("(best of this fit ")[1].startswith(f"{max(values):.4f})")
    assert lines[-4:-2] == ["[lightgcn] validation pass of the selected checkpoint started",
                            lines[-3]] and lines[-3].startswith("[lightgcn] validation pass done in ")
    assert lines[-2] == "[lightgcn] test pass of the selected checkpoint started"
    assert lines[-1].startswith("[lightgcn] test pass done in ") and lines[-1].endswith(" s")


def test_bare_command_prints_usage(capsys) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert "recframe fit" in out and "recframe data" in out


def test_unknown_subcommand_is_one_line(capsys) -> None:
    assert main(["predict", "--config", "x.yaml"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'predict'" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("config", sorted(p.name for p in SMOKE.glob("*.yaml")))
def test_every_smoke_config_trains_and_tests(config: str, in_tmp: Path) -> None:
    from recframe.runs import fit_and_test

    res = fit_and_test(SMOKE / config, ["--trainer.max_epochs", "1"])
    assert 0 < res["test"]["ndcg@10"] <= 1 and res["epochs"] == 1


def test_resumed_fit_reports_the_training_time_of_every_process(in_tmp: Path) -> None:
    from recframe.runs import fit_and_test

    first = fit_and_test(SMOKE / "sasrec.yaml", ["--trainer.max_epochs", "2"])
    assert first["train_seconds_complete"] and first["train_seconds"] > 0
    last = next(in_tmp.glob("runs/*/version_0/checkpoints/last.ckpt"))
    carried = load_checkpoint(last)["callbacks"]["Timer"]["time_elapsed"]["train"]
    half_step = 0.05  # train_seconds is rounded to 0.1 s
    assert 0 < carried <= first["train_seconds"] + half_step
    resumed = fit_and_test(SMOKE / "sasrec.yaml", ["--trainer.max_epochs", "3"], ckpt_path=last)
    assert resumed["epochs"] == 3 and resumed["train_seconds_complete"]
    assert resumed["train_seconds"] + half_step > carried  # the first process's time plus the third epoch's


#: ML-100K configs of subcommands that are not `recframe fit` (each validated by its own loader below)
OWN_LOADERS = {"continual_ml100k.yaml": "recframe.continual.cli",
               "unlearn_ml100k_horror.yaml": "recframe.unlearning.cli",
               "unlearn_ml100k_pre1970.yaml": "recframe.unlearning.cli"}


@pytest.mark.parametrize("config", sorted(p.name for p in SMOKE.parent.glob("*_ml100k*.yaml")
                                          if p.name not in OWN_LOADERS))
def test_every_ml100k_config_validates_against_the_schema(config: str, in_tmp: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:  # --print_config validates, prints and exits before any work
        main(["fit", "--config", str(SMOKE.parent / config), "--print_config"])
    assert exc.value.code in (0, None)
    assert "class_path: recframe.models." in capsys.readouterr().out


@pytest.mark.parametrize("config", sorted(OWN_LOADERS))
def test_subcommand_configs_load_with_their_own_loader(config: str) -> None:
    import importlib

    assert importlib.import_module(OWN_LOADERS[config]).load_config(SMOKE.parent / config) is not None


def test_code_version_names_the_checkout_commit_and_is_none_outside_git(tmp_path: Path) -> None:
    import subprocess

    from recframe.runs import code_version

    root = Path(__file__).resolve().parent.parent
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("the tests do not run from a git checkout")
    version = code_version()
    assert version is not None and head.stdout.startswith(version["commit"]) and len(version["commit"]) == 12
    assert isinstance(version["dirty"], bool)
    assert code_version(tmp_path) is None  # not a checkout
