"""Exact rung-1/2 inference against brute-force enumeration, and the kidney-stone Simpson's paradox."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.unico import (
    KIDNEY_COUNTS,
    distribution,
    joint_distribution,
    kidney_stones,
    probability,
    random_network,
)
from causal_ext.unico.graphs import minimum_backdoor_sets
from causal_ext.unico.queries import _adjust

from ._brute import brute_probability


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conditional_and_do_queries_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    bn = random_network(rng, 6, edge_prob=0.5, ternary_prob=0.4)
    names = bn.variables
    for _ in range(8):
        a, b, c = rng.choice(names, size=3, replace=False)
        sa, sb, sc = (bn.states[v][int(rng.integers(bn.card(v)))] for v in (a, b, c))
        assert probability(bn, {a: sa}) == pytest.approx(brute_probability(bn, {a: sa}), abs=1e-12)
        assert probability(bn, {a: sa}, {b: sb, c: sc}) == pytest.approx(
            brute_probability(bn, {a: sa}, {b: sb, c: sc}), abs=1e-12
        )
        assert probability(bn, {a: sa}, {c: sc}, do={b: sb}) == pytest.approx(
            brute_probability(bn, {a: sa}, {c: sc}, do={b: sb}), abs=1e-12
        )
    # a joint over two targets, and consistency of a conflicting event
    x, y = names[0], names[-1]
    joint = joint_distribution(bn, [x, y])
    assert joint.shape == (bn.card(x), bn.card(y)) and joint.sum() == pytest.approx(1.0)
    s0 = bn.states[x][0]
    assert probability(bn, {x: s0}, {x: bn.states[x][1]}) == 0.0
    assert probability(bn, {x: s0}, {x: s0}) == 1.0


def test_zero_probability_evidence_and_bad_input_are_clear_errors():
    bn = kidney_stones().mutilate({"treatment": "A"})
    with pytest.raises(ValueError, match="probability zero"):
        probability(bn, {"recovery": "yes"}, {"treatment": "B"})
    with pytest.raises(ValueError, match="unknown variable 'colour'"):
        probability(bn, {"colour": "red"})
    with pytest.raises(ValueError, match="also in the evidence"):
        distribution(bn, "size", {"size": "small"})


def test_kidney_stones_simpsons_paradox_reproduced():
    """Charig et al. (1986): A 78% vs B 83% overall, yet A better in both strata and under do()."""
    bn = kidney_stones()
    p = {
        (t, s): probability(bn, {"recovery": "yes"}, {"treatment": t, "size": s})
        for t in "AB"
        for s in ("small", "large")
    }
    assert p[("A", "small")] == pytest.approx(81 / 87) and round(100 * p[("A", "small")]) == 93
    assert p[("B", "small")] == pytest.approx(234 / 270) and round(100 * p[("B", "small")]) == 87
    assert p[("A", "large")] == pytest.approx(192 / 263) and round(100 * p[("A", "large")]) == 73
    assert p[("B", "large")] == pytest.approx(55 / 80) and round(100 * p[("B", "large")]) == 69
    overall_a = probability(bn, {"recovery": "yes"}, {"treatment": "A"})
    overall_b = probability(bn, {"recovery": "yes"}, {"treatment": "B"})
    assert overall_a == pytest.approx(273 / 350) and round(100 * overall_a) == 78
    assert overall_b == pytest.approx(289 / 350) and round(100 * overall_b) == 83
    assert overall_a < overall_b  # the aggregate favours B ...
    do_a = probability(bn, {"recovery": "yes"}, do={"treatment": "A"})
    do_b = probability(bn, {"recovery": "yes"}, do={"treatment": "B"})
    p_small = sum(n for (_t, s), (_r, n) in KIDNEY_COUNTS.items() if s == "small") / 700
    hand_a = (81 / 87) * p_small + (192 / 263) * (1 - p_small)
    hand_b = (234 / 270) * p_small + (55 / 80) * (1 - p_small)
    assert do_a == pytest.approx(hand_a, abs=1e-12) and do_a == pytest.approx(0.8325, abs=1e-4)
    assert do_b == pytest.approx(hand_b, abs=1e-12) and do_b == pytest.approx(0.7789, abs=1e-4)
    assert do_a > do_b  # ... but intervening favours A
    # size is the (only) backdoor set, and the adjustment formula gives the same numbers
    assert minimum_backdoor_sets(bn.parents, "treatment", "recovery") == [("size",)]
    assert _adjust(bn, "treatment", "A", "recovery", "yes", ["size"]) == pytest.approx(do_a, abs=1e-12)
