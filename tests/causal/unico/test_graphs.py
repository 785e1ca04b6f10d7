"""Graph queries: d-separation, the backdoor criterion, mediators and recanting witnesses."""

from __future__ import annotations

from causal_ext.unico.graphs import (
    d_separated,
    has_directed_path,
    is_backdoor_set,
    mediators,
    minimum_backdoor_sets,
    recanting_witnesses,
)

# M-bias: X <- A -> M <- B -> Y, X -> Y
M_BIAS = {"A": (), "B": (), "M": ("A", "B"), "X": ("A",), "Y": ("X", "B")}
# chain, fork and collider in one: Z -> X -> W -> Y, Z -> Y, X -> C <- Y
MIXED = {"Z": (), "X": ("Z",), "W": ("X",), "Y": ("W", "Z"), "C": ("X", "Y")}


def test_d_separation_textbook_cases():
    assert d_separated(M_BIAS, ["A"], ["B"])  # collider M closed
    assert not d_separated(M_BIAS, ["A"], ["B"], ["M"])  # conditioning on the collider opens it
    assert d_separated(M_BIAS, ["A"], ["Y"], ["X", "B"])
    assert not d_separated(MIXED, ["X"], ["Y"], ["W"])  # the fork through Z is open
    assert d_separated(MIXED, ["X"], ["Y"], ["W", "Z"])
    assert not d_separated(MIXED, ["X"], ["Y"], ["W", "Z", "C"])  # a collider child of both
    assert not d_separated(MIXED, ["X"], ["X"])


def test_backdoor_criterion_m_bias_and_confounding():
    assert is_backdoor_set(M_BIAS, "X", "Y", [])
    assert not is_backdoor_set(M_BIAS, "X", "Y", ["M"])  # M-bias: adjusting for M alone is wrong
    assert is_backdoor_set(M_BIAS, "X", "Y", ["M", "A"])
    assert minimum_backdoor_sets(M_BIAS, "X", "Y") == [()]
    assert not is_backdoor_set(MIXED, "X", "Y", [])
    assert not is_backdoor_set(MIXED, "X", "Y", ["W"])  # a descendant of X
    assert minimum_backdoor_sets(MIXED, "X", "Y") == [("Z",)]
    assert minimum_backdoor_sets(MIXED, "X", "Y", observed=["W", "C"]) == []  # Z unobserved: none


def test_paths_mediators_and_recanting_witnesses():
    assert has_directed_path(MIXED, "Z", "C") and not has_directed_path(MIXED, "C", "Z")
    assert mediators(MIXED, "X", "Y") == {"W"}
    # X -> W -> M -> Y and W -> Y: W is a recanting witness for the effects through M
    g = {"X": (), "W": ("X",), "M": ("W",), "Y": ("M", "W")}
    assert recanting_witnesses(g, "X", "M", "Y") == {"W"}
    g2 = {"X": (), "M": ("X",), "Y": ("M", "X")}
    assert recanting_witnesses(g2, "X", "M", "Y") == set()
