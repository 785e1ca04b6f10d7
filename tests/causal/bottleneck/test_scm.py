"""The SCBM simulator: shapes, validation, and closed-form effects against interventional sampling."""

import numpy as np
import pytest

from causal_ext.bottleneck import SCBM, Node, backdoor_scenario, iv_scenario, mediation_scenario


def test_total_effect_matches_interventional_contrast():
    """E[Y | do(X = x)] - E[Y | do(X = 0)] equals total_effect @ x (hidden confounder included)."""
    sc = iv_scenario(d_z=3, d_x=8, d_y=4, rank=2, seed=0)
    x = np.random.default_rng(1).standard_normal(8)
    rng = np.random.default_rng(2)
    n = 40_000
    y1 = sc.scm.sample(n, rng, interventions={"X": x})["Y"].mean(axis=0)
    y0 = sc.scm.sample(n, rng, interventions={"X": np.zeros(8)})["Y"].mean(axis=0)
    # each mean has sd <= ~sqrt(var(Y | do X) / n) ~ 0.01; allow 6 sd
    np.testing.assert_allclose(y1 - y0, sc.scm.total_effect("X", "Y") @ x, atol=0.08)


def test_mediation_total_is_direct_plus_indirect_and_bottleneck_has_rank_r():
    sc = mediation_scenario(d_m=12, d_y=3, rank=2, seed=4)
    np.testing.assert_allclose(sc.extra["total"], sc.extra["direct"] + sc.effect, atol=1e-12)
    assert np.linalg.matrix_rank(sc.scm.direct_effect_matrix("Y", "M")) == 2
    np.testing.assert_array_equal(sc.scm.bottleneck_of("Y", "M"), sc.bottleneck)


def test_backdoor_effect_is_tau_and_sample_shapes():
    sc = backdoor_scenario(d_c=10, d_y=3, rank=2, seed=0)
    data = sc.sample(7, np.random.default_rng(0))
    shapes = {k: v.shape for k, v in data.items()}
    assert shapes == {"confounder": (7, 10), "treatment": (7, 1), "outcome": (7, 3)}
    np.testing.assert_allclose(sc.effect, sc.scm.nodes["Y"].loading[:, :1])


def test_latent_node_is_not_in_roles_and_no_path_means_zero_effect():
    sc = iv_scenario(seed=1)
    assert "H" not in sc.roles.values() and not sc.scm.nodes["H"].observed
    np.testing.assert_array_equal(sc.scm.total_effect("Y", "X"), np.zeros((30, 10)))


def test_nonlinear_scbm_has_no_closed_form_effect():
    b, a = np.ones((1, 2)), np.ones((3, 1))
    scm = SCBM([Node("P", 2), Node("X", 3, ("P",), b, a, activation="tanh")])
    assert scm.sample(5, np.random.default_rng(0))["X"].shape == (5, 3)
    with pytest.raises(ValueError, match="linear SCBM"):
        scm.total_effect("P", "X")


@pytest.mark.parametrize("nodes, match", [
    ([Node("X", 2, ("P",), np.ones((1, 2)), np.ones((2, 1)))], "listed before"),
    ([Node("P", 2), Node("X", 2, ("P",), np.ones((1, 3)), np.ones((2, 1)))], "bottleneck must be"),
    ([Node("P", 2), Node("P", 2)], "unique"),
    ([Node("P", 2, activation="relu")], "activation"),
    ([Node("P", 2, bottleneck=np.ones((1, 1)))], "root node"),
])
def test_bad_models_name_the_problem(nodes, match):
    with pytest.raises(ValueError, match=match):
        SCBM(nodes)


def test_bad_intervention_and_dimension_errors():
    sc = backdoor_scenario(d_c=4, seed=0)
    with pytest.raises(ValueError, match="unknown nodes"):
        sc.scm.sample(3, np.random.default_rng(0), interventions={"Q": np.zeros(1)})
    with pytest.raises(ValueError, match="dimensions must be >= 1"):
        backdoor_scenario(d_c=0)
