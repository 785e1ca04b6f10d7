"""Papercuts of the recframe command (issue 33, item 6): help lists every subcommand and model, a misspelled
subcommand or a bad override is blamed correctly, fit says where its checkpoints are."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from recframe.cli import EXTRA_COMMANDS, USAGE, main, unknown_command_message
from recframe.override_blame import blame_override, overrides_in
from tests.cli_support import QUIET, SMOKE, run_error


def _config_error(args: list[str], capsys) -> str:
    """The one ``recframe`` line of a refused fit (warnings may follow it)."""
    err = run_error("fit", args, capsys)
    lines = [ln for ln in err.splitlines() if ln.startswith("recframe")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ----------------------------------------------------------------------------- help and dispatch
def test_help_lists_every_subcommand(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    usage_line = out.splitlines()[0]
    for name in ("fit", "validate", "test", "data", "recommend", *EXTRA_COMMANDS):
        assert name in usage_line, name
        assert f"recframe {name}" in out, name
    assert "conversational" in out and "generate" in out and "validate DIR" in out
    assert out.strip() == USAGE.strip()


@pytest.mark.parametrize(("typed", "meant"), [("fti", "fit"), ("recomend", "recommend"),
                                              ("unlern", "unlearn"), ("predict", "recommend")])
def test_misspelled_subcommand_suggests_and_does_not_blame_the_config(typed: str, meant: str, capsys) -> None:
    assert main([typed, "--config", "configs/smoke/sasrec.yaml"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err]
    assert f"unknown command {typed!r}; did you mean {meant!r}?" in err
    assert "sasrec.yaml" not in err and "config error" not in err


def test_unknown_command_without_a_close_match_lists_the_commands() -> None:
    message = unknown_command_message("zzzzzz")
    assert "did you mean" not in message and "fit, validate, test" in message and "unlearn" in message


def test_fit_help_lists_the_generative_models(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    known = out[out.index("known subclasses: recframe.models."):]
    for name in ("recframe.models.SASRec", "recframe.models.generative.TIGER",
                 "recframe.models.generative.SIDDecoder", "recframe.models.generative.FLASH"):
        assert name in known, name


# ----------------------------------------------------------------------------- overrides named
def test_bad_override_names_the_override_not_the_file(in_tmp: Path, capsys) -> None:
    line = _config_error(["--config", str(SMOKE / "popularity.yaml"), "--trainer.max_epochs", "abc"], capsys)
    assert "config error in the override --trainer.max_epochs abc:" in line
    assert "popularity.yaml" not in line


def test_bad_nested_model_override_names_the_override(in_tmp: Path, capsys) -> None:
    line = _config_error(["--config", str(SMOKE / "bprmf.yaml"), "--model.init_args.dim=abc"], capsys)
    assert "config error in the override --model.init_args.dim abc:" in line


def test_unknown_override_key_names_the_override(in_tmp: Path, capsys) -> None:
    line = _config_error(["--config", str(SMOKE / "popularity.yaml"), "--data.nope", "3"], capsys)
    assert "config error in the override --data.nope 3:" in line


def test_an_override_refused_by_a_constructor_names_the_override(in_tmp: Path, capsys) -> None:
    line = _config_error(["--config", str(SMOKE / "bprmf.yaml"), "--data.batch_size", "0"], capsys)
    assert "config error in the override --data.batch_size 0: data.batch_size=0" in line
    assert "bprmf.yaml" not in line


def test_bad_value_in_the_file_still_names_the_file(in_tmp: Path, capsys) -> None:
    bad = in_tmp / "bad.yaml"
    bad.write_text("model:\n  class_path: recframe.models.Popularity\n"
                   "data: {dataset: synthetic, max_len: twenty}\n")
    line = _config_error(["--config", str(bad), "--trainer.max_epochs", "1"], capsys)
    assert f"config error in {bad}:" in line and "data.max_len" in line and "override" not in line


def test_blame_override_matching_rules() -> None:
    args = ["--config", "c.yaml", "--trainer.max_epochs", "3", "--model.init_args.hidden=abc",
            "--print_config"]
    assert [str(o) for o in overrides_in(args)] == ["--trainer.max_epochs 3", "--model.init_args.hidden abc"]
    nested = ('Parser key "model":\n  Problem with given class_path \'x.SASRec\':\n'
              '    Parser key "hidden":\n      Expected a <class \'int\'>. Got value: abc\n'
              "  Given value: NestedArg(key='hidden', val='abc')")
    assert str(blame_override(nested, args)) == "--model.init_args.hidden abc"
    # the file set a bad data key: no override set it
    assert blame_override('Parser key "data.max_len":\n  Expected int\n  Given value: twenty', args) is None
    assert blame_override("some other failure", args) is None
    setting = "model.init_args.hidden=abc must be a whole number >= 1 (SASRec)"
    assert str(blame_override(setting, args)) == "--model.init_args.hidden abc"
    assert blame_override("data.batch_size=0 must be a whole number >= 1", args) is None
    assert blame_override('Parser key "trainer.max_epochs": bad', []) is None


# ----------------------------------------------------------------------------- fit output
def test_fit_prints_where_the_checkpoints_are(in_tmp: Path, capsys) -> None:
    assert main(["fit", "--config", str(SMOKE / "popularity.yaml"), *QUIET]) == 0
    out = capsys.readouterr().out.splitlines()
    best = [ln for ln in out if ln.startswith("best checkpoint (val_ndcg ")]
    last = [ln for ln in out if ln.startswith("last checkpoint: ")]
    assert len(best) == 1 and len(last) == 1, out
    assert (in_tmp / best[0].split(": ", 1)[1]).is_file()
    last_path = in_tmp / last[0].split(": ", 1)[1]
    assert last_path.name == "last.ckpt" and last_path.is_file()


# ----------------------------------------------------------------------------- data
def test_dropped_duplicate_rows_are_reported_at_the_default_log_level(caplog) -> None:
    from recframe.data.filters import drop_exact_duplicates
    from recframe.data.interactions import Interactions

    inter = Interactions.from_raw(users=["a", "a", "b"], items=["x", "x", "x"], timestamps=[1.0, 1.0, 1.0])
    with caplog.at_level(logging.WARNING, logger="recframe.data"):
        drop_exact_duplicates(inter)
    dropped = [r for r in caplog.records if "dropped 1 exact duplicate" in r.getMessage()]
    assert len(dropped) == 1 and dropped[0].levelno >= logging.WARNING  # Python's default level shows it
    assert "data.duplicates: keep" in dropped[0].getMessage()


# ----------------------------------------------------------------------------- recommend -k
@pytest.fixture(scope="module")
def bprmf_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An embedding model, served through the FAISS index (where short rows used to be warned about)."""
    from recframe.cli import run_cli

    tmp = tmp_path_factory.mktemp("papercut_rec")
    cli = run_cli(["--config", str(SMOKE / "bprmf.yaml"), "--trainer.max_epochs", "1", *QUIET,
                   "--trainer.logger.init_args.save_dir", str(tmp / "runs")], run=False)
    cli.trainer.fit(cli.model, cli.datamodule)
    return next((tmp / "runs").glob("*/version_*/checkpoints/last.ckpt"))


def test_a_huge_k_gives_one_clear_note_and_no_minus_inf_padding(bprmf_ckpt: Path, capsys, caplog) -> None:
    import json

    from recframe import Recommender

    rec = Recommender.from_checkpoint(bprmf_ckpt)
    n_items, users = len(rec.item_ids) - 1, rec.user_ids[1:3]
    assert rec.index is not None
    with caplog.at_level(logging.WARNING):
        assert main(["recommend", "--ckpt", str(bprmf_ckpt), "--user", users[0], "--user", users[1],
                     "-k", "100000", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert "score -inf" not in caplog.text and "item 0" not in caplog.text
    note = captured.err.strip()
    assert note.splitlines() == [note] and "score -inf" not in note
    assert note.startswith("recframe recommend: note: -k 100000 is more than the catalogue's "
                           f"{n_items} items")
    rows = json.loads(captured.out)
    seen = [len(set(rec.seen_items[rec.seen_indptr[u]:rec.seen_indptr[u + 1]].tolist())) for u in (1, 2)]
    assert [len(r["items"]) for r in rows] == [n_items - s for s in seen]  # every eligible item, no padding
    assert all(item["score"] > float("-inf") for r in rows for item in r["items"])


def test_a_k_within_the_catalogue_gives_no_note(bprmf_ckpt: Path, capsys) -> None:
    from recframe import Recommender

    user = Recommender.from_checkpoint(bprmf_ckpt).user_ids[1]
    assert main(["recommend", "--ckpt", str(bprmf_ckpt), "--user", user, "-k", "5"]) == 0
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------------- scripts calling run_cli
def test_a_script_running_a_config_gets_no_both_args_warning(in_tmp: Path, monkeypatch) -> None:
    """A benchmark passes its run's args to ``run_cli`` while its own command line is in ``sys.argv``."""
    import warnings

    from recframe.cli import run_cli

    monkeypatch.setattr("sys.argv", ["python -m benchmarks.amazon", "--dataset", "toys"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # what a user's script sees, whatever pytest's filters say
        cli = run_cli(["--config", str(SMOKE / "sasrec.yaml"), "--trainer.logger", "false"], run=False)
    assert cli.model.__class__.__name__ == "SASRec"  # the args were parsed, sys.argv was not
    assert not [w for w in caught if "both args and command line" in str(w.message)]


def test_fit_without_a_logger_leaves_the_users_config_yaml_alone(in_tmp: Path) -> None:
    """Lightning would save the resolved config as ``./config.yaml``: the user's own file of that name."""
    mine = in_tmp / "config.yaml"
    mine.write_text((SMOKE / "sasrec.yaml").read_text() + "# my notes\n")
    before = mine.read_bytes()
    assert main(["fit", "--config", str(mine), "--trainer.logger", "false", "--trainer.max_epochs", "1",
                 "--trainer.limit_train_batches", "1", "--trainer.limit_val_batches", "0",
                 "--trainer.default_root_dir", "null", *QUIET]) == 0
    assert mine.read_bytes() == before


def test_fit_with_a_logger_saves_the_config_in_its_run_folder(in_tmp: Path) -> None:
    assert main(["fit", "--config", str(SMOKE / "sasrec.yaml"), "--trainer.max_epochs", "1",
                 "--trainer.limit_train_batches", "1", "--trainer.limit_val_batches", "0",
                 "--trainer.logger.init_args.save_dir", str(in_tmp / "runs"), *QUIET]) == 0
    saved = list((in_tmp / "runs").rglob("config.yaml"))
    assert len(saved) == 1 and "SASRec" in saved[0].read_text()
    assert not (in_tmp / "config.yaml").exists()
