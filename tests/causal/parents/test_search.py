"""Selection rule (min variance among passing sets, ties -> smallest) and the subset searches."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.parents.regressors import fold_ids, make_regressor
from causal_ext.parents.search import (
    MAX_EXHAUSTIVE,
    SetEvaluator,
    SetScore,
    exhaustive_search,
    greedy_search,
    select_set,
    ties_with,
)


def make_score(subset, sq, passes=True):
    sq = np.asarray(sq, dtype=float)
    return SetScore(tuple(subset), float(sq.mean()), 0.0, 0.5 if passes else 0.0,
                    np.log(0.5) if passes else -50.0, passes, sq)


def test_min_variance_among_passing_sets_only():
    rng = np.random.default_rng(0)
    base = rng.exponential(size=500)
    scores = [make_score((), 5 * base), make_score((0,), base), make_score((1,), 0.5 * base, passes=False)]
    sel = select_set(scores)
    assert sel.best.subset == (0,)  # (1,) has the smallest variance but fails the test
    assert sel.minimum.subset == (0,)


def test_tie_goes_to_the_smallest_set_and_one_se_rule():
    rng = np.random.default_rng(1)
    base = rng.exponential(size=1000)
    noise = 0.05 * rng.normal(size=1000)
    small, big = make_score((0,), base + 0.001), make_score((0, 2), base + noise)
    assert ties_with(small, big)  # difference far inside one standard error
    assert select_set([make_score((), 3 * base), small, big]).best.subset == (0,)
    clearly_worse = make_score((1,), base + 0.5)
    assert not ties_with(clearly_worse, big)
    assert select_set([clearly_worse, big, make_score((), 3 * base)]).best.subset == (0, 2)


def test_same_size_ties_are_reported_as_ambiguous():
    rng = np.random.default_rng(2)
    base = rng.exponential(size=400)
    e = 1e-3 * rng.normal(size=400)
    a, b = make_score((0,), base), make_score((1,), base + e - e.mean())  # equal variances
    sel = select_set([make_score((), 2 * base), a, b])
    assert {sel.best.subset, *[s.subset for s in sel.ambiguous]} == {(0,), (1,)}


def test_select_requires_a_passing_set():
    with pytest.raises(ValueError, match="empty set"):
        select_set([make_score((0,), [1.0, 2.0], passes=False)])


def chain_data(n, seed, extra=0):
    """X1 -> Y -> X2 (cubic, uniform and exponential noise) plus `extra` independent columns."""
    rng = np.random.default_rng(seed)
    x1 = rng.uniform(-1, 1, n)
    y = x1**3 + rng.uniform(-0.5, 0.5, n)
    x2 = y + rng.exponential(0.5, n)
    cols = [x1, x2, *(rng.normal(size=n) for _ in range(extra))]
    return np.column_stack(cols), y


def evaluator(x, y, seed=0):
    return SetEvaluator(x, y, make_regressor("spline"), fold_ids(len(y), 5, seed), alpha=0.05, rng=seed)


def test_exhaustive_scores_every_subset_and_respects_max_size():
    x, y = chain_data(300, 0, extra=2)
    assert len(exhaustive_search(evaluator(x, y))) == 2**4
    assert len(exhaustive_search(evaluator(x, y), max_size=1)) == 1 + 4
    assert exhaustive_search(evaluator(x, y), candidates=[0, 1])[-1].subset == (0, 1)


def test_exhaustive_refuses_more_than_twelve_candidates():
    x = np.random.default_rng(0).normal(size=(50, MAX_EXHAUSTIVE + 1))
    ev = evaluator(x, x[:, 0])
    with pytest.raises(ValueError, match="greedy"):
        exhaustive_search(ev)
    assert not ev.cache  # refused before any work


def test_greedy_finds_the_parent_with_fewer_sets():
    x, y = chain_data(600, 3, extra=4)
    scores = greedy_search(evaluator(x, y))
    assert select_set(scores).best.subset == (0,)
    assert len(scores) < 2**6
    with pytest.raises(ValueError, match="patience"):
        greedy_search(evaluator(x, y), patience=0)
