"""Tuned unlearning results merge: the union of two grids, chosen again on validation."""

from __future__ import annotations

import pytest

from benchmarks.ml100k_unlearning import merge_tuned, tune_methods, tuned_markdown


def _row(exposure: float, retain: float) -> dict[str, float]:
    return {"exposure@10": exposure, "forget_recall@10": 0.0, "retain_ndcg@10": retain}


def _payload(rows: dict[str, dict[str, float]], command: str) -> dict:
    report = {"rows_by_stage": {"valid": rows, "test": rows}, "details": {"forget_items": 9}, "rows": rows}
    return {"checkpoint": "ckpt", "data": {"dataset": "x"}, "command": command, "model_config": "cfg",
            "concepts": {"genre == \"Horror\"": report}}


def test_merge_chooses_on_the_union_of_the_grids() -> None:
    base = {"original": _row(0.05, 0.10), "retrain": _row(0.0, 0.09)}
    first = _payload({**base, "ga@lr=3e-05": _row(0.0, 0.06), "ga@lr=0.0001": _row(0.0, 0.03)}, "a")
    second = _payload({**base, "ga@lr=1e-05": _row(0.01, 0.08)}, "b")  # not eligible: above 0.1 x 0.05
    merged = merge_tuned([first, second])
    report = merged["concepts"]['genre == "Horror"']
    assert set(report["rows_by_stage"]["valid"]) == {"original", "retrain", "ga@lr=3e-05", "ga@lr=0.0001",
                                                     "ga@lr=1e-05"}
    assert report["choice"]["ga"]["chosen"] == "ga@lr=3e-05"
    second["concepts"]['genre == "Horror"']["rows_by_stage"]["valid"]["ga@lr=1e-05"] = _row(0.0, 0.08)
    again = merge_tuned([first, second])["concepts"]['genre == "Horror"']
    assert again["choice"]["ga"]["chosen"] == "ga@lr=1e-05"
    assert "**chosen**" in tuned_markdown(merged)
    with pytest.raises(SystemExit, match="different models"):
        merge_tuned([first, {**second, "checkpoint": "other"}])


def test_the_tune_grid_covers_every_configured_method_and_the_ablation() -> None:
    methods = tune_methods({"retrain": {}, "ga": {"steps": 5}, "tracer": {"steps": 5}}, (1e-5,), (0.5,))
    assert methods == {"retrain": {}, "ga@lr=1e-05": {"steps": 5, "lr": 1e-5},
                       "tracer@lr=1e-05": {"steps": 5, "lr": 1e-5},
                       "tracer@no_reassign@lr=1e-05": {"steps": 5, "reassign": False, "root_sample": 16,
                                                       "lr": 1e-5}}


def test_every_method_gets_the_same_grid_size() -> None:
    from benchmarks.ml100k_unlearning import ABLATION_ROOT_SAMPLE, TUNE_GRID, tune_grid

    assert {len(points) for points in TUNE_GRID.values()} == {3}
    with pytest.raises(ValueError, match="same number of settings"):
        tune_grid((1e-5, 3e-5, 1e-4, 3e-4), (0.3, 0.5, 0.7))
    methods = tune_methods({"tracer": {"steps": 5}}, (1e-5,), (0.5,))
    assert methods["tracer@no_reassign@lr=1e-05"]["root_sample"] == ABLATION_ROOT_SAMPLE
    base = {"original": _row(0.05, 0.10), "retrain": _row(0.0, 0.09)}
    one_each = {"ga@lr=3e-05": _row(0.0, 0.06), "suppression@threshold=0.5": _row(0.0, 0.1)}
    first = _payload({**base, **one_each}, "a")
    second = _payload({**base, "ga@lr=1e-05": _row(0.01, 0.08)}, "b")  # GA: 2 settings, suppression 1
    with pytest.raises(SystemExit, match="different numbers of settings"):
        merge_tuned([first, second])
    assert merge_tuned([first])["concepts"]['genre == "Horror"']["grid_sizes"] == {"ga": 1, "suppression": 1}
