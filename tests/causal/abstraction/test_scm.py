"""SCM semantics (do, masks, clamp-aware nodes), domains and their errors."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.abstraction import (
    SCM,
    Bernoulli,
    Categorical,
    Clamp,
    Constant,
    Empirical,
    FunctionDomain,
    Normal,
    Uniform,
)


def _chain() -> SCM:
    m = SCM("chain")
    m.exogenous("x", Normal(0.0, 1.0))
    m.node("y", ["x"], lambda x: 2 * x, Normal())
    m.node("z", ["y"], lambda y: y + 1, Normal())
    return m


def test_domains_shapes_and_laws():
    rng = np.random.default_rng(0)
    assert Bernoulli(0.3, shape=4).sample(5000, rng).shape == (5000, 4)
    assert abs(Bernoulli(0.3).sample(20000, rng).mean() - 0.3) < 0.02
    c = Categorical([1, 5], probs=[3, 1]).sample(20000, rng)
    assert set(np.unique(c)) == {1, 5} and abs((c == 5).mean() - 0.25) < 0.02
    u = Uniform(2.0, 3.0, shape=(2, 3)).sample(100, rng)
    assert u.shape == (100, 2, 3) and u.min() >= 2 and u.max() <= 3
    assert np.all(Constant([1.0, 2.0]).sample(3, rng) == [[1, 2]] * 3)
    ex = np.arange(12).reshape(4, 3)
    assert set(map(tuple, Empirical(ex).sample(50, rng))) <= set(map(tuple, ex))
    with pytest.raises(ValueError, match="returned shape"):
        FunctionDomain(lambda n, r: np.zeros(n), shape=2).sample(3, rng)
    with pytest.raises(ValueError, match="probs"):
        Categorical([0, 1], probs=[1.0])
    with pytest.raises(ValueError, match="n=0"):
        Normal().sample(0, rng)


def test_do_cuts_incoming_edges_and_propagates():
    m = _chain()
    rng = np.random.default_rng(1)
    free = m.simulate(n=5, rng=rng)
    np.testing.assert_allclose(free["z"], 2 * free["x"] + 1)
    out = m.simulate({"y": np.full(5, 10.0)}, rng=rng)
    np.testing.assert_allclose(out["y"], 10.0)
    np.testing.assert_allclose(out["z"], 11.0)  # downstream follows the clamp, not x
    assert not np.allclose(out["y"], 2 * out["x"])


def test_masked_clamps_act_per_row():
    m = _chain()
    mask = np.array([True, False, True, False])
    out = m.simulate({"x": np.ones(4), "y": Clamp(np.full(4, -3.0), mask)}, rng=np.random.default_rng(0))
    np.testing.assert_allclose(out["y"], [-3, 2, -3, 2])
    np.testing.assert_allclose(out["z"], [-2, 3, -2, 3])


def test_groups_clamp_aware_nodes_and_stochastic_mechanisms():
    seen = {}

    def pair(x, clamps, rng):
        seen.update(clamps)
        return x + rng.normal(0, 1e-9, len(x)), -x

    m = SCM("g")
    m.exogenous("x", Uniform(0, 1))
    m.group(["a", "b"], ["x"], pair, [Normal(), Normal()], stochastic=True, clamp_aware=True)
    assert m.is_stochastic and m.sinks == ["a", "b"] and m.roots == ["x"] and m.parents("b") == ("x",)
    out = m.simulate({"b": np.zeros(3)}, n=3, rng=np.random.default_rng(0))
    assert list(seen) == ["b"]
    np.testing.assert_allclose(out["b"], 0.0)
    np.testing.assert_allclose(out["a"], out["x"], atol=1e-6)


def test_scm_errors_name_the_problem():
    m = _chain()
    with pytest.raises(ValueError, match="unknown variable 'w'"):
        m.simulate({"w": np.zeros(2)})
    with pytest.raises(ValueError, match="value shape"):
        m.simulate({"x": np.zeros((2, 3))})
    with pytest.raises(ValueError, match="pass n"):
        m.simulate()
    with pytest.raises(ValueError, match="different row counts"):
        m.simulate({"x": np.zeros(2), "y": np.zeros(3)})
    with pytest.raises(ValueError, match="not defined yet"):
        SCM("bad").node("y", ["x"], lambda x: x, Normal())
    with pytest.raises(ValueError, match="defined twice"):
        _chain().exogenous("x", Normal())
    bad = SCM("shape")
    bad.exogenous("x", Normal())
    bad.node("y", ["x"], lambda x: np.stack([x, x], 1), Normal())
    with pytest.raises(ValueError, match="returned shape"):
        bad.simulate(n=2)
