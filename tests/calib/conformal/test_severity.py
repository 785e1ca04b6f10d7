"""Severity on a hand-built tree, its exact lambda curves, and the two nested set families."""

from __future__ import annotations

import numpy as np
import pytest

from calib_ext.conformal import (
    Hierarchy,
    SeverityCurves,
    flat_entry_times,
    hierarchical_entry_times,
    prediction_sets,
    severity,
    true_label_matrix,
)

# root -> X, Y; X -> X1, X2; X1 -> a, b; X2 -> c; Y -> Y1 -> d.  d(a,b)=2, d(a,c)=4, d(a,d)=6 = D_max
TREE = Hierarchy.from_parent_map({"a": "X1", "b": "X1", "c": "X2", "X1": "X", "X2": "X", "d": "Y1",
                                  "Y1": "Y"})
LABELS = ["a", "b", "c", "d"]
DIST = TREE.distance_matrix(LABELS)


def sets(*members: list[str]) -> np.ndarray:
    return true_label_matrix(list(members), LABELS)


def test_severity_by_hand() -> None:
    true = sets(["a", "c", "d"], ["a", "c", "d"], ["a", "c", "d"], ["a"], [], ["a"])
    pred = sets(["b"], ["a", "c", "d"], [], ["c"], ["b"], ["a", "b", "c", "d"])
    # row 0: a -> b costs 2/6, c -> b 4/6, d -> b 6/6: mean 2/3, max 1
    np.testing.assert_allclose(severity(pred, true, DIST), [2 / 3, 0, 1, 4 / 6, 0, 0])
    np.testing.assert_allclose(severity(pred, true, DIST, "max"), [1, 0, 1, 4 / 6, 0, 0])
    with pytest.raises(ValueError, match="aggregate='median'"):
        severity(pred, true, DIST, "median")


def test_flat_tree_severity_is_the_false_negative_rate() -> None:
    flat = Hierarchy.from_parent_map(dict.fromkeys(LABELS, "top"))
    rng = np.random.default_rng(0)
    pred, true = rng.random((300, 4)) < 0.5, rng.random((300, 4)) < 0.4
    fnr = np.divide((true & ~pred).sum(1), true.sum(1), out=np.zeros(300), where=true.any(1))
    np.testing.assert_allclose(severity(pred, true, flat.distance_matrix(LABELS)), fnr)


def test_unknown_true_labels_are_named() -> None:
    with pytest.raises(ValueError, match=r"instance 1: true labels \['e'\] are not among the 4 labels"):
        true_label_matrix([["a"], ["a", "e"]], LABELS)


def test_hierarchical_entry_times_by_hand() -> None:
    p = np.array([[0.9, 0.5, 0.1, 0.2], [0.6, 0.2, 0.3, 0.05]])
    t = hierarchical_entry_times(p, TREE, LABELS)
    # X1 = {a, b}: q = 1 - 0.1 * 0.5 = 0.95 (rep a); X = {a, b, c}: q = 1 - 0.1*0.5*0.9 = 0.955 (rep a)
    np.testing.assert_allclose(t[0], [1 - 0.955, 0.5, 0.9, 0.8])
    # row 1: X = 1 - 0.4 * 0.8 * 0.7 = 0.776 -> a at 0.224
    np.testing.assert_allclose(t[1], [1 - 0.776, 0.8, 0.7, 0.95])
    np.testing.assert_allclose(flat_entry_times(p), 1 - p)
    with pytest.raises(ValueError, match="probabilities in \\[0, 1\\]"):
        flat_entry_times(p * 2)
    with pytest.raises(ValueError, match="3 label columns but 4 labels"):
        hierarchical_entry_times(p[:, :3], TREE, LABELS)


def test_sets_are_nested_and_hierarchical_contain_flat() -> None:
    rng = np.random.default_rng(1)
    p = rng.random((200, 4))
    th, tf = hierarchical_entry_times(p, TREE, LABELS), flat_entry_times(p)
    assert (th <= tf + 1e-12).all()
    lams = np.linspace(0, 1, 51)
    for lo, hi in zip(lams[:-1], lams[1:]):
        assert (prediction_sets(th, lo) <= prediction_sets(th, hi)).all()
    assert prediction_sets(th, 1.0).all()


@pytest.mark.parametrize("aggregate", ["mean", "max"])
@pytest.mark.parametrize("family", ["flat", "hierarchical"])
def test_curves_match_direct_severity(aggregate: str, family: str) -> None:
    rng = np.random.default_rng(2)
    p = rng.random((150, 4))
    true = rng.random((150, 4)) < 0.35
    t = flat_entry_times(p) if family == "flat" else hierarchical_entry_times(p, TREE, LABELS)
    curves = SeverityCurves(t, true, DIST, aggregate)
    grid = np.unique(np.concatenate([np.linspace(0, 1, 41), curves.breakpoints()]))
    prev = np.full(150, np.inf)
    for lam in grid:
        direct = severity(prediction_sets(t, lam), true, DIST, aggregate)
        np.testing.assert_allclose(curves.losses(lam), direct, atol=1e-12)
        assert (direct <= prev + 1e-12).all()  # non-increasing in lambda
        prev = direct
        fnr = np.divide((true & ~prediction_sets(t, lam)).sum(1), true.sum(1), out=np.zeros(150),
                        where=true.any(1))
        np.testing.assert_allclose(curves.fnr_losses(lam), fnr)
    # critical lambdas: exceedance of a tolerance is exactly "lambda < c_i"
    crit = curves.critical_lambdas(0.3)
    for lam in grid:
        np.testing.assert_array_equal(curves.losses(lam) > 0.3, lam < crit)
    sub = curves.subset(np.arange(10, 30))
    np.testing.assert_allclose(sub.losses(0.4), curves.losses(0.4)[10:30])
