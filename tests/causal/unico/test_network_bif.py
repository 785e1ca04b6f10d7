"""DiscreteBN validation and helpers, and the BIF reader/writer (causal_ext.unico.network / .bif)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from causal_ext.unico import DiscreteBN, parse_bif, random_network, read_bif, write_bif
from causal_ext.unico.network import quantize_cpt

TOY_BIF = """
// a comment
network "toy" { property author = someone ; }
variable Rain { type discrete [ 2 ] { yes, no }; property note = x; }
variable Spread { type discrete [ 3 ] { <5, 5-12, Asy/Patch }; }
/* block
   comment */
variable Wet { type discrete [ 2 ] { True, False }; }
probability ( Rain ) { table 0.2, 0.8; }
probability ( Spread | Rain ) {
  (yes) 0.1, 0.2, 0.7;
  default 0.5, 0.25, 0.25;
}
probability ( Wet | Rain, Spread ) {
  (yes, <5) 0.9, 0.1;
  (no, <5) 0.2, 0.80000001;
  (yes, 5-12) 1.0, 0.0;
  (no, 5-12) 0.3, 0.7;
  (yes, Asy/Patch) 0.6, 0.4;
  (no, Asy/Patch) 0.0, 1.0;
}
"""


def test_parse_bif_reads_states_parents_rows_and_default():
    bn = parse_bif(TOY_BIF)
    assert bn.name == "toy"
    assert bn.variables == ["Rain", "Spread", "Wet"]
    assert bn.states["Spread"] == ("<5", "5-12", "Asy/Patch")
    assert bn.parents["Wet"] == ("Rain", "Spread")
    np.testing.assert_allclose(bn.cpts["Spread"], [[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]])  # 'no' from default
    # rows are (Rain, Spread, Wet); the slightly-off row is renormalised
    np.testing.assert_allclose(bn.cpts["Wet"][1, 0], [0.2, 0.8], atol=1e-7)
    np.testing.assert_allclose(bn.cpts["Wet"][0, 2], [0.6, 0.4])
    assert bn.is_deterministic("Wet") is False


def test_write_bif_round_trips(tmp_path):
    bn = random_network(np.random.default_rng(3), 6)
    again = parse_bif(write_bif(bn))
    assert again.variables == bn.variables and again.parents == bn.parents and again.states == bn.states
    for v in bn.variables:
        np.testing.assert_array_equal(again.cpts[v], bn.cpts[v])
    path = tmp_path / "net.bif.gz"
    path.write_bytes(gzip.compress(write_bif(bn).encode()))
    assert read_bif(path).variables == bn.variables


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("variable A { type discrete [ 2 ] { a, b }; }", "no probability block"),
        ("variable A { type discrete [ 3 ] { a, b }; }", "declares 3 states"),
        ("variable A { type discrete [ 2 ] { a, b }; } probability ( A ) { table 0.5, 0.6; }", "sums to"),
        (
            "variable A { type discrete [ 2 ] { a, b }; } probability ( A | B ) { (a) 0.5, 0.5; }",
            "undeclared",
        ),
        (
            "variable A { type discrete [ 2 ] { a, b }; } variable B { type discrete [ 2 ] { a, b }; }"
            "probability ( A ) { table 0.5, 0.5; } probability ( B | A ) { table 0.5, 0.5, 0.5, 0.5; }",
            "not supported",
        ),
        (
            "variable A { type discrete [ 2 ] { a, b }; } variable B { type discrete [ 2 ] { a, b }; }"
            "probability ( A ) { table 0.5, 0.5; } probability ( B | A ) { (a) 0.5, 0.5; }",
            "misses rows",
        ),
        (
            "variable A { type discrete [ 2 ] { a, b }; } variable B { type discrete [ 2 ] { a, b }; }"
            "probability ( A ) { table 0.5, 0.5; } probability ( B | A ) { (c) 0.5, 0.5; (b) 0.5, 0.5; }",
            "names a state",
        ),
        ("variable A { type continuous; }", "expected 'discrete'|only 'discrete'"),
        ("banana", "unexpected 'banana'"),
    ],
)
def test_parse_bif_errors(text, match):
    with pytest.raises(ValueError, match=match):
        parse_bif(text)


def _net(**over):
    kw = {
        "states": {"a": ("0", "1"), "b": ("0", "1")},
        "parents": {"b": ("a",)},
        "cpts": {"a": np.array([0.3, 0.7]), "b": np.array([[0.9, 0.1], [0.2, 0.8]])},
    }
    kw.update(over)
    return DiscreteBN(**kw)


def test_discrete_bn_validation_errors():
    with pytest.raises(ValueError, match="shape"):
        _net(cpts={"a": np.array([0.3, 0.7]), "b": np.array([0.5, 0.5])})
    with pytest.raises(ValueError, match="rows must sum to 1"):
        _net(cpts={"a": np.array([0.3, 0.6]), "b": np.array([[0.9, 0.1], [0.2, 0.8]])})
    with pytest.raises(ValueError, match="cycle"):
        _net(
            parents={"a": ("b",), "b": ("a",)},
            cpts={"a": np.full((2, 2), 0.5), "b": np.full((2, 2), 0.5)},
        )
    with pytest.raises(ValueError, match="missing the table"):
        _net(cpts={"a": np.array([0.3, 0.7])})
    with pytest.raises(ValueError, match="latent names unknown"):
        _net(latent=frozenset({"zz"}))
    bn = _net()
    with pytest.raises(ValueError, match="not a state of 'a'"):
        bn.state_index("a", "2")
    with pytest.raises(ValueError, match="unknown variable 'q'"):
        bn.card("q")


def test_mutilate_subnetwork_and_sampling():
    bn = _net()
    cut = bn.mutilate({"b": "1"})
    assert cut.parents["b"] == () and cut.cpts["b"].tolist() == [0.0, 1.0]
    assert bn.parents["b"] == ("a",)  # unchanged
    assert bn.subnetwork(["a"]).variables == ["a"]
    draws = bn.sample(40_000, np.random.default_rng(0))
    assert abs(draws["a"].mean() - 0.7) < 0.01
    assert abs(draws["b"][draws["a"] == 0].mean() - 0.1) < 0.01


def test_quantize_rows_sum_to_one_on_the_grid():
    rng = np.random.default_rng(0)
    table = rng.dirichlet(np.ones(3), size=(4, 2))
    q = quantize_cpt(table, 2)
    np.testing.assert_allclose(q.sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(q * 100, np.rint(q * 100), atol=1e-9)
    assert np.abs(q - table).max() <= 0.01 + 1e-12
    with pytest.raises(ValueError, match="decimals"):
        _net().quantized(0)
