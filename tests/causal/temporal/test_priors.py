"""Reachability penalty (path prohibition) on the normalised summary graph; prior handling."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from causal_ext.temporal.graphs import transitive_closure
from causal_ext.temporal.priors import (
    ancestral_pairs,
    close_priors,
    normaliser,
    order_penalty,
    order_penalty_and_grad,
    prior_mask,
    reachability,
    sample_order_priors,
)
from causal_ext.temporal.simulate import simulate_svar

KINDS = ["resolvent", "expm"]
# chain 1 -> 2 -> 3 (0-based 0 -> 1 -> 2), unit weights
CHAIN = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])


@pytest.mark.parametrize("kind", KINDS)
def test_known_answer_chain(kind: str) -> None:
    """Prior 3 < 1 forbids 1 ~> 3, which the chain has: P > 0; prior 1 < 3 forbids 3 ~> 1: P = 0."""
    violated = order_penalty(CHAIN, np.array([[2, 0]]), kind)
    satisfied = order_penalty(CHAIN, np.array([[0, 2]]), kind)
    # closed form: row sums r = (1, 1, 0), rho = 1.1 * 2^(1/8) + 1e-8, the only walk 0 -> 2 is 0 -> 1 -> 2
    t = 1.0 / (1.1 * 2 ** (1 / 8) + 1e-8)
    expected = t**2 if kind == "resolvent" else t**2 / 2
    assert violated == pytest.approx(expected, rel=1e-10)
    assert violated > 0
    assert satisfied == 0.0
    # the direct edge counts too: prior 2 < 1 forbids the edge 1 -> 2 itself
    assert order_penalty(CHAIN, np.array([[1, 0]]), kind) > 0


@pytest.mark.parametrize("kind", KINDS)
def test_finite_and_bounded_on_cyclic_summary(kind: str) -> None:
    """A strong 2-cycle (spectral radius 10): unnormalised walk sums blow up, the normalised ones do not."""
    S = np.array([[0.0, 10.0, 0.0], [10.0, 0.0, 3.0], [0.0, 0.0, 0.0]])
    eye = np.eye(3)
    assert np.any(np.linalg.inv(eye - S) < 0)  # the unnormalised resolvent is meaningless here
    R = reachability(S, kind)
    assert np.all(np.isfinite(R)) and np.all(R >= 0)
    bound = 1 / 0.1 if kind == "resolvent" else np.e ** (1 / 1.1) - 1
    assert R.max() <= bound
    np.testing.assert_array_equal(R > 0, transitive_closure(S))
    # 2 cannot reach anything; 0 and 1 reach each other and 2
    assert order_penalty(S, np.array([[2, 0]]), kind) > 0  # forbids 0 ~> 2 (exists via 1)
    assert order_penalty(S, np.array([[0, 2]]), kind) == 0.0  # forbids 2 ~> 0 (absent)
    # scale-free: multiplying every weight leaves the normalised measure unchanged
    np.testing.assert_allclose(reachability(1e3 * S, kind), R, rtol=1e-6)


@pytest.mark.parametrize("kind", KINDS)
def test_penalty_is_zero_exactly_without_prohibited_paths(kind: str) -> None:
    """On random graphs (cyclic ones included) ``R > 0`` matches the exact transitive closure."""
    rng = np.random.default_rng(0)
    for _ in range(40):
        d = int(rng.integers(2, 8))
        S = rng.uniform(0.5, 5.0, (d, d)) * (rng.random((d, d)) < 0.3)
        np.fill_diagonal(S, 0.0)
        R = reachability(S, kind)
        C = transitive_closure(S)
        np.testing.assert_array_equal(R > 1e-14, C)
        assert np.all(R[~C] == 0.0)


@pytest.mark.parametrize("kind", KINDS)
def test_gradient_matches_finite_differences(kind: str) -> None:
    rng = np.random.default_rng(1)
    S = rng.uniform(0.2, 2.0, (5, 5)) * (rng.random((5, 5)) < 0.6)
    np.fill_diagonal(S, 0.0)
    S[3, 0] = 1.5  # a cycle 0 -> ... -> 3 -> 0 is likely; make sure some entries are on it
    mask = prior_mask(np.array([[0, 1], [2, 3], [4, 0]]), 5)
    P, grad = order_penalty_and_grad(S, mask, kind)
    assert P == pytest.approx(float(np.sum(mask * reachability(S, kind))))
    num = approx_fprime(S.ravel(), lambda v: order_penalty_and_grad(v.reshape(5, 5), mask, kind)[0], 1e-7)
    np.testing.assert_allclose(grad, num.reshape(5, 5), atol=1e-5)


def test_normaliser_bounds_spectral_radius() -> None:
    rng = np.random.default_rng(2)
    for _ in range(20):
        S = rng.exponential(3.0, (6, 6))
        rho, _ = normaliser(S, 0.1)
        assert np.max(np.abs(np.linalg.eigvals(S / rho))) <= 1 / 1.1 + 1e-12
        assert np.abs(S / rho).sum(axis=1).max() <= 1 / 1.1 + 1e-12


def test_unnormalised_ablation_and_bad_arguments() -> None:
    S = np.array([[0.0, 10.0], [10.0, 0.0]])
    assert reachability(S, "expm", margin=None)[0, 1] == pytest.approx(np.sinh(10.0))  # e^10-scale growth
    with pytest.raises(ValueError, match="resolvent needs normalisation"):
        reachability(S, "resolvent", margin=None)
    with pytest.raises(ValueError, match="margin"):
        reachability(S, "resolvent", margin=0.0)
    with pytest.raises(ValueError, match="kind"):
        reachability(S, "katz")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-negative"):
        reachability(-S)
    with pytest.raises(ValueError, match="mask"):
        order_penalty_and_grad(S, np.zeros((3, 3)))


def test_close_priors_is_transitive_and_validates() -> None:
    closed = close_priors([(0, 1), (1, 2)], 4)
    assert {tuple(p) for p in closed} == {(0, 1), (1, 2), (0, 2)}
    assert close_priors([], 3).shape == (0, 2)
    with pytest.raises(ValueError, match="contradictory"):
        close_priors([(0, 1), (1, 2), (2, 0)], 3)
    with pytest.raises(ValueError, match="outside"):
        close_priors([(0, 3)], 3)
    with pytest.raises(ValueError, match="two different"):
        close_priors([(1, 1)], 3)
    with pytest.raises(ValueError, match="pairs"):
        close_priors(np.array([0, 1, 2]), 3)


def test_sampled_priors_are_true_orderings() -> None:
    sim = simulate_svar(8, 2, 50, seed=3, backward_fraction=0.3)
    pairs = ancestral_pairs(sim.W, sim.A)
    C = transitive_closure(np.abs(sim.W) + np.abs(sim.A).sum(0) * (1 - np.eye(8)))
    for i, j in pairs:
        assert C[i, j] and not C[j, i]
    pri = sample_order_priors(sim.W, sim.A, 0.25, np.random.default_rng(0))
    assert len(pri) == max(1, round(0.25 * len(pairs)))
    assert {tuple(p) for p in pri} <= {tuple(p) for p in pairs}
    with pytest.raises(ValueError, match="fraction"):
        sample_order_priors(sim.W, sim.A, 1.5, np.random.default_rng(0))
