"""Choosing unlearning settings on validation: the grid's variants and the forget-first rule."""

from __future__ import annotations

import pytest

from recframe.data.interactions import DataError
from recframe.unlearning.pipeline import method_kind
from recframe.unlearning.selection import choose_settings, expand_grid, variant_label


def _row(exposure: float, retain: float) -> dict[str, float]:
    return {"exposure@10": exposure, "retain_ndcg@10": retain}


def test_variants_name_their_method_and_an_unknown_one_is_refused() -> None:
    assert method_kind("ga@lr=3e-05") == "ga" and method_kind("tracer@no_reassign@lr=0.0001") == "tracer"
    assert method_kind("suppression") == "suppression"
    with pytest.raises(DataError, match="unknown unlearning method 'gd@lr=1'"):
        method_kind("gd@lr=1")


def test_expand_grid_overrides_the_method_settings_per_point() -> None:
    methods = {"retrain": {"max_epochs": 3}, "ga": {"steps": 200, "lr": 1e-4}, "tracer": {"steps": 50},
               "tracer@no_reassign": {"reassign": False}}
    grid = {"ga": [{"lr": 3e-5}, {"lr": 3e-4}], "tracer@no_reassign": [{"lr": 1e-3}]}
    out = expand_grid(methods, grid)
    assert out == {
        "retrain": {"max_epochs": 3},
        "tracer": {"steps": 50},
        "ga@lr=3e-05": {"steps": 200, "lr": 3e-5},
        "ga@lr=0.0003": {"steps": 200, "lr": 3e-4},
        "tracer@no_reassign@lr=0.001": {"steps": 50, "reassign": False, "lr": 1e-3},
    }
    assert variant_label({"threshold": 0.5, "reassign": False}) == "threshold=0.5,reassign=False"
    only_ga = expand_grid({"ga": {}}, {"npo": [{"lr": 1e-3}], "ga": [{"lr": 1e-3}]})
    assert only_ga == {"ga@lr=0.001": {"lr": 1e-3}}  # npo is not among the methods


def test_the_rule_forgets_first_then_keeps_utility() -> None:
    rows = {
        "original": _row(0.05, 0.10),
        "retrain": _row(0.002, 0.098),  # target = max(0.002, 0.1 * 0.05) = 0.005
        "ga@lr=3e-05": _row(0.030, 0.099),  # best utility, but the concept is still there: not eligible
        "ga@lr=0.0001": _row(0.004, 0.060),
        "ga@lr=0.0003": _row(0.000, 0.040),
        "npo@lr=3e-05": _row(0.020, 0.090),  # no npo variant forgets: the lowest exposure, flagged
        "npo@lr=0.0001": _row(0.010, 0.050),
        "tracer@no_reassign@lr=0.0001": _row(0.005, 0.080),  # exactly at the target: eligible
        "tracer@no_reassign@lr=0.0003": _row(0.001, 0.070),
    }
    choice = choose_settings(rows)
    assert set(choice) == {"ga", "npo", "tracer@no_reassign"}
    assert choice["ga"]["chosen"] == "ga@lr=0.0001" and choice["ga"]["eligible"]
    assert choice["ga"]["target_exposure"] == pytest.approx(0.005)
    assert choice["npo"]["chosen"] == "npo@lr=0.0001" and not choice["npo"]["eligible"]
    assert choice["tracer@no_reassign"]["chosen"] == "tracer@no_reassign@lr=0.0001"
    # without a retrain row the target is the floor alone
    del rows["retrain"]
    assert choose_settings(rows)["ga"]["target_exposure"] == pytest.approx(0.005)
    with pytest.raises(ValueError, match="original"):
        choose_settings({"ga@lr=1": _row(0, 0)})
