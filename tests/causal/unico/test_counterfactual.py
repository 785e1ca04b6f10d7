"""Rung-3 answers on hand-computable SCMs and identities that every compatible SCM must satisfy."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.unico import (
    DiscreteBN,
    Link,
    counterfactual_probability,
    ett,
    firing_squad,
    multi_world_network,
    natural_effects,
    pn_ps_bounds,
    probabilities_of_causation,
    probability,
    random_network,
    response_types,
)
from causal_ext.unico.counterfactual import quantile_cells
from causal_ext.unico.graphs import recanting_witnesses
from causal_ext.unico.queries import NetInfo, _adjust, _mediation_formula


@pytest.mark.parametrize(("p", "q"), [(0.5, 0.0), (0.3, 0.2), (0.9, 0.5)])
def test_firing_squad_counterfactuals(p, q):
    """Pearl (2009) 7.1.2: given the prisoner is dead, had A not shot he is dead iff the court ordered it."""
    bn = firing_squad(p, q)
    want = p / (p + (1 - p) * q)
    got = counterfactual_probability(bn, {"death": "yes"}, {"rifleman_a": "no"}, {"death": "yes"})
    assert got == pytest.approx(want, abs=1e-12)
    # the same given that A shot; and B's shot alone is certain to kill
    got_a = counterfactual_probability(bn, {"death": "yes"}, {"rifleman_a": "no"}, {"rifleman_a": "yes"})
    assert got_a == pytest.approx(want, abs=1e-12)
    assert counterfactual_probability(bn, {"death": "yes"}, {"rifleman_b": "yes"}, {"death": "no"}) == 1.0
    # no evidence: the counterfactual is the interventional probability
    assert counterfactual_probability(bn, {"death": "yes"}, {"rifleman_a": "no"}) == pytest.approx(
        probability(bn, {"death": "yes"}, do={"rifleman_a": "no"})
    )


def test_response_types_pn_ps_hand_computed():
    """Y = f_U(X) with explicit response types; X independent of U, so PN and PS are ratios of type masses."""
    never, helped, hurt, always = 0.1, 0.5, 0.15, 0.25
    bn = response_types(0.4, (never, helped, hurt, always))
    poc = probabilities_of_causation(bn, "x", "1", "0", "y", "1")
    assert poc["pn"] == pytest.approx(helped / (helped + always), abs=1e-12)
    assert poc["ps"] == pytest.approx(helped / (helped + never), abs=1e-12)
    assert poc["pns"] == pytest.approx(helped, abs=1e-12)
    bounds = pn_ps_bounds(bn, "x", "1", "0", "y", "1")
    # hand values of the Tian-Pearl bounds (exogeneity): P(y|x) = .75, P(y|x') = .4
    assert bounds["pn"] == pytest.approx(((0.75 - 0.4) / 0.75, (1 - 0.4) / 0.75))
    assert bounds["ps"] == pytest.approx(((0.75 - 0.4) / (1 - 0.4), min(1.0, 0.75 / (1 - 0.4))))
    for k in ("pn", "ps"):
        lo, hi = bounds[k]
        assert lo - 1e-12 <= poc[k] <= hi + 1e-12
    # without "hurt" the model is monotone and PN hits the point-identified excess risk ratio
    mono = response_types(0.4, (0.2, 0.5, 0.0, 0.3))
    p_yx, p_yxp = 0.8, 0.3
    poc = probabilities_of_causation(mono, "x", "1", "0", "y", "1")
    assert poc["pn"] == pytest.approx((p_yx - p_yxp) / p_yx, abs=1e-12)
    assert poc["ps"] == pytest.approx((p_yx - p_yxp) / (1 - p_yxp), abs=1e-12)


def test_two_variable_deterministic_scm_pn_ps():
    """Y := X (a deterministic mechanism): PN = PS = 1, and the counterfactual flips Y with X."""
    bn = DiscreteBN(
        {"x": ("0", "1"), "y": ("0", "1")},
        {"y": ("x",)},
        {"x": np.array([0.3, 0.7]), "y": np.eye(2)},
    )
    poc = probabilities_of_causation(bn, "x", "1", "0", "y", "1")
    assert poc == pytest.approx({"pn": 1.0, "ps": 1.0, "pns": 1.0})
    assert counterfactual_probability(bn, {"y": "0"}, {"x": "0"}, {"y": "1"}) == 1.0


def test_quantile_scm_is_monotone_tian_pearl_point_values_under_confounding():
    """Confounded X <- Z -> Y, X -> Y with P(y|x,z) >= P(y|x',z): PN = [P(y) - P(y_x')] / P(x, y)."""
    bn = DiscreteBN(
        {"z": ("0", "1"), "x": ("0", "1"), "y": ("0", "1")},
        {"x": ("z",), "y": ("x", "z")},
        {
            "z": np.array([0.6, 0.4]),
            "x": np.array([[0.7, 0.3], [0.2, 0.8]]),
            "y": np.array([[[0.9, 0.1], [0.6, 0.4]], [[0.5, 0.5], [0.1, 0.9]]]),
        },
    )
    poc = probabilities_of_causation(bn, "x", "1", "0", "y", "1")
    p_y = probability(bn, {"y": "1"})
    y_x = probability(bn, {"y": "1"}, do={"x": "1"})
    y_xp = probability(bn, {"y": "1"}, do={"x": "0"})
    p_xy = probability(bn, {"x": "1", "y": "1"})
    p_xpyp = probability(bn, {"x": "0", "y": "0"})
    assert poc["pn"] == pytest.approx((p_y - y_xp) / p_xy, abs=1e-12)
    assert poc["ps"] == pytest.approx((y_x - p_y) / p_xpyp, abs=1e-12)
    assert poc["pns"] == pytest.approx(y_x - y_xp, abs=1e-12)


def test_quantile_cells_reproduce_the_cpt():
    t = np.array([[0.2, 0.5, 0.3], [0.25, 0.25, 0.5], [1.0, 0.0, 0.0]])
    w, resp = quantile_cells(t)
    assert w.sum() == pytest.approx(1.0) and (w > 0).all()
    for r in range(3):
        got = [w[resp[r] == s].sum() for s in range(3)]
        np.testing.assert_allclose(got, t[r], atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_identities_on_random_networks(seed):
    """Bounds contain PN/PS; ETT = backdoor formula; NDE/NIE = mediation formula; NDE/NIE/TE bookkeeping."""
    rng = np.random.default_rng(100 + seed)
    bn = random_network(rng, 5, edge_prob=0.6, ternary_prob=0.3)
    info = NetInfo(bn)
    order = bn.variables  # declaration order is the sampling order: the planted z -> x -> y, z -> y
    x, y = order[1], order[2]
    xs = bn.states[x]
    for y_state in bn.states[y]:
        if bn.card(x) == 2:
            poc = probabilities_of_causation(bn, x, xs[1], xs[0], y, y_state)
            b = pn_ps_bounds(bn, x, xs[1], xs[0], y, y_state)
            for k in ("pn", "ps"):
                assert b[k][0] - 1e-9 <= poc[k] <= b[k][1] + 1e-9
        zs = info.backdoor(x, y)[0]
        want = probability(bn, {y: y_state}, {x: xs[1]}) - _adjust(bn, x, xs[0], y, y_state, zs, {x: xs[1]})
        assert ett(bn, x, xs[1], xs[0], y, y_state) == pytest.approx(want, abs=1e-10)
    compared = 0
    for a, b in ((x, y), (order[0], y)):  # order[0] -> x -> y: x mediates the effect of order[0]
        a_states = bn.states[a]
        for m in sorted(info.de[a] & info.an[b] - {a, b}):
            if recanting_witnesses(bn.parents, a, m, b):
                continue  # natural effects not identified there
            eff = natural_effects(bn, a, a_states[1], a_states[0], m, b, bn.states[b][0])
            te = probability(bn, {b: bn.states[b][0]}, do={a: a_states[1]}) - probability(
                bn, {b: bn.states[b][0]}, do={a: a_states[0]}
            )
            assert eff["te"] == pytest.approx(te, abs=1e-12)
            for which in ("nde", "nie"):
                formula = _mediation_formula(
                    bn, info, a, a_states[1], a_states[0], m, b, bn.states[b][0], which
                )
                assert formula is not None
                assert eff[which] == pytest.approx(formula, abs=1e-10)
                compared += 1
    assert compared >= 2


def test_multi_world_links_and_merging():
    bn = firing_squad(0.5, 0.0)
    mw = multi_world_network(bn, [{}, {"rifleman_a": "no"}])
    # variables upstream of the intervention are shared between the worlds
    assert mw.nodes[0]["captain"] == mw.nodes[1]["captain"]
    assert mw.nodes[0]["death"] != mw.nodes[1]["death"]
    with pytest.raises(ValueError, match="earlier world"):
        multi_world_network(bn, [{"captain": Link(0)}])
