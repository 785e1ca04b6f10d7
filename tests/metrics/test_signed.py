"""Signed Recall / HR / NDCG: hand-computed cases and a brute-force property check."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recframe.metrics.ranking import target_ranks
from recframe.metrics.signed import signed_metrics, signed_user_masks

L2 = math.log2
# Items 1..6 scored in decreasing order, so an item's rank is (id - 1) when nothing is masked.
SCORES = torch.tensor([[0.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4]])


def _signed(targets, labels, ks, lam):
    targets = torch.tensor(targets)
    labels = torch.tensor(labels, dtype=torch.int8)
    ranks, valid = target_ranks(SCORES.expand(len(targets), -1), targets, labels)
    values = signed_metrics(ranks, labels, valid, ks, lam)
    masks = signed_user_masks(labels, valid)
    return {k: v.tolist() for k, v in values.items()}, {k: v.tolist() for k, v in masks.items()}


def test_signed_metrics_hand_computed_lambda_half():
    # targets 1(-1) 2(+1) 4(+1) 6(0) -> ranks 0, 1, 3, 5.
    values, masks = _signed([[1, 2, 4, 6]], [[-1, 1, 1, 0]], [2, 4], lam=0.5)
    idcg2 = 1 + 1 / L2(3)
    assert values["signed_recall"][0] == pytest.approx([(1 - 0.5) / 2, (2 - 0.5) / 2])
    assert values["signed_hr"][0] == pytest.approx([0.5, 0.5])
    assert values["signed_ndcg"][0] == pytest.approx(
        [(-0.5 + 1 / L2(3)) / idcg2, (-0.5 + 1 / L2(3) + 1 / L2(5)) / idcg2]
    )
    assert masks == {"signed_recall": [True], "signed_ndcg": [True], "signed_hr": [True]}


def test_negative_signed_ndcg_and_recall():
    # Disliked item 1 at rank 0, liked item 6 at rank 5 (missed at K=2).
    for lam in (1.0, 2.5):
        values, _ = _signed([[1, 6]], [[-1, 1]], [2], lam=lam)
        assert values["signed_ndcg"][0] == pytest.approx([-lam])  # IDCG_L = 1 (|L| = 1)
        assert values["signed_recall"][0] == pytest.approx([-lam])
        assert values["signed_hr"][0] == pytest.approx([-lam])


def test_users_without_liked_items_only_count_in_signed_hr():
    values, masks = _signed([[1, 3], [5, 0], [0, 0]], [[-1, -1], [0, 0], [0, 0]], [2], lam=0.5)
    assert masks["signed_recall"] == [False, False, False]
    assert masks["signed_ndcg"] == [False, False, False]
    assert masks["signed_hr"] == [True, True, False]  # any held-out item, of any label
    assert [v[0] for v in values["signed_hr"]] == pytest.approx([-0.5, 0.0, 0.0])


def test_unknown_label_has_zero_gain_but_occupies_a_rank():
    # Unknown item 1 at rank 0 pushes liked item 2 to rank 1.
    values, _ = _signed([[1, 2]], [[0, 1]], [1, 2], lam=1.0)
    assert values["signed_recall"][0] == pytest.approx([0.0, 1.0])
    assert values["signed_ndcg"][0] == pytest.approx([0.0, 1 / L2(3)])
    assert values["signed_hr"][0] == pytest.approx([0.0, 1.0])


def test_signed_hr_lambda_one_is_hr_liked_minus_hr_disliked():
    values, _ = _signed([[1, 2, 3]], [[-1, 1, 1]], [1, 2, 3], lam=1.0)
    assert values["signed_hr"][0] == pytest.approx([-1.0, 0.0, 0.0])


@st.composite
def signed_batches(draw):
    n_items = draw(st.integers(2, 15))
    batch = draw(st.integers(1, 4))
    n_t = draw(st.integers(1, 6))
    perm = [draw(st.permutations(range(1, n_items + 1))) for _ in range(batch)]
    scores = [[0.0] + [float(p) for p in row] for row in perm]  # distinct scores
    targets = [draw(st.lists(st.integers(1, n_items), min_size=1, max_size=n_t, unique=True)) for _ in perm]
    width = max(len(t) for t in targets)
    labels = [[draw(st.sampled_from([-1, 0, 1])) for _ in t] + [0] * (width - len(t)) for t in targets]
    targets = [t + [0] * (width - len(t)) for t in targets]
    ks = draw(st.lists(st.integers(1, 20), min_size=1, max_size=3, unique=True))
    lam = draw(st.sampled_from([0.0, 0.5, 1.0, 3.0]))
    return scores, targets, labels, ks, lam


@settings(max_examples=60, deadline=None)
@given(signed_batches())
def test_signed_metrics_match_direct_formulas(batch):
    scores, targets, labels, ks, lam = batch
    targets_t, labels_t = torch.tensor(targets), torch.tensor(labels, dtype=torch.int8)
    ranks, valid = target_ranks(torch.tensor(scores), targets_t, labels_t)
    values = signed_metrics(ranks, labels_t, valid, ks, lam)
    for row in range(len(scores)):
        order = sorted(range(1, len(scores[row])), key=lambda j: -scores[row][j])
        rank = {j: p for p, j in enumerate(order)}
        liked = [t for t, lab in zip(targets[row], labels[row]) if t and lab == 1]
        disliked = [t for t, lab in zip(targets[row], labels[row]) if t and lab == -1]
        for i, k in enumerate(ks):
            lh = sum(rank[t] < k for t in liked)
            dh = sum(rank[t] < k for t in disliked)
            hr = float(lh > 0) - lam * float(dh > 0)
            assert values["signed_hr"][row, i].item() == pytest.approx(hr, abs=1e-12)
            if not liked:
                continue
            idcg = sum(1 / L2(i2 + 2) for i2 in range(min(len(liked), k)))
            dcg = sum(1 / L2(rank[t] + 2) for t in liked if rank[t] < k)
            dcg -= lam * sum(1 / L2(rank[t] + 2) for t in disliked if rank[t] < k)
            assert values["signed_recall"][row, i].item() == pytest.approx(
                (lh - lam * dh) / len(liked), abs=1e-12
            )
            assert values["signed_ndcg"][row, i].item() == pytest.approx(dcg / idcg, abs=1e-12)
