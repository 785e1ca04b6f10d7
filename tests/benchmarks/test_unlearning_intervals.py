"""benchmarks.unlearning_intervals: equal grids, planted codes, compact per-user ranks, paired comparisons
over seeds, and the whole synthetic pipeline at a tiny size."""

from __future__ import annotations

import json
import shutil
from functools import partial

import numpy as np
import pytest
import torch

import benchmarks.common
import benchmarks.unlearning_intervals as ui
from recframe.unlearning.selection import grid_sizes


def test_every_method_gets_the_same_number_of_settings() -> None:
    grid = ui.equal_grid((1e-4, 1e-3, 1e-2), (0.3, 0.5, 0.7), 8, exact_ablation=True)
    assert {len(points) for points in grid.values()} == {3}
    assert set(grid) == {"ga", "npo", "suppression", "tracer", "tracer@no_reassign",
                         "tracer@no_reassign_exact"}
    with pytest.raises(ValueError, match="same number of settings"):
        ui.equal_grid((1e-4, 1e-3), (0.3, 0.5, 0.7), 8)
    methods = ui.grid_methods({"retrain": {}, "ga": {"steps": 5}, "suppression": {}, "tracer": {"steps": 5},
                               "npo": {}}, grid, 8)
    assert methods["tracer@no_reassign@lr=0.001"] == {"steps": 5, "reassign": False, "root_sample": 8,
                                                      "lr": 1e-3}
    assert methods["tracer@no_reassign_exact@lr=0.001"] == {"steps": 5, "reassign": False, "lr": 1e-3}
    sizes = grid_sizes({"original": {}, "retrain": {}, **{name: {} for name in methods if name != "retrain"}})
    assert set(sizes.values()) == {3} and len(sizes) == 6


def test_planted_codes_share_first_codes_and_leave_one_free() -> None:
    codes, sizes = ui.planted_codes(60)
    assert sizes == (4, 4, 5)
    assert len({tuple(r) for r in codes[1:]}) == 60 and (codes[1:] < np.array(sizes)).all()
    assert set(codes[1:, 0].tolist()) == {0, 1, 2}


def test_rank_strings_round_trip_and_refuse_other_values() -> None:
    values = [0.0, 1.0, 1 / np.log2(5), 1 / np.log2(11)]
    assert ui.rank_string(values) == "-039"
    np.testing.assert_allclose(ui.ndcg_of("-039"), values)
    with pytest.raises(ValueError, match="leave-one-out"):
        ui.rank_string([0.7])


def _report(a: str, b: str) -> dict:
    return {"choice": {"tracer": {"chosen": "tracer@lr=1"}, "suppression": {"chosen": "suppression@t=1"}},
            "test_users": [1, 2, 3, 4], "test_top10_ranks": {"tracer@lr=1": a, "suppression@t=1": b}}


def test_compare_pairs_users_per_seed_and_pools_over_seeds() -> None:
    seeds = {"0": _report("00--", "0-0-"), "1": _report("0000", "----")}
    result = ui.compare(seeds, "tracer", "suppression")
    assert result["per_seed"]["0"]["mean"] == pytest.approx(0.0)
    assert result["per_seed"]["1"]["mean"] == pytest.approx(1.0) and result["per_seed"]["1"]["significant"]
    assert result["pooled"]["mean"] == pytest.approx(0.5) and result["pooled"]["users"] == 4
    assert "seeds with the interval above 0: 1, below 0: 0, of 2" in ui.verdict_line(result)
    seeds["1"]["test_users"] = [1, 2, 3, 5]
    with pytest.raises(ValueError, match="same users"):
        ui.compare(seeds, "tracer", "suppression")


def test_the_synthetic_pipeline_at_a_tiny_size(tmp_path, monkeypatch) -> None:
    torch.set_num_threads(1)
    synth = {**ui.SYNTH, "n_users": 150, "n_items": 60}
    monkeypatch.setattr(ui, "SYNTH_DATA", {**ui.SYNTH_DATA, "synthetic": synth})
    monkeypatch.setattr(ui, "SYNTH_TRAIN", {"max_epochs": 1, "patience": 0, "check_val_every_n_epoch": 1})
    monkeypatch.setattr(ui, "SYNTH_LOOP", {"steps": 2, "batch_size": 8})
    monkeypatch.setattr(benchmarks.common, "RESULTS", tmp_path)
    assert ui.main(["--seeds", "0", "1", "--lrs", "1e-3", "--thresholds", "0.5", "--results", "tiny"]) == 0
    payload = json.loads((tmp_path / "tiny.json").read_text())
    assert payload["device"] == "cpu" and payload["grid_points"] == 1
    assert set(payload["grid_sizes"].values()) == {1} and len(payload["grid_sizes"]) == 6
    block = payload["concepts"][ui.SYNTH_CONCEPT]
    assert [(c["alternative"], c["baseline"]) for c in block["comparisons"]] == [
        *ui.COMPARISONS, ("tracer", "tracer@no_reassign_exact")]
    for result in [*block["comparisons"], block["check"]]:
        assert set(result["per_seed"]) == {"0", "1"}
        low, high = result["pooled"]["ci95"]
        assert low <= result["pooled"]["mean"] <= high
    for report in block["seeds"].values():
        assert report["details"]["tracer@lr=0.001"]["roots_per_step"] == 1  # reassigned: one root
        ablation = report["details"]["tracer@no_reassign@lr=0.001"]
        assert ablation["roots_per_step"] == ui.ROOT_SAMPLE["synthetic"] < ablation["exclusive_roots"]
        assert len(report["test_top10_ranks"]["original"]) == report["test_cases"]["retain"]
    assert "| 1 | tracer |" in (tmp_path / "tiny.md").read_text()


def test_the_cost_table_lists_every_arm() -> None:
    row = {"exclusive_roots": 91, "roots_per_step": 16, "seconds_per_step": 1.114}
    cost = {"steps": 10, "batch_size": 64, "root_sample": 16, 'genre == "Horror"': {"sampled": row}}
    payload = {"command": "c", "device": "cpu", "cost": cost}
    md = ui.cost_markdown(payload)
    assert '| `genre == "Horror"` | sampled | 91 | 16 | 1.11 |' in md and "10 steps of 64 + 64" in md


def test_the_ml100k_path_on_the_smoke_decoder(tmp_path, monkeypatch) -> None:
    """The --scale ml100k code path (train each seed's original from a config, run the concept configs, pair
    the seeds) on the tiny synthetic smoke decoder; a second call reuses the trained originals and the
    finished (seed, concept) reports, and gives the same result."""
    torch.set_num_threads(1)
    concept = tmp_path / "concept.yaml"
    concept.write_text(
        'checkpoint: unused\nconcept: genre == "Horror"\neval_batch_size: 256\nmethods:\n'
        "  retrain: {max_epochs: 1, patience: 0}\n  ga: {steps: 2, batch_size: 8}\n"
        "  npo: {steps: 2, batch_size: 8}\n  suppression: {}\n  tracer: {steps: 2, batch_size: 8}\n")
    runs, kept = tmp_path / "runs", tmp_path / "kept"
    config = "configs/smoke/sid_decoder.yaml"
    run = partial(ui.run_ml100k, log=lambda _: None, runs_dir=runs, config=config, kept_dir=kept)
    out = run([0, 1], (1e-3,), (0.5,), 2, [str(concept)])
    block = out['genre == "Horror"']
    assert set(block["seeds"]) == {"0", "1"} and "check" not in block
    assert [(c["alternative"], c["baseline"]) for c in block["comparisons"]] == list(ui.COMPARISONS)
    seed1 = block["seeds"]["1"]["details"]
    assert seed1["tracer@lr=0.001"]["settings"]["seed"] == 1 and seed1["ga@lr=0.001"]["settings"]["seed"] == 1
    first = ui.ml100k_original(0, runs, config)
    assert ui.ml100k_original(0, runs, config) == first  # reused, not trained again

    def boom(*args, **kwargs):
        raise AssertionError("a finished (seed, concept) ran again")

    monkeypatch.setattr(ui, "run_seed", boom)
    again = run([0, 1], (1e-3,), (0.5,), 2, [str(concept)])
    assert again == out
    with pytest.raises(AssertionError, match="ran again"):  # another grid is not the finished one
        run([0], (3e-3,), (0.5,), 2, [str(concept)])

    # A new checkout: no runs/, only the kept reports. Nothing trains, and the result is the same.
    shutil.rmtree(runs)

    def no_original(*args, **kwargs):
        raise AssertionError("an original trained although every report of its seed is kept")

    monkeypatch.setattr(ui, "ml100k_original", no_original)
    assert run([0, 1], (1e-3,), (0.5,), 2, [str(concept)]) == out
    files = [ui.kept_report(kept, seed, 'genre == "Horror"') for seed in (0, 1)]
    assert sorted(kept.iterdir()) == files and files[0].name == "seed0__genre_____Horror.json"
    stored = json.loads(files[1].read_text())
    assert stored["report"]["original"]["epoch"] is not None
    assert stored["inputs"]["data_fingerprint"] == ui.config_data_fingerprint(config)


def test_a_kept_report_is_not_reused_for_another_config_or_data(tmp_path, monkeypatch) -> None:
    """A kept report names the original's config text and data fingerprint: an edited config or other data
    computes it again."""
    path = tmp_path / "seed0__c.json"
    calls = []

    def compute():
        calls.append(1)
        return {"value": 1}

    monkeypatch.setattr(ui, "ROOT", tmp_path)
    config = tmp_path / "model.yaml"
    config.write_text("a: 1\n")

    def inputs(fingerprint):
        return ui.report_inputs("c", 0, {"tracer": {}}, 64, "model.yaml", fingerprint)

    ui.finished_report(path, inputs("f1"), compute, log=lambda _: None)
    assert ui.read_finished(path, inputs("f1")) == {"value": 1}
    assert ui.read_finished(path, inputs("f2")) is None
    config.write_text("a: 2\n")
    assert ui.read_finished(path, inputs("f1")) is None
    assert len(calls) == 1


def test_the_collaborative_source_of_the_ml100k_model() -> None:
    table, seed = ui.collaborative_source(ui.MODEL_CONFIG)
    assert table.endswith("configs/sasrec_ml100k.yaml") and seed == 0
    assert ui.collaborative_source("configs/smoke/sid_decoder.yaml") is None


def test_a_finished_report_is_reused_only_for_the_same_inputs(tmp_path) -> None:
    path = tmp_path / "report.json"
    calls = []

    def compute():
        calls.append(1)
        return {"value": np.float32(0.5), "ranks": "0-1"}

    first = ui.finished_report(path, {"seed": 0}, compute, log=lambda _: None)
    assert ui.finished_report(path, {"seed": 0}, compute, log=lambda _: None) == first and len(calls) == 1
    assert first == {"value": "0.5", "ranks": "0-1"}  # the JSON round trip the result file holds
    ui.finished_report(path, {"seed": 1}, compute, log=lambda _: None)
    assert len(calls) == 2
    path.write_text("{not json")  # a damaged file is computed again, not trusted
    ui.finished_report(path, {"seed": 1}, compute, log=lambda _: None)
    assert len(calls) == 3


def test_a_killed_original_resumes_from_last_ckpt_instead_of_reusing_its_best(tmp_path, monkeypatch) -> None:
    """Without ``finished.json`` an original's folder is an interrupted fit: its ``best-*.ckpt`` so far is
    not the finished model, so the fit resumes from the furthest ``last.ckpt`` and then marks itself done."""
    import recframe.runs

    folder = tmp_path / "sid_decoder_seed0" / "version_0" / "checkpoints"
    folder.mkdir(parents=True)
    (folder / "best-epoch=1-val_ndcg=0.1000.ckpt").write_bytes(b"")
    torch.save({"epoch": 2}, folder / "last.ckpt")
    calls = []

    def fit(config, extra, ckpt_path=None, **kwargs):
        calls.append(ckpt_path)
        best = folder / "best-epoch=5-val_ndcg=0.2000.ckpt"
        best.write_bytes(b"")
        return {"best_checkpoint": str(best), "epochs": 7}

    monkeypatch.setattr(recframe.runs, "fit_and_test", fit)
    config = "configs/smoke/sid_decoder.yaml"
    best = ui.ml100k_original(0, tmp_path, config)
    assert calls == [folder / "last.ckpt"] and best.endswith("best-epoch=5-val_ndcg=0.2000.ckpt")
    assert ui.ml100k_original(0, tmp_path, config) == best and len(calls) == 1  # finished: reused


def test_the_table_states_what_its_reports_cost_not_only_the_render() -> None:
    def report(*seconds: float) -> dict:
        rows = {f"m{i}": {"seconds": s} for i, s in enumerate(seconds)}
        return {"rows_by_stage": {"test": rows, "validation": rows}}

    payload = {"concepts": {"a": {"seeds": {"0": report(60.0, 30.0)}},
                            "b": {"seeds": {"0": report(90.0), "1": report(0.0, 120.0)}}}}
    assert ui.method_seconds(payload) == pytest.approx(300.0)  # the validation copies are not counted twice
