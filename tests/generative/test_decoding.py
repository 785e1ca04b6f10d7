"""Constrained beam search and exact full-catalogue scoring against brute force, and against each other."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor

from recframe.models.generative import (
    SIDTrie,
    beam_search,
    exact_scores,
    index_rows,
    infer_batch_size,
    rowwise,
)
from tests.generative.scorers import MLPScorer, TableScorer, brute_force_scores, random_codes


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.ndarray, tuple[int, ...], TableScorer, int, int, str]:
    sizes = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    n_items = draw(st.integers(1, min(math.prod(sizes), 20)))
    seed = draw(st.integers(0, 2**31 - 1))
    codes = random_codes(np.random.default_rng(seed), sizes, n_items)
    beam = draw(st.integers(1, 8))
    k = draw(st.integers(1, beam))
    return codes, sizes, TableScorer(sizes, n_users=3, seed=seed), k, beam, draw(st.sampled_from(["codebook",
                                                                                                  "valid"]))


# ----------------------------------------------------------------------------------- exact scoring
@pytest.mark.parametrize("normalize", ["codebook", "valid"])
@pytest.mark.parametrize("dense", [True, False])
def test_exact_scores_equal_brute_force_product_of_softmaxes(normalize: str, dense: bool) -> None:
    sizes = (3, 4, 2)
    codes = random_codes(np.random.default_rng(1), sizes, 15)
    trie = SIDTrie.from_codes(codes, sizes, dense_max_bytes=1 << 20 if dense else 0)
    scorer, users = TableScorer(sizes, n_users=4, seed=7), torch.arange(4)
    got = exact_scores(trie, scorer, users, normalize=normalize)
    assert got.shape == (4, 16) and torch.isneginf(got[:, 0]).all()
    np.testing.assert_allclose(got.numpy(), brute_force_scores(scorer, users, codes, normalize), atol=1e-5)
    chunked = exact_scores(trie, scorer, users, normalize=normalize, max_rows=1)  # one node per call
    torch.testing.assert_close(chunked, got)


def test_valid_exact_scoring_skips_last_level_nodes_with_one_child() -> None:
    """Under ``normalize="valid"`` a last-level node with one child gives it log-probability 0, so the walk
    does not score it; the result is still the brute-force product of softmaxes."""
    sizes = (3, 3, 4)  # the last level disambiguates: 2 of the 6 depth-2 nodes have more than one child
    codes = np.array([[0, 0, 0],  # row 0: the padding item
                      [0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0], [1, 0, 1], [1, 0, 2], [1, 2, 0], [2, 2, 0],
                      [2, 1, 0]])
    trie = SIDTrie.from_codes(codes, sizes)
    scorer, users = TableScorer(sizes, n_users=3, seed=4), torch.arange(3)
    seen: list[Tensor] = []

    def recording(state: Tensor, prefix: Tensor) -> Tensor:
        if prefix.shape[-1] == len(sizes) - 1:
            seen.append(prefix[0].clone())
        return scorer(state, prefix)

    got = exact_scores(trie, recording, users, normalize="valid")
    np.testing.assert_allclose(got.numpy(), brute_force_scores(scorer, users, codes, "valid"), atol=1e-5)
    scored = {tuple(p.tolist()) for p in torch.cat(seen)}
    assert scored == {(0, 0), (1, 0)}  # the inner nodes with several children, and only they
    seen.clear()
    exact_scores(trie, recording, users, normalize="codebook")  # codebook mass depends on every node
    assert len(torch.cat(seen)) == 6


def test_valid_normalisation_gives_a_distribution_over_items_and_codebook_loses_mass() -> None:
    sizes = (4, 4, 3)
    codes = random_codes(np.random.default_rng(2), sizes, 30)
    trie, scorer, users = SIDTrie.from_codes(codes, sizes), TableScorer(sizes, 5, seed=3), torch.arange(5)
    valid = exact_scores(trie, scorer, users, normalize="valid")
    torch.testing.assert_close(torch.logsumexp(valid, dim=1), torch.zeros(5), atol=1e-5, rtol=0)
    full = exact_scores(trie, scorer, users, normalize="codebook")
    assert (torch.logsumexp(full, dim=1) < -1e-3).all()  # 30 of 48 paths exist: mass on invalid paths is lost


# ----------------------------------------------------------------------------------- beam search
@settings(max_examples=80, deadline=None)
@given(problems())
def test_beam_search_never_emits_an_invalid_path(problem: tuple) -> None:
    codes, sizes, scorer, k, beam, normalize = problem
    trie, users = SIDTrie.from_codes(codes, sizes), torch.arange(3)
    items, logp = beam_search(trie, scorer, users, k=k, beam=beam, normalize=normalize)
    n_items = len(codes) - 1
    assert items.shape == logp.shape == (3, k)
    found = min(k, n_items)
    assert ((items[:, :found] >= 1) & (items[:, :found] <= n_items)).all()  # real items only ...
    assert (items[:, found:] == 0).all() and torch.isneginf(logp[:, found:]).all()  # ... then padding
    for row in items[:, :found]:
        assert len(set(row.tolist())) == found
    assert (logp[:, :-1] >= logp[:, 1:]).all()
    exact = exact_scores(trie, scorer, users, normalize=normalize)
    torch.testing.assert_close(logp[:, :found], exact.gather(1, items[:, :found]))  # path = exact score
    if beam >= max(trie.n_nodes[1:-1], default=1):  # every prefix survives: beam search is exact
        torch.testing.assert_close(logp[:, :found], exact.topk(found, dim=1).values)


def test_beam_search_with_a_full_beam_equals_exact_top_k() -> None:
    sizes = (5, 5, 4)
    codes = random_codes(np.random.default_rng(4), sizes, 70)
    trie, scorer, users = SIDTrie.from_codes(codes, sizes), TableScorer(sizes, 6, seed=5), torch.arange(6)
    full_beam = max(trie.n_nodes[1:-1])
    exact = exact_scores(trie, scorer, users)
    res = beam_search(trie, scorer, users, k=10, beam=full_beam)
    assert torch.equal(res.items, exact.topk(10, dim=1).indices)
    small = beam_search(trie, scorer, users, k=10, beam=10)  # a heuristic on this flat random model ...
    assert not torch.equal(small.items, res.items)  # ... that does miss items: the full beam is needed here


def test_rows_with_fewer_children_than_the_beam() -> None:
    # root has 1 child, that child 2, then 1 each: a beam of 6 has mostly empty slots at every level
    codes = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0]])
    trie = SIDTrie.from_codes(codes, (3, 3, 3))
    res = beam_search(trie, TableScorer((3, 3, 3), 2, seed=0), torch.arange(2), k=6, beam=6)
    assert sorted(res.items[0, :2].tolist()) == [1, 2] and (res.items[:, 2:] == 0).all()
    assert torch.isfinite(res.log_probs[:, :2]).all() and torch.isneginf(res.log_probs[:, 2:]).all()


def test_items_the_model_rules_out_are_never_returned() -> None:
    """A model may put -inf on valid codes; such items have exact score -inf and beam search drops them."""
    sizes = (2, 3)
    codes = random_codes(np.random.default_rng(3), sizes, 6)  # all 6 paths
    table = TableScorer(sizes, 2, seed=1)

    def scorer(users: Tensor, prefix: Tensor) -> Tensor:
        logits = table(users, prefix)
        return logits.index_fill(2, torch.tensor([0]), float("-inf")) if prefix.shape[-1] == 1 else logits

    trie, users = SIDTrie.from_codes(codes, sizes), torch.arange(2)
    exact = exact_scores(trie, scorer, users)
    assert int(torch.isfinite(exact).sum(1)[0]) == 4  # the two items with code 0 at level 1 are ruled out
    res = beam_search(trie, scorer, users, k=6, beam=6)
    assert torch.isfinite(res.log_probs[:, :4]).all() and (res.items[:, 4:] == 0).all()
    assert torch.equal(res.items[:, :4], exact.topk(4, dim=1).indices)


class PlantedScorer:
    """Peaked model: logit ``beta`` (+ small noise) on every code leading towards a user's target."""

    def __init__(self, codes: np.ndarray, sizes: tuple[int, ...], targets: np.ndarray, beta: float) -> None:
        self.codes, self.sizes, self.targets, self.beta = torch.as_tensor(codes), sizes, targets, beta
        self.noise = TableScorer(sizes, len(targets), seed=11, scale=0.5)

    def __call__(self, users: Tensor, prefix: Tensor) -> Tensor:
        lvl = prefix.shape[-1]
        paths = self.codes[torch.as_tensor(self.targets)[users]]  # [B, K, L]
        match = (paths[:, None, :, :lvl] == prefix[:, :, None, :]).all(-1)  # [B, M, K]
        hot = torch.zeros(*prefix.shape[:2], self.sizes[lvl])
        hot.scatter_add_(2, paths[:, None, :, lvl].expand(-1, prefix.shape[1], -1), match.float())
        return self.beta * hot.clamp(max=1) + self.noise(users, prefix)



def test_beam_of_k_agrees_with_exact_on_a_peaked_model() -> None:
    """If the top-K items' prefixes outrank all other prefixes at every depth, beam = K is exact."""
    sizes, n_users, K = (8, 8, 8), 20, 5
    rng = np.random.default_rng(6)
    codes = random_codes(rng, sizes, 300)
    targets = np.stack([rng.choice(np.arange(1, 301), K, replace=False) for _ in range(n_users)])
    scorer = PlantedScorer(codes, sizes, targets, beta=12.0)
    trie, users = SIDTrie.from_codes(codes, sizes), torch.arange(n_users)
    exact = exact_scores(trie, scorer, users)
    res = beam_search(trie, scorer, users, k=K, beam=K)
    assert torch.equal(res.items, exact.topk(K, dim=1).indices)
    assert all(set(r) == set(t) for r, t in zip(res.items.tolist(), targets.tolist()))


def test_beam_of_k_agrees_with_exact_on_a_trained_model() -> None:
    """A small model trained to convergence on planted preferences (3 favourite items per user, probabilities
    0.6 / 0.3 / 0.1): beam = K returns exactly the exact top-K for K <= 3 (the items the model is confident
    about). Beyond them it is a heuristic (on this model beam = K matches exact top-5/10 for ~70% of users),
    and a beam of the largest inner level's node count is exact again."""
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    sizes, n_items, n_users = (6, 6, 6), 150, 32
    codes = random_codes(rng, sizes, n_items)
    fav = np.stack([rng.choice(np.arange(1, n_items + 1), 3, replace=False) for _ in range(n_users)])
    model = MLPScorer(sizes, n_users)
    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    paths = torch.as_tensor(codes)
    for _ in range(300):
        users = torch.as_tensor(rng.integers(0, n_users, 256))
        items = torch.as_tensor(fav[users.numpy(), rng.choice(3, 256, p=[0.6, 0.3, 0.1])])
        loss = model.nll(users, paths[items])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 1.1  # entropy of (0.6, 0.3, 0.1) summed over one item draw: 0.90 nats
    trie, users = SIDTrie.from_codes(codes, sizes), torch.arange(n_users)
    with torch.no_grad():
        exact = exact_scores(trie, model, users)
        for k in (1, 2, 3):
            res = beam_search(trie, model, users, k=k, beam=k)
            assert torch.equal(res.items, exact.topk(k, dim=1).indices)
        assert (np.sort(exact.topk(3, dim=1).indices.numpy(), 1) == np.sort(fav, 1)).all()
        res = beam_search(trie, model, users, k=10, beam=max(trie.n_nodes[1:-1]))
        assert torch.equal(res.items, exact.topk(10, dim=1).indices)


# ----------------------------------------------------------------------------------- protocol
def test_rowwise_adapter_and_state_helpers() -> None:
    sizes = (3, 3)
    codes = random_codes(np.random.default_rng(8), sizes, 7)
    trie, scorer, users = SIDTrie.from_codes(codes, sizes), TableScorer(sizes, 4, seed=9), torch.arange(4)

    def rows(state: tuple[torch.Tensor, dict], prefix: torch.Tensor) -> torch.Tensor:
        assert state[1]["again"].shape[0] == prefix.shape[0]
        return scorer.rows(state[0], prefix)

    state = (users, {"again": users.clone(), "none": None})
    flat = rowwise(rows)
    torch.testing.assert_close(exact_scores(trie, flat, state), exact_scores(trie, scorer, users))
    a, b = beam_search(trie, flat, state, k=3, beam=4), beam_search(trie, scorer, users, k=3, beam=4)
    assert torch.equal(a.items, b.items)
    assert index_rows(state, torch.tensor([1, 1]))[1]["again"].tolist() == [1, 1]

    @dataclass
    class Ctx:
        note: str
        memory: torch.Tensor

    assert infer_batch_size(Ctx("x", torch.zeros(5, 2))) == 5
    assert infer_batch_size({"a": None, "b": [torch.zeros(3)]}) == 3
    with pytest.raises(ValueError, match="batch_size=B"):
        infer_batch_size(object())
    with pytest.raises(TypeError, match="expand="):
        index_rows(object(), torch.tensor([0]))


def test_bad_arguments_raise_one_clear_error() -> None:
    codes = random_codes(np.random.default_rng(10), (2, 2), 3)
    trie, scorer, users = SIDTrie.from_codes(codes, (2, 2)), TableScorer((2, 2), 2, seed=0), torch.arange(2)
    with pytest.raises(ValueError, match="1 <= k <= beam"):
        beam_search(trie, scorer, users, k=5, beam=4)
    with pytest.raises(ValueError, match="normalize='softmax'"):
        exact_scores(trie, scorer, users, normalize="softmax")
    with pytest.raises(ValueError, match="max_rows=0"):
        exact_scores(trie, scorer, users, max_rows=0)
    with pytest.raises(ValueError, match=r"expected \(2, 1, 2\)"):
        beam_search(trie, lambda s, p: torch.zeros(2, 1, 3), users, k=1, beam=1)
