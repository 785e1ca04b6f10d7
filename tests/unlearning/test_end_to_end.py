"""End to end on synthetic data with a planted concept: recommended before unlearning, gone after, retain
utility kept; and ``recframe unlearn`` from a config (report, versioned TRACER checkpoint, one-line
errors)."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
import yaml

from recframe.checkpoint_io import load_checkpoint
from recframe.cli import main as recframe_main
from recframe.data.datamodule import RecDataModule
from recframe.models.generative import SIDDecoder
from recframe.unlearning.concepts import parse_concept
from recframe.unlearning.pipeline import run_unlearning

ROOT = Path(__file__).resolve().parent.parent.parent
#: 4 clusters; cluster 3 is "Horror" (recframe.data.synthetic), a quarter of the items and of the users
SYNTH = {"n_users": 200, "n_items": 60, "n_clusters": 4, "mean_length": 14, "seed": 1, "seq_strength": 0.9}
DATA = {
    "dataset": "synthetic",
    "synthetic": SYNTH,
    "split": "loo",
    "max_len": 8,
    "batch_size": 64,
    "eval_batch_size": 256,
}


def _planted_codes(n_items: int) -> np.ndarray:
    """Item ``i`` -> ``(i % 3, i // 3)``: every level-0 token is shared by all clusters (the concept's items
    share their first token with retain items); level-0 code 3 is unused."""
    return np.array([[0, 0]] + [[(i - 1) % 3, (i - 1) // 3] for i in range(1, n_items + 1)])


@pytest.fixture(scope="module")
def trained() -> tuple[SIDDecoder, dict]:
    torch.set_num_threads(1)
    L.seed_everything(0, verbose=False)
    dm = RecDataModule(**DATA)
    model = SIDDecoder(
        n_items=dm.n_items,
        n_users=dm.n_users,
        max_len=8,
        dim=32,
        n_layers=1,
        n_heads=2,
        inner=64,
        dropout=0.0,
        normalize="valid",
        history_tokens="items",
        lr=5e-3,
    )
    model.build_from_codes(_planted_codes(dm.n_items), (4, 24))
    L.Trainer(
        max_epochs=8,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
    ).fit(model, dm)
    return model.eval(), DATA


def test_the_planted_concept_leaves_the_lists_and_retain_utility_stays(trained) -> None:
    model, data = trained
    methods = {
        "retrain": {"max_epochs": 8, "patience": 0},
        "ga": {"steps": 40, "lr": 1e-3},
        "npo": {"steps": 40, "lr": 1e-3},
        "suppression": {"threshold": 0.5},
        "tracer": {"steps": 40, "lr": 1e-3},
    }
    report = run_unlearning(model, {}, data, parse_concept('genre == "Horror"'), methods, log=lambda _: None)
    rows = report["rows"]
    orig = rows["original"]
    # measured (seed 0): original exposure 0.145, forget recall 0.163; TRACER 0, 0 with retain NDCG x1.18
    assert orig["exposure@10"] > 0.1 and orig["forget_recall@10"] > 0.1  # recommended before
    assert rows["retrain"]["exposure@10"] < 0.5 * orig["exposure@10"]
    tracer = rows["tracer"]
    assert tracer["exposure@10"] < 0.3 * orig["exposure@10"], rows
    assert tracer["forget_recall@10"] < 0.3 * orig["forget_recall@10"], rows
    assert tracer["retain_ndcg@10_rel"] > 0.85, rows
    assert rows["suppression"]["exposure@10"] == 0.0  # every Horror leaf masked
    details = report["details"]["tracer"]
    assert details["shared_retain_after"][0] == 0 < details["shared_retain_before"][0]  # fresh level-0 code
    assert details["sid_version"] == 1 and details["exclusive_roots"] == 1
    for name in ("ga", "npo", "suppression", "tracer"):
        assert 0.0 <= rows[name]["distance_to_retrain@10"] <= 1.0


def _fit_checkpoint(tmp_path: Path) -> Path:
    from tests.cli_support import fit_smoke

    cli = fit_smoke("sid_decoder.yaml", tmp_path, 1)
    return Path(cli.trainer.checkpoint_callback.best_model_path)


def _unlearn(tmp_path: Path, ckpt: Path, methods: dict, **extra) -> dict:
    """``recframe unlearn`` on a Horror config with ``methods`` (and ``extra`` keys); the written report."""
    torch.set_num_threads(1)
    config = {"checkpoint": str(ckpt), "concept": 'genre == "Horror"',
              "output": str(tmp_path / "report.json"), "methods": methods, **extra}
    (tmp_path / "u.yaml").write_text(yaml.safe_dump(config))
    assert recframe_main(["unlearn", "--config", str(tmp_path / "u.yaml")]) == 0
    return json.loads((tmp_path / "report.json").read_text())


def test_recframe_unlearn_writes_the_report_and_a_versioned_tracer_checkpoint(tmp_path, capsys) -> None:
    ckpt = _fit_checkpoint(tmp_path)
    methods = {"suppression": {"threshold": 0.5}, "tracer": {"steps": 2, "batch_size": 8}}
    report = _unlearn(tmp_path, ckpt, methods, save_dir=str(tmp_path / "out"))
    assert set(report["rows"]) == {"original", "suppression", "tracer"}
    saved = load_checkpoint(tmp_path / "out" / "tracer.ckpt")
    original = load_checkpoint(ckpt)
    assert saved["sid_table"]["settings"]["version"] == 1
    assert saved["sid_table"]["settings"]["derived_from"] == original["sid_table"]["fingerprint"]
    assert saved["sid_table"]["fingerprint"] != original["sid_table"]["fingerprint"]
    assert torch.equal(saved["state_dict"]["backbone.codes"], saved["sid_table"]["codes"])
    from recframe.serving import Recommender

    rec = Recommender.from_checkpoint(tmp_path / "out" / "suppression.ckpt")  # servable, mask included
    assert rec.recommend(users=[rec.user_ids[1]], k=3).items


def test_recframe_unlearn_chooses_settings_on_validation(tmp_path, capsys) -> None:
    methods = {"suppression@a": {"threshold": 0.3}, "suppression@b": {"threshold": 0.9}}
    report = _unlearn(tmp_path, _fit_checkpoint(tmp_path), methods, choose_on_validation=True)
    valid = report["rows_by_stage"]["valid"]
    assert set(valid) == {"original", "suppression@a", "suppression@b"}
    chosen = report["choice"]["suppression"]["chosen"]
    assert chosen in ("suppression@a", "suppression@b")
    assert f"suppression: chose {chosen}" in capsys.readouterr().out


def test_an_unknown_concept_field_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    (tmp_path / "bad.yaml").write_text(
        yaml.safe_dump({"checkpoint": "x.ckpt", "concept": 'genra == "Horror"'})
    )
    with pytest.raises(SystemExit) as exit_:
        recframe_main(["unlearn", "--config", str(tmp_path / "bad.yaml")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'genra'" in err and "known fields: genre, title, year" in err
    (tmp_path / "bad2.yaml").write_text(
        yaml.safe_dump(
            {"checkpoint": "x.ckpt", "concept": "year < 1970", "methods": {"tracer": {"stepz": 3}}}
        )
    )
    with pytest.raises(SystemExit):
        recframe_main(["unlearn", "--config", str(tmp_path / "bad2.yaml")])
    assert "methods.tracer.stepz: unknown setting" in capsys.readouterr().err


def test_variants_run_as_their_own_rows_on_validation_and_test(trained) -> None:
    model, data = trained
    methods = {"suppression@threshold=0.5": {"threshold": 0.5}, "tracer@no_reassign": {"steps": 5, "lr": 1e-3,
                                                                                        "reassign": False}}
    report = run_unlearning(model, {}, data, parse_concept('genre == "Horror"'), methods, log=lambda _: None,
                            stages=("valid", "test"))
    assert set(report["rows_by_stage"]) == {"valid", "test"}
    assert report["rows"] is report["rows_by_stage"]["test"]
    assert list(report["rows"]) == ["original", "suppression@threshold=0.5", "tracer@no_reassign"]
    valid, test = report["rows_by_stage"]["valid"], report["rows_by_stage"]["test"]
    assert valid["original"]["exposure@10"] != test["original"]["exposure@10"]  # other users' lists
    assert valid["suppression@threshold=0.5"]["exposure@10"] == 0.0
    details = report["details"]["tracer@no_reassign"]
    assert details["settings"]["reassign"] is False and details["moved_items"] == 0  # codes untouched


def test_a_tuning_run_is_finished_from_its_saved_checkpoints(tmp_path) -> None:
    """``ml100k_unlearning --tune --from-saved`` re-scores the checkpoints a run saved: the same rows."""
    from benchmarks.ml100k_unlearning import evaluate_saved
    from recframe.unlearning.pipeline import data_settings, load_generative

    torch.set_num_threads(1)
    ckpt_path = _fit_checkpoint(tmp_path)
    model, ckpt = load_generative(ckpt_path)
    methods = {"suppression@threshold=0.3": {"threshold": 0.3},
               "suppression@threshold=0.9": {"threshold": 0.9}}
    text = 'genre == "Horror"'
    run = run_unlearning(model, ckpt, data_settings(ckpt), parse_concept(text), methods,
                         save_dir=tmp_path / "s", log=lambda _: None, stages=("valid", "test"))
    again = evaluate_saved(str(ckpt_path), text, [*methods, "tracer@lr=1"], tmp_path / "s", 256)
    for stage in ("valid", "test"):
        for name in ("original", *methods):
            for key, value in run["rows_by_stage"][stage][name].items():
                if key != "seconds":
                    got = again["rows_by_stage"][stage][name][key]
                    assert got == pytest.approx(value), (stage, name, key)
    assert "tracer@lr=1" not in again["rows"]  # no checkpoint saved: skipped
    assert set(again["choice"]) == {"suppression"}


def test_a_killed_grid_resumes_from_the_methods_it_saved(tmp_path, monkeypatch) -> None:
    """``resume``: a second call scores the saved unlearned models instead of running them again (the same
    rows and recorded seconds); other settings or other original weights run again."""
    import recframe.unlearning.pipeline as pipeline
    from recframe.unlearning.pipeline import data_settings, load_generative

    torch.set_num_threads(1)
    model, ckpt = load_generative(_fit_checkpoint(tmp_path))
    methods = {"ga": {"steps": 3, "lr": 1e-3},
               "tracer@no_reassign": {"steps": 3, "lr": 1e-3, "reassign": False}}
    concept, data = parse_concept('genre == "Horror"'), data_settings(ckpt)

    def unlearn(m, ms, resume=True):
        return run_unlearning(m, ckpt, data, concept, ms, save_dir=tmp_path / "s", log=lambda _: None,
                              stages=("valid", "test"), resume=resume)

    first = unlearn(model, methods)

    def refuse(*args, **kwargs):
        raise AssertionError("ran again")

    monkeypatch.setattr(pipeline, "run_ga", refuse)
    monkeypatch.setattr(pipeline, "run_tracer", refuse)
    again = unlearn(model, methods)
    for stage in ("valid", "test"):
        for name in ("ga", "tracer@no_reassign"):
            for key, value in first["rows_by_stage"][stage][name].items():
                assert again["rows_by_stage"][stage][name][key] == pytest.approx(value), (stage, name, key)
    assert again["details"]["tracer@no_reassign"]["moved_items"] == 0
    with pytest.raises(AssertionError, match="ran again"):  # another learning rate: not the saved model
        unlearn(model, {"ga": {"steps": 3, "lr": 2e-3}})
    other, _ = load_generative(_fit_checkpoint(tmp_path))
    with torch.no_grad():
        next(other.parameters()).add_(1e-3)
    with pytest.raises(AssertionError, match="ran again"):  # other original weights
        unlearn(other, {"ga": {"steps": 3, "lr": 1e-3}})
    with pytest.raises(AssertionError, match="ran again"):  # resume off
        unlearn(model, {"ga": {"steps": 3, "lr": 1e-3}}, resume=False)
