"""The one masked top-K: seen items, padding, k beyond the remaining items, non-finite scores, blocks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recframe.metrics import topk as topk_module
from recframe.metrics.ranking import NonFiniteScoresError, masked_topk
from recframe.metrics.topk import check_k, masked_top_k


def _reference(scores: np.ndarray, exclude: list[set[int]], keep: list[set[int]], k: int):
    """Per-row reference: eligible = real items not excluded (or kept), by score desc then id asc."""
    out = []
    for r, row in enumerate(scores):
        eligible = [i for i in range(1, len(row)) if i not in exclude[r] or i in keep[r]]
        out.append(sorted(eligible, key=lambda i: (-row[i], i))[:k])
    return out


def test_matches_a_per_row_reference_with_csr_and_padded_exclusions() -> None:
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(7, 30)).astype(np.float32)  # distinct scores: the order is unique
    seen = [set(rng.choice(np.arange(1, 30), size=int(rng.integers(0, 12)), replace=False).tolist())
            for _ in range(7)]
    keep = [set(list(s)[:1]) for s in seen]
    indptr = np.concatenate([[0], np.cumsum([len(s) for s in seen])])
    flat = np.concatenate([sorted(s) for s in seen]).astype(np.int64)
    padded = torch.zeros(7, 12, dtype=torch.long)
    for r, s in enumerate(seen):
        padded[r, :len(s)] = torch.tensor(sorted(s), dtype=torch.long)
    keep_t = torch.tensor([[next(iter(s)) if s else 0] for s in keep])
    expected = _reference(scores, seen, keep, 8)
    for exclude in ((indptr, flat), padded):
        top = masked_top_k(torch.from_numpy(scores), 8, exclude=exclude, keep=keep_t)
        assert [row[ok].tolist() for row, ok in zip(top.items, top.valid)] == expected
        assert top.valid.all()  # every row has >= 8 eligible items


def test_padding_is_never_returned_and_k_beyond_the_remaining_items_leaves_invalid_slots() -> None:
    scores = torch.tensor([[1e30, 0.3, 0.2, 0.1], [5.0, 0.1, 0.2, 0.3]])
    top = masked_top_k(scores, 100, exclude=(np.array([0, 1, 3]), np.array([2, 1, 3])))
    assert top.items.shape == (2, 3)  # width min(k, n_items)
    assert top.items.tolist() == [[1, 3, 0], [2, 0, 0]]
    assert top.valid.tolist() == [[True, True, False], [True, False, False]]
    assert torch.isneginf(top.scores[~top.valid]).all()
    assert (top.items[top.valid] > 0).all()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_real_scores_raise_naming_model_and_users(bad: float) -> None:
    scores = torch.rand(3, 6)
    scores[1, 4] = bad
    with pytest.raises(NonFiniteScoresError, match=r"'MyModel'.*1 entries.*1 of 3 user\(s\): u196"):
        masked_top_k(scores, 2, model_name="MyModel", users=["u1", "u196", "u3"])


def test_all_nan_row_raises_and_padding_column_is_ignored() -> None:
    scores = torch.rand(2, 5)
    scores[:, 0] = float("nan")  # padding: ignored
    assert masked_top_k(scores, 4).valid.all()
    scores[0, 1:] = float("nan")
    with pytest.raises(NonFiniteScoresError, match="4 entries"):
        masked_top_k(scores, 4)


def test_masked_scores_allow_minus_inf_but_not_nan() -> None:
    scores = torch.tensor([[0.0, float("-inf"), 0.5, float("-inf")]])
    top = masked_top_k(scores, 3, masked_scores=True)
    assert top.items.tolist() == [[2, 0, 0]] and top.valid.tolist() == [[True, False, False]]
    scores[0, 1] = float("nan")
    with pytest.raises(NonFiniteScoresError):
        masked_top_k(scores, 3, masked_scores=True)


def test_blocks_give_the_one_pass_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    scores = torch.from_numpy(rng.normal(size=(9, 20)))
    indptr = np.arange(0, 19, 2)
    flat = rng.integers(1, 20, size=18)
    whole = masked_top_k(scores, 5, exclude=(indptr, flat))
    monkeypatch.setattr(topk_module, "_block_rows", lambda s: 2)  # blocks of 2 rows, the last one short
    blocks = masked_top_k(scores, 5, exclude=(indptr, flat))
    assert torch.equal(whole.items, blocks.items) and torch.equal(whole.scores, blocks.scores)
    scores[7, 3] = float("nan")  # found in a later block, named by its row
    with pytest.raises(NonFiniteScoresError, match="row 7"):
        masked_top_k(scores, 5, exclude=(indptr, flat))


def test_integer_scores_are_ranked_as_floats() -> None:
    top = masked_top_k(torch.tensor([[9, 1, 5, 3]]), 2, exclude=torch.tensor([[2]]))
    assert top.items.tolist() == [[3, 1]] and top.scores.tolist() == [[3.0, 1.0]]


def test_evaluator_entry_point_keeps_held_out_items() -> None:
    scores = torch.tensor([[0.0, 0.9, 0.8, 0.7, 0.6]])
    items, ok = masked_topk(scores, torch.tensor([[1]]), torch.tensor([[1, 2]]), 10)
    assert items[ok].tolist() == [1, 3, 4]  # 1 is held out (kept), 2 seen (excluded)


@pytest.mark.parametrize("k", [2.5, "10", True, 0, -1, None])
def test_k_must_be_a_whole_number_at_least_one(k: object) -> None:
    with pytest.raises(ValueError, match="k="):
        check_k(k)
    with pytest.raises(ValueError, match="k="):
        masked_top_k(torch.zeros(1, 3), k)  # type: ignore[arg-type]
    assert check_k(np.int64(3)) == 3


def test_bad_csr_exclusion_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match=r"indptr must be"):
        masked_top_k(torch.zeros(2, 4), 2, exclude=(np.array([0, 1]), np.array([1])))
