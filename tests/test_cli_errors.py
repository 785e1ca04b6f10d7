"""The recframe command ends every user error in one line (traceback only under RECFRAME_TRACEBACK=1),
links max_len from data to the model, and serves recommendations as a table, JSON or CSV."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recframe.cli import main, run_cli
from tests.cli_support import QUIET, SMOKE, one_error_line, run_error


# ----------------------------------------------------------------------------- fit / config errors
def test_eval_ks_zero_is_one_line(in_tmp: Path, capsys) -> None:
    err = run_error("fit", ["--config", str(SMOKE / "popularity.yaml"), "--data.eval_ks", "[0]"], capsys)
    one_error_line(err, "data.eval_ks", "[0]")
    assert not (in_tmp / "runs").exists() or not list(in_tmp.glob("runs/*/*/checkpoints/*.ckpt"))


def test_non_finite_scores_during_fit_is_one_line(in_tmp: Path, capsys) -> None:
    err = run_error("fit", ["--config", str(SMOKE / "bprmf.yaml"), "--model.init_args.lr", "1e30",
                      "--trainer.max_epochs", "1"], capsys)
    line = one_error_line(err, "BPRMF", "non-finite scores")
    assert line.startswith("recframe") and "Traceback" not in err


@pytest.mark.parametrize("target", ["missing_dir/", "data/shop.inter", "nowhere.csv"])
def test_a_missing_dataset_path_says_not_found(in_tmp: Path, target: str, capsys) -> None:
    err = run_error("fit", ["--config", str(SMOKE / "popularity.yaml"), "--data.dataset", target], capsys)
    line = one_error_line(err, target, "not found")
    assert "unknown dataset" not in line


def test_an_existing_inter_file_loads_as_atomic_files(in_tmp: Path) -> None:
    from recframe.data.datamodule import RecDataModule

    shop = in_tmp / "shop"
    shop.mkdir()
    rows = "".join(f"u{u}\ti{(u + t) % 7}\t4\t{t}\n" for u in range(5) for t in range(5))
    (shop / "shop.inter").write_text("user_id:token\titem_id:token\trating:float\ttimestamp:float\n" + rows)
    dm = RecDataModule(dataset=str(shop / "shop.inter"))
    assert (dm.n_users, len(dm.split.test)) == (5, 5)


def test_traceback_only_when_asked(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from recframe.data.interactions import DataError

    monkeypatch.setenv("RECFRAME_TRACEBACK", "1")
    with pytest.raises(DataError, match="eval_ks"):
        main(["fit", "--config", str(SMOKE / "popularity.yaml"), "--data.eval_ks", "[0]", *QUIET])


# ----------------------------------------------------------------------------- max_len, set once
def test_max_len_is_linked_from_data_to_the_model(in_tmp: Path) -> None:
    cli = run_cli(["--config", str(SMOKE / "sasrec.yaml"), "--data.max_len", "12", *QUIET], run=False)
    assert cli.datamodule.max_len == 12 and cli.model.max_len == 12
    cli = run_cli(["--config", str(SMOKE / "bprmf.yaml"), *QUIET], run=False)  # a model without max_len
    assert not hasattr(cli.model, "max_len")


def test_no_shipped_config_sets_the_model_max_len() -> None:
    import yaml

    for path in sorted(SMOKE.parent.glob("**/*.yaml")):
        model = yaml.safe_load(path.read_text()).get("model") or {}
        assert "max_len" not in (model.get("init_args") or {}), path


@pytest.mark.parametrize("where", ["config", "override"])
def test_a_model_max_len_is_refused_naming_the_link(in_tmp: Path, where: str, capsys) -> None:
    cfg = in_tmp / "old.yaml"
    text = (SMOKE / "sasrec.yaml").read_text()
    if where == "config":
        text = text.replace("init_args: {hidden:", "init_args: {max_len: 30, hidden:")
        extra: list[str] = []
    else:
        extra = ["--model.init_args.max_len", "30"]
    cfg.write_text(text)
    err = run_error("fit", ["--config", str(cfg), *extra], capsys)
    line = one_error_line(err, "model.init_args.max_len", "linked from data.max_len")
    assert "data.max_len" in line and "Traceback" not in err


# ----------------------------------------------------------------------------- recommend
@pytest.fixture(scope="module")
def popularity_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cli_rec")
    cli = run_cli(["--config", str(SMOKE / "popularity.yaml"), "--trainer.max_epochs", "1", *QUIET,
                   "--trainer.logger.init_args.save_dir", str(tmp / "runs")], run=False)
    cli.trainer.fit(cli.model, cli.datamodule)
    return next((tmp / "runs").glob("*/version_*/checkpoints/last.ckpt"))


@pytest.mark.parametrize("k", ["2.5", "ten", "0", "-3"])
def test_a_bad_k_is_one_line(popularity_ckpt: Path, k: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["recommend", "--ckpt", str(popularity_ckpt), "--user", "1", "-k", k])
    assert exc.value.code == 2
    one_error_line(capsys.readouterr().err, "argument -k", k, "whole number >= 1")


def test_a_huge_k_is_capped_at_the_catalogue(popularity_ckpt: Path, capsys) -> None:
    from recframe import Recommender

    rec = Recommender.from_checkpoint(popularity_ckpt)
    user = rec.user_ids[1]
    assert main(["recommend", "--ckpt", str(popularity_ckpt), "--user", user, "-k", str(10**12),
                 "--format", "json"]) == 0
    items = json.loads(capsys.readouterr().out)[0]["items"]
    assert len(items) == len(rec.recommend(users=[user], k=len(rec.item_ids)).items[0]) > 0


def test_recommend_formats_for_scripts(popularity_ckpt: Path, capsys) -> None:
    from recframe import Recommender

    rec = Recommender.from_checkpoint(popularity_ckpt)
    users = [rec.user_ids[1], rec.user_ids[2]]
    want = rec.recommend(users=users, k=3)
    args = ["recommend", "--ckpt", str(popularity_ckpt), "--user", users[0], "--user", users[1], "-k", "3"]

    assert main([*args, "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [row["query"] for row in got] == users
    assert [[e["item"] for e in row["items"]] for row in got] == want.items
    assert [[e["rank"] for e in row["items"]] for row in got] == [[1, 2, 3], [1, 2, 3]]

    assert main([*args, "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["item"] for r in rows] == want.items[0] + want.items[1]
    assert set(rows[0]) >= {"query", "rank", "item", "score", "fallback"}

    assert main([*args]) == 0  # the default: an aligned table
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:4] == ["query", "rank", "item", "score"] and len(table) == 7

    with pytest.raises(SystemExit):
        main([*args, "--format", "xml"])
    one_error_line(capsys.readouterr().err, "--format", "'xml'")


def test_decode_and_beam_reach_the_recommender(popularity_ckpt: Path, monkeypatch, capsys) -> None:
    from recframe import Recommender

    calls: list[dict] = []
    real = Recommender.recommend

    def spy(self, *args, **kwargs):
        calls.append(kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Recommender, "recommend", spy)
    user = Recommender.from_checkpoint(popularity_ckpt).user_ids[1]
    base = ["recommend", "--ckpt", str(popularity_ckpt), "--user", user]
    assert main(base) == 0
    assert calls[-1]["decode"] == "exact" and "beam" not in calls[-1]
    capsys.readouterr()
    # Popularity has no generate(): beam decoding is refused in one line, after reaching the recommender
    assert main([*base, "--decode", "beam", "--beam", "20"]) == 2
    assert calls[-1]["decode"] == "beam" and calls[-1]["beam"] == 20
    one_error_line(capsys.readouterr().err)
    with pytest.raises(SystemExit):
        main([*base, "--beam", "5"])
    one_error_line(capsys.readouterr().err, "--beam applies only to --decode beam")


def test_recommend_errors_are_one_line_in_a_real_process(tmp_path: Path) -> None:
    """The console entry point as a user runs it: stderr is exactly one line, exit status 2."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("RECFRAME_TRACEBACK", None)
    bad = tmp_path / "six.ckpt"
    bad.write_bytes(b"hello\n")
    cmd = [sys.executable, "-m", "recframe.cli", "recommend", "--ckpt", str(bad), "--user", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("recframe recommend: error: checkpoint ") and "six.ckpt" in proc.stderr


def test_recommend_beam_decoding_of_a_generative_model(tmp_path: Path, capsys) -> None:
    from recframe import Recommender

    cli = run_cli(["--config", str(SMOKE / "tiger.yaml"), "--trainer.max_epochs", "1", *QUIET,
                   "--trainer.logger.init_args.save_dir", str(tmp_path / "runs")], run=False)
    cli.trainer.fit(cli.model, cli.datamodule)
    ckpt = next((tmp_path / "runs").glob("*/version_*/checkpoints/last.ckpt"))
    rec = Recommender.from_checkpoint(ckpt)
    user = rec.user_ids[1]
    args = ["recommend", "--ckpt", str(ckpt), "--user", user, "-k", "5", "--format", "json"]
    assert main([*args, "--decode", "beam", "--beam", "20"]) == 0
    beam = json.loads(capsys.readouterr().out)[0]["items"]
    assert [e["item"] for e in beam] == rec.recommend(users=[user], k=5, decode="beam", beam=20).items[0]
    # a beam as wide as the catalogue gives exact scoring's top-k
    assert main([*args, "--decode", "beam", "--beam", str(len(rec.item_ids))]) == 0
    wide = [e["item"] for e in json.loads(capsys.readouterr().out)[0]["items"]]
    assert main(args) == 0
    exact = [e["item"] for e in json.loads(capsys.readouterr().out)[0]["items"]]
    assert wide == exact and len(exact) == 5
