"""Hierarchies from ATC codes and parent maps; tree distances; errors for bad trees and labels."""

from __future__ import annotations

import numpy as np
import pytest

from calib_ext.conformal import ROOT, Hierarchy, HierarchyError


def test_atc_codes_nest_by_prefix() -> None:
    tree = Hierarchy.from_atc_codes(["C07AB02", "c07ab03 ", "C07AA05", "C09AA01", "N02BE01"])
    assert tree.root == ROOT
    assert tree.path("C07AB03") == [ROOT, "C", "C07", "C07A", "C07AB", "C07AB03"]
    assert tree.depth["C07AB02"] == 5 and tree.depth["C"] == 1
    assert sorted(tree.children[ROOT]) == ["C", "N"]
    # distances by the deepest shared level: chemical 2, pharmacological 4, therapeutic 6, anatomical 8,
    # none 10
    labels = ["C07AB02", "C07AB03", "C07AA05", "C09AA01", "N02BE01"]
    expected = np.array([[0, 2, 4, 8, 10], [2, 0, 4, 8, 10], [4, 4, 0, 8, 10], [8, 8, 8, 0, 10],
                         [10, 10, 10, 10, 0]])
    np.testing.assert_array_equal(tree.distance_matrix(labels), expected)
    assert tree.distance("C07A", "C07AB02") == 2  # an internal node is a node like any other
    assert sorted(tree.leaves()) == sorted(labels)


def test_atc_codes_accept_shorter_levels() -> None:
    tree = Hierarchy.from_atc_codes(["C07", "C07AB02"])
    assert tree.parent["C07"] == "C" and tree.parent["C07AB02"] == "C07AB"
    assert tree.distance("C07", "C07AB02") == 3


@pytest.mark.parametrize("code, match", [("C07AB2", "length 6"), ("C7XAB02", "not an ATC code"),
                                         ("107AB02", "not an ATC code"), ("", "length 0")])
def test_bad_atc_codes_are_named(code: str, match: str) -> None:
    with pytest.raises(HierarchyError, match=match):
        Hierarchy.from_atc_codes(["C07AB02", code])


def test_parent_map_with_several_tops_gets_a_virtual_root() -> None:
    tree = Hierarchy.from_parent_map({"a": "X1", "b": "X1", "c": "X2", "X1": "X", "X2": "X", "d": "Y1",
                                      "Y1": "Y"})
    # Y is named only as a parent: a top-level node
    assert tree.root == ROOT and tree.parent["X"] == ROOT and tree.parent["Y"] == ROOT
    assert tree.distance("a", "b") == 2 and tree.distance("a", "c") == 4 and tree.distance("a", "d") == 6
    assert tree.distance("X1", "d") == 5  # labels at different depths: 2 + 3 - 2 * 0
    assert sorted(tree.descendants("X")) == ["X", "X1", "X2", "a", "b", "c"]


def test_parent_map_with_one_top_keeps_it_as_root() -> None:
    tree = Hierarchy.from_parent_map({"a": "top", "b": "top", "top": None})
    assert tree.root == "top" and tree.distance("a", "b") == 2


def test_cycles_and_self_parents_are_refused() -> None:
    with pytest.raises(HierarchyError, match="parent links form a cycle: a -> b -> c -> a"):
        Hierarchy.from_parent_map({"a": "b", "b": "c", "c": "a", "d": None})
    with pytest.raises(HierarchyError, match="its own parent"):
        Hierarchy.from_parent_map({"a": "a"})
    with pytest.raises(HierarchyError, match="non-empty dict"):
        Hierarchy.from_parent_map({})
    with pytest.raises(HierarchyError, match="reserved"):
        Hierarchy.from_parent_map({"a": "P", "b": "Q", ROOT: None})


def test_unknown_labels_are_named() -> None:
    tree = Hierarchy.from_parent_map({"a": "X", "b": "X"})
    with pytest.raises(HierarchyError, match=r"1 label\(s\) not in the hierarchy \(e.g. \['zz'\]\)"):
        tree.distance_matrix(["a", "zz"])
    with pytest.raises(HierarchyError, match="not in the hierarchy"):
        tree.distance("a", "nope")
