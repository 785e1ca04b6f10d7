"""Value maps invert themselves; the abstraction map accounts for every low-level variable."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.abstraction import (
    SCM,
    Abstraction,
    Bernoulli,
    BitsToInt,
    Count,
    Identity,
    Majority,
    Mean,
    Normal,
    Projection,
    Threshold,
)
from causal_ext.abstraction.systems import adder


@pytest.mark.parametrize("vmap,macro,shapes", [
    (BitsToInt(), np.array([0, 1, 2, 3]), [(), ()]),
    (Mean(), np.array([0.2, 0.7]), [(4,)]),
    (Mean(jitter=0.3), np.array([0.2, 0.7]), [(4,)]),
    (Count(), np.array([0.0, 3.0, 10.0]), [(10,)]),
    (Majority(), np.array([-1, 1, 1]), [(3,)]),
    (Projection([0, 2.0, 0], scale=5.0, offset=1.0), np.array([0.0, 2.5]), [(3,)]),
    (Threshold(0.5), np.array([0, 1]), [()]),
    (Identity(), np.array([[1.0, 2.0]]), [(2,)]),
])
def test_abstract_of_ground_is_the_identity(vmap, macro, shapes):
    micro = vmap.ground(macro, shapes, np.random.default_rng(0))
    assert [m.shape[1:] for m in micro] == [tuple(s) for s in shapes]
    np.testing.assert_allclose(vmap.abstract(micro), macro)


def test_groundings_are_random_preimages():
    rng = np.random.default_rng(0)
    flags = Count().ground(np.full(200, 3.0), [(6,)], rng)[0]
    assert flags.sum(1).tolist() == [3] * 200 and len({tuple(f) for f in flags}) == 20  # all C(6,3) sets
    spins = Majority().ground(np.ones(400, dtype=int), [(3,)], rng)[0]
    assert len({tuple(s) for s in spins}) == 4 and np.all(spins.sum(1) > 0)
    with pytest.raises(ValueError, match="odd"):
        Majority().abstract([np.ones((2, 4))])
    with pytest.raises(ValueError, match="exactly one"):
        Mean().abstract([np.ones((2, 2)), np.ones((2, 2))])


def test_abstraction_check_rejects_bad_partitions():
    low, high = adder.circuit(), adder.arithmetic()
    adder.abstraction().check(low, high)
    cells = {k: list(v) for k, v in adder.abstraction().cells.items()}
    maps = {k: BitsToInt() for k in cells}
    with pytest.raises(ValueError, match="in no cell"):
        Abstraction(cells, maps, unmapped=[], internal=adder.GATES).check(low, high)
    with pytest.raises(ValueError, match="listed both as internal and as unmapped"):
        Abstraction(cells, maps, unmapped=["P", "x0"], internal=adder.GATES).check(low, high)
    overlap = {**cells, "Cout": ["C2", "S1"]}
    with pytest.raises(ValueError, match="disjoint"):
        Abstraction(overlap, maps, unmapped=["P"], internal=adder.GATES).check(low, high)
    with pytest.raises(ValueError, match="needs a cell"):
        Abstraction({"A": ["A0", "A1"]}, {"A": BitsToInt()}).check(low, high)
    with pytest.raises(ValueError, match="same keys"):
        Abstraction(cells, {"A": BitsToInt()})
    with pytest.raises(TypeError, match="not a ValueMap"):
        Abstraction({"A": ["A0"]}, {"A": "bits"})
    other = SCM("other")
    other.exogenous("q", Normal())
    other.node("r", ["q"], lambda q: q, Bernoulli())
    with pytest.raises(ValueError, match="not a variable"):
        Abstraction({"Q": ["q"], "R": ["zz"]}, {"Q": Identity(), "R": Identity()}).check(
            other, _two_var_high())


def _two_var_high() -> SCM:
    h = SCM("h")
    h.exogenous("Q", Normal())
    h.node("R", ["Q"], lambda q: q, Normal())
    return h
