"""Known answers of the unlearning metrics, computed by hand on a 6-item toy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from recframe.unlearning.metrics import evaluate_unlearning, topk_distance

FORGET = np.array([False, True, True, False, False, False, False])  # items 1, 2 are the concept


def _batch() -> dict[str, torch.Tensor]:
    # user A: scores rank 1 > 3 > 2 > 4 > 5 > 6, seen item 3 masked; target 2 (forget)
    # user B: ranks 4 > 5 > 1 > 6 > 3 > 2, nothing seen; target 6 (retain)
    inf = float("-inf")
    scores = torch.tensor([[inf, 6.0, 4.0, 5.0, 3.0, 2.0, 1.0], [inf, 4.0, 1.0, 2.0, 6.0, 5.0, 3.0]])
    return {
        "history": torch.zeros(2, 1, dtype=torch.long),
        "scores": scores,
        "seen": torch.tensor([[3], [0]]),
        "targets": torch.tensor([[2], [6]]),
        "labels": torch.tensor([[1], [1]], dtype=torch.int8),
    }


def test_metrics_by_hand_at_k3() -> None:
    batch = _batch()
    m = evaluate_unlearning(lambda b: b["scores"], [batch], FORGET, k=3)
    # top-3: A = [1, 2, 4] (3 is seen), B = [4, 5, 1] -> forget slots: 1, 2 | 1 = 3 of 6
    assert m.top.tolist() == [[1, 2, 4], [4, 5, 1]]
    assert m.exposure == pytest.approx(3 / 6)
    # forget case: user A's target 2 at rank 1 (< 3): recall 1
    assert m.forget_recall == pytest.approx(1.0) and m.n_forget_cases == 1
    # retain case: user B's target 6 at rank 3 (items 4, 5, 1 before it): outside the top 3 -> 0
    assert m.retain_ndcg == pytest.approx(0.0) and m.n_retain_cases == 1
    m5 = evaluate_unlearning(lambda b: b["scores"], [batch], FORGET, k=5)
    assert m5.retain_ndcg == pytest.approx(1 / math.log2(3 + 2))  # rank 3, one relevant item: IDCG = 1


def test_relative_ndcg_and_distance_to_retrain() -> None:
    batch = _batch()
    base = evaluate_unlearning(lambda b: b["scores"], [batch], FORGET, k=5)
    moved = batch["scores"].clone()
    moved[1, 6] = 10.0  # user B's target first: NDCG 1
    method = evaluate_unlearning(lambda b: moved, [batch], FORGET, k=5)
    row = method.row(base, base)
    assert row["retain_ndcg@10_rel"] == pytest.approx(1.0 / (1 / math.log2(5)))
    # top-5 A unchanged; B = [6, 4, 5, 1, 3] vs [4, 5, 1, 6, 3]: the same set -> distance 0 for both
    assert row["distance_to_retrain@10"] == pytest.approx(0.0)


def test_topk_distance_is_one_minus_overlap() -> None:
    a = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    b = torch.tensor([[4, 3, 9, 10], [5, 6, 7, 8]])
    assert topk_distance(a, b).tolist() == [0.5, 0.0]
    assert topk_distance(a, torch.tensor([[9, 10, 11, 12], [1, 2, 3, 4]])).tolist() == [1.0, 1.0]


def test_per_user_retain_ndcg_is_aligned_by_user_and_averages_to_the_row() -> None:
    first, second = _batch(), _batch()
    first["users"], second["users"] = torch.tensor([7, 3]), torch.tensor([5, 9])
    second["scores"] = second["scores"].clone()
    second["scores"][1, 6] = 10.0  # user 9's retain target first: NDCG 1
    m = evaluate_unlearning(lambda b: b["scores"], [first, second], FORGET, k=5)
    # retain cases: the second user of each batch (targets 6); user 3 at rank 3, user 9 at rank 0
    assert m.retain_users.tolist() == [3, 9]
    assert m.retain_per_user.tolist() == pytest.approx([1 / math.log2(5), 1.0])
    assert float(m.retain_per_user.mean()) == pytest.approx(m.retain_ndcg)
    no_ids = evaluate_unlearning(lambda b: b["scores"], [_batch(), _batch()], FORGET, k=5)
    assert no_ids.retain_users.tolist() == [1, 3]  # positions when the batches name no users
