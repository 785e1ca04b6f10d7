"""Disliked items in the top K: hand-computed counts and the evaluator family."""

from __future__ import annotations

import pytest
import torch

from recframe.metrics import DislikedHitsFamily, FullRankingEvaluator
from recframe.metrics.ranking import target_ranks
from recframe.metrics.signed import disliked_hits

# items 1..6 scored in decreasing order: an item's rank is (id - 1) when nothing is masked
SCORES = torch.tensor([[0.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4]])


def test_disliked_hits_count_disliked_items_above_each_cutoff() -> None:
    targets = torch.tensor([[1, 2, 4, 6], [5, 3, 0, 0]])
    labels = torch.tensor([[-1, 1, -1, -1], [-1, 0, 0, 0]], dtype=torch.int8)
    ranks, valid = target_ranks(SCORES.expand(2, -1), targets, labels)
    got = disliked_hits(ranks, labels, valid, [1, 4, 6])
    assert got.tolist() == [[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]]


def test_ties_never_hide_a_disliked_hit() -> None:
    scores = torch.tensor([[0.0, 1.0, 1.0, 1.0]])  # three items tie
    ranks, valid = target_ranks(scores, torch.tensor([[3]]), torch.tensor([[-1]], dtype=torch.int8),
                                disliked_ties="first")
    assert disliked_hits(ranks, torch.tensor([[-1]], dtype=torch.int8), valid, [1]).item() == 1.0


def test_family_averages_over_users_with_a_held_out_item() -> None:
    ev = FullRankingEvaluator(n_items=6, ks=[4], families=[DislikedHitsFamily()])
    targets = torch.tensor([[1, 2, 4, 6], [5, 3, 0, 0], [0, 0, 0, 0]])
    labels = torch.tensor([[-1, 1, -1, -1], [-1, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.int8)
    ev.update(SCORES.expand(3, -1), targets, labels, seen=None)
    assert ev.compute()["disliked_hits@4"] == pytest.approx((2.0 + 0.0) / 2)  # the empty user is left out
