"""The compiled counting kernel agrees with torch and brute force, splits over threads, flags bad scores."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from recframe.metrics import cpu_kernels
from recframe.metrics.ranking import NonFiniteScoresError, target_ranks
from tests.metrics.test_ranking import random_case


def test_numba_is_installed_so_the_kernel_runs() -> None:
    """numba is a declared dependency: a missing numba is a broken install, not a reason to skip."""
    assert cpu_kernels.numba is not None


def _brute_force(scores: torch.Tensor, thresholds: torch.Tensor, strict: torch.Tensor | None = None
                 ) -> torch.Tensor:
    greater_equal = scores[:, :, None] >= thresholds[:, None, :]
    if strict is not None:
        greater = scores[:, :, None] > thresholds[:, None, :]
        greater_equal = torch.where(strict[:, None, :], greater, greater_equal)
    return greater_equal.sum(dim=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n_targets", [1, 5, 9])
def test_counts_equal_brute_force_with_ties(dtype: torch.dtype, n_targets: int) -> None:
    g = torch.Generator().manual_seed(n_targets)
    scores = torch.randint(0, 4, (37, 101), generator=g).to(dtype)  # many ties
    thresholds = scores[:, 1 : n_targets + 1].clone()
    thresholds[0, 0] = 10.0  # above every score: count 0
    counts, sums = cpu_kernels.count_greater_equal(scores, thresholds)
    assert counts.tolist() == _brute_force(scores, thresholds).tolist()
    assert torch.allclose(sums, scores[:, 1:].sum(dim=1))
    strict = torch.rand(thresholds.shape, generator=g) < 0.5  # held-out disliked targets count only ">"
    counts, _ = cpu_kernels.count_greater_equal(scores, thresholds, strict)
    assert counts.tolist() == _brute_force(scores, thresholds, strict).tolist()


def test_rows_split_over_threads_give_the_same_counts() -> None:
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(64, 20_001, generator=g)
    thresholds = scores[:, 1:6].clone()
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one, _ = cpu_kernels.count_greater_equal(scores, thresholds)
        torch.set_num_threads(4)  # more threads than cores is still correct, only slower
        four, _ = cpu_kernels.count_greater_equal(scores, thresholds)
    finally:
        torch.set_num_threads(previous)
    assert one.tolist() == four.tolist() == _brute_force(scores, thresholds).tolist()


def test_concurrent_calls_from_python_threads() -> None:
    g = torch.Generator().manual_seed(1)
    inputs = [torch.randn(32, 5_001, generator=g) for _ in range(8)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda s: cpu_kernels.count_greater_equal(s, s[:, 1:4])[0], inputs))
    for scores, counts in zip(inputs, results):
        assert counts.tolist() == _brute_force(scores, scores[:, 1:4]).tolist()


def test_ranks_are_identical_with_the_kernel_and_with_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    scores, targets, labels, seen = random_case(seed=2, rows=50, cols=300, n_targets=5, n_seen=7, levels=6)
    for rule in ("first", "last"):
        monkeypatch.delenv("RECFRAME_NUMBA", raising=False)
        with_kernel, _ = target_ranks(scores, targets, labels, seen, strategy="compare", disliked_ties=rule)
        monkeypatch.setenv("RECFRAME_NUMBA", "0")
        assert not cpu_kernels.available(scores)
        with_torch, _ = target_ranks(scores, targets, labels, seen, strategy="compare", disliked_ties=rule)
        assert with_kernel.tolist() == with_torch.tolist()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_scores_still_raise(bad: float) -> None:
    scores = torch.randn(3, 50)
    scores[1, 7] = bad
    targets = torch.tensor([[1, 2]] * 3)
    with pytest.raises(NonFiniteScoresError, match="my-model"):
        target_ranks(scores, targets, torch.ones_like(targets), strategy="compare", model_name="my-model")
    scores[1, 7] = 0.0
    scores[:, 0] = bad  # the padding column is ignored
    target_ranks(scores, targets, torch.ones_like(targets), strategy="compare")


def test_huge_finite_scores_overflowing_the_row_sum_are_not_an_error() -> None:
    scores = torch.full((2, 10), 3e38)
    targets = torch.tensor([[1], [2]])
    ranks, _ = target_ranks(scores, targets, torch.ones_like(targets), strategy="compare")
    assert ranks.tolist() == [[8], [8]]  # all tied: pessimistic, last among the 9 eligible items


def test_unsupported_inputs_use_the_torch_path() -> None:
    assert not cpu_kernels.available(torch.zeros(2, 3, dtype=torch.bfloat16))
    assert cpu_kernels.available(torch.zeros(2, 3))
