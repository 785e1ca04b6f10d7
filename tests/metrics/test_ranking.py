"""Ranks of held-out items, pessimistic ties, masking and per-user standard metrics."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recframe.metrics.ranking import (
    NonFiniteScoresError,
    check_finite_scores,
    eligible_mask,
    standard_metrics,
    target_ranks,
    topk_items,
)

L2 = math.log2


def _row(values: list[float]) -> torch.Tensor:
    """One score row: column 0 (padding) followed by the given item scores."""
    return torch.tensor([[0.0, *values]])


def random_case(seed: int, rows: int, cols: int, n_targets: int, n_seen: int, levels: int
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Integer scores in ``0..levels-1`` (many ties) with random targets, labels and seen items."""
    g = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, levels, (rows, cols), generator=g).float()
    targets = torch.randint(0, cols, (rows, n_targets), generator=g)
    labels = torch.randint(-1, 2, (rows, n_targets), generator=g)
    seen = torch.randint(0, cols, (rows, n_seen), generator=g)
    return scores, targets, labels, seen


def reference_ranks(scores, targets, labels, seen, disliked_ties: str = "first") -> list[list[int]]:
    """Brute-force ranks: sort eligible items by (-score, tie group, id).

    Tie groups with ``disliked_ties="first"``: held-out disliked, unobserved, held-out unknown, held-out
    liked; with ``"last"`` the unobserved items come first.
    """
    groups = {-1: 0, 0: 2, 1: 3} if disliked_ties == "first" else {-1: 1, 0: 2, 1: 3}
    unobserved = 1 if disliked_ties == "first" else 0
    out = []
    for row in range(len(scores)):
        n_cols = len(scores[row])
        tgt: dict[int, int] = {}
        for t, lab in zip(targets[row], labels[row]):
            if t > 0 and t not in tgt:
                tgt[t] = lab
        masked = {s for s in seen[row] if s > 0} - set(tgt)
        eligible = [j for j in range(1, n_cols) if j not in masked]
        group = {j: groups[tgt[j]] if j in tgt else unobserved for j in eligible}
        order = sorted(eligible, key=lambda j: (-scores[row][j], group[j], j))
        position = {j: p for p, j in enumerate(order)}
        seen_ids: set[int] = set()
        ranks = []
        for t in targets[row]:
            ranks.append(position[t] if t > 0 and t not in seen_ids else n_cols)
            seen_ids.add(t)
        out.append(ranks)
    return out


def test_distinct_scores_rank_and_padding():
    scores = _row([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    ranks, valid = target_ranks(scores, torch.tensor([[5, 2, 0]]), torch.tensor([[1, 1, 0]]))
    assert ranks.tolist() == [[4, 1, 7]]
    assert valid.tolist() == [[True, True, False]]


def test_seen_items_are_masked_but_held_out_items_never_are():
    scores = _row([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    # item 1 is seen (masked); item 2 is both seen and held out -> stays in the ranking.
    seen = torch.tensor([[1, 2, 0]])
    ranks, _ = target_ranks(scores, torch.tensor([[2, 5]]), torch.tensor([[1, 1]]), seen)
    assert ranks.tolist() == [[0, 3]]


def test_padding_column_never_ranks_even_with_huge_score():
    scores = torch.tensor([[1e30, 0.3, 0.2, 0.1]])
    ranks, _ = target_ranks(scores, torch.tensor([[1]]), torch.tensor([[1]]))
    assert ranks.tolist() == [[0]]


def test_all_scores_equal_held_out_item_ranks_last_among_eligible():
    scores = torch.zeros(1, 7)
    seen = torch.tensor([[1, 2]])
    ranks, _ = target_ranks(scores, torch.tensor([[3]]), torch.tensor([[1]]), seen)
    assert ranks.tolist() == [[3]]  # 4 eligible items (3..6), target last


def test_ties_among_held_out_items_by_label_then_id():
    scores = torch.zeros(1, 9)
    targets = torch.tensor([[8, 2, 5, 3, 7]])
    labels = torch.tensor([[1, 1, 0, -1, -1]], dtype=torch.int8)
    ranks, _ = target_ranks(scores, targets, labels)
    # disliked 3, 7 first, then the 3 non-held-out items (1, 4, 6), unknown 5, liked 2, 8.
    assert ranks.tolist() == [[7, 6, 5, 0, 1]]
    ranks, _ = target_ranks(scores, targets, labels, disliked_ties="last")
    # 3 non-held-out items first (1, 4, 6), then disliked 3, 7, unknown 5, liked 2, 8.
    assert ranks.tolist() == [[7, 6, 5, 3, 4]]
    with pytest.raises(ValueError, match="disliked_ties"):
        target_ranks(scores, targets, labels, disliked_ties="middle")


def test_disliked_item_ranks_before_the_unobserved_items_it_ties_with():
    """Issue 14: a tied disliked item used to rank after the unobserved items (lenient for signed metrics)."""
    scores = _row([0.5, 0.9, 0.5, 0.5, 0.1])
    for strategy in ("sort", "compare"):
        ranks, _ = target_ranks(scores, torch.tensor([[3]]), torch.tensor([[-1]]), strategy=strategy)
        assert ranks.tolist() == [[1]]  # only item 2 (strictly greater) ranks before it


def test_partial_tie_with_non_held_out_items_is_pessimistic():
    scores = _row([0.5, 0.9, 0.5, 0.5, 0.1])
    ranks, _ = target_ranks(scores, torch.tensor([[3]]), torch.tensor([[1]]))
    assert ranks.tolist() == [[3]]  # after item 2 (greater) and items 1, 4 (equal)


def test_duplicate_targets_count_once():
    scores = _row([0.9, 0.8, 0.7])
    ranks, valid = target_ranks(scores, torch.tensor([[2, 2, 3]]), torch.tensor([[1, -1, 1]]))
    assert valid.tolist() == [[True, False, True]]
    assert ranks.tolist() == [[1, 4, 2]]


def test_eligible_mask_rules():
    mask = eligible_mask(5, torch.tensor([[2, 0]]), torch.tensor([[2, 3, 0]]))
    assert mask.tolist() == [[False, True, True, False, True]]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_scores_raise_naming_the_model(bad):
    scores = torch.rand(3, 6)
    scores[1, 2] = bad
    scores[2, 5] = bad
    with pytest.raises(NonFiniteScoresError, match=r"'LightGCN'.*2 entries.*2 of 3 user") as info:
        target_ranks(scores, torch.tensor([[1], [1], [1]]), torch.ones(3, 1), model_name="LightGCN")
    assert isinstance(info.value, ValueError)


def test_non_finite_in_masked_column_still_raises_but_padding_column_is_ignored():
    scores = torch.rand(1, 4)
    scores[0, 0] = float("nan")
    check_finite_scores(scores)  # padding column: fine
    scores[0, 3] = float("nan")
    with pytest.raises(NonFiniteScoresError, match="m1"):
        target_ranks(scores, torch.tensor([[1]]), torch.ones(1, 1), seen=torch.tensor([[3]]), model_name="m1")


def test_huge_finite_scores_are_not_mistaken_for_non_finite():
    scores = torch.full((2, 5), 3e38)  # their float32 sum overflows: the exact check must take over
    check_finite_scores(scores)
    ranks, _ = target_ranks(scores, torch.tensor([[1], [2]]), torch.ones(2, 1))
    assert ranks.tolist() == [[3], [3]]


def test_topk_items_flags_rows_with_too_few_eligible_items():
    scores = _row([0.1, 0.9, 0.5])
    mask = eligible_mask(4, torch.tensor([[0]]), torch.tensor([[2]]))
    items, ok = topk_items(scores, mask, 3)
    assert items[0, :2].tolist() == [3, 1]
    assert ok.tolist() == [[True, True, False]]


def test_standard_metrics_hand_computed():
    # Items 1..6 scored in decreasing order; held-out {2, 5} -> ranks 1 and 4.
    scores = _row([0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    ranks, valid = target_ranks(scores, torch.tensor([[2, 5]]), torch.ones(1, 2))
    m = {k: v[0].tolist() for k, v in standard_metrics(ranks, valid, [3, 5]).items()}
    idcg2 = 1 + 1 / L2(3)
    expected = {
        "recall": [1 / 2, 1.0],
        "hr": [1.0, 1.0],
        "precision": [1 / 3, 2 / 5],
        "ndcg": [(1 / L2(3)) / idcg2, (1 / L2(3) + 1 / L2(6)) / idcg2],
        "mrr": [1 / 2, 1 / 2],
        "map": [(1 / 2) / 2, (1 / 2 + 2 / 5) / 2],
    }
    for name, values in expected.items():
        assert m[name] == pytest.approx(values, abs=1e-12), name


def test_standard_metrics_k1_and_idcg_capped_by_k():
    # Held-out {1, 2, 3} at ranks 0, 1, 2: a perfect ranking; IDCG uses min(|R|, K) terms.
    scores = _row([0.9, 0.8, 0.7, 0.6])
    ranks, valid = target_ranks(scores, torch.tensor([[1, 2, 3]]), torch.ones(1, 3))
    m = {k: v[0].tolist() for k, v in standard_metrics(ranks, valid, [1, 2]).items()}
    assert m["ndcg"] == pytest.approx([1.0, 1.0])
    assert m["recall"] == pytest.approx([1 / 3, 2 / 3])
    assert m["precision"] == pytest.approx([1.0, 1.0])
    assert m["map"] == pytest.approx([1 / 3, 2 / 3])  # ranx: denominator |R| = 3, not min(|R|, K)
    assert m["mrr"] == pytest.approx([1.0, 1.0])


def test_standard_metrics_miss_and_no_relevant_user():
    scores = torch.tensor([[0.0, 0.9, 0.8, 0.1], [0.0, 0.9, 0.8, 0.1]])
    ranks, valid = target_ranks(scores, torch.tensor([[3], [3]]), torch.ones(2, 1))
    relevant = valid & torch.tensor([[True], [False]])
    m = standard_metrics(ranks, relevant, [2])
    for name in ("recall", "hr", "precision", "ndcg", "mrr", "map"):
        assert m[name].tolist() == [[0.0], [0.0]], name


def test_standard_metrics_rejects_unknown_names():
    with pytest.raises(ValueError, match="recall"):
        standard_metrics(
            torch.zeros(1, 1, dtype=torch.long), torch.ones(1, 1, dtype=torch.bool), [1], ["foo"]
        )


@st.composite
def tied_batches(draw):
    """Small batches with many score ties (integer scores), random targets/labels/seen."""
    n_items = draw(st.integers(1, 12))
    batch = draw(st.integers(1, 4))
    n_t = draw(st.integers(1, 5))
    n_s = draw(st.integers(0, 5))
    ids = st.integers(0, n_items)
    scores = [[0.0] + [float(draw(st.integers(0, 3))) for _ in range(n_items)] for _ in range(batch)]
    targets = [[draw(ids) for _ in range(n_t)] for _ in range(batch)]
    labels = [[draw(st.sampled_from([-1, 0, 1])) for _ in range(n_t)] for _ in range(batch)]
    seen = [[draw(ids) for _ in range(n_s)] for _ in range(batch)]
    return scores, targets, labels, seen


@settings(max_examples=150, deadline=None)
@given(tied_batches())
def test_ranks_match_brute_force_reference_with_ties(batch):
    scores, targets, labels, seen = batch
    seen_t = torch.tensor(seen, dtype=torch.long) if seen[0] else None
    for rule in ("first", "last"):
        expected = reference_ranks(scores, targets, labels, seen, rule)
        for strategy, numba in (("sort", "1"), ("compare", "1"), ("compare", "0"), ("auto", "1")):
            with pytest.MonkeyPatch.context() as patch:  # "0": the torch counting path instead of the kernel
                patch.setenv("RECFRAME_NUMBA", numba)
                ranks, valid = target_ranks(
                    torch.tensor(scores),
                    torch.tensor(targets),
                    torch.tensor(labels, dtype=torch.int8),
                    seen_t,
                    strategy=strategy,
                    disliked_ties=rule,
                )
            assert ranks.tolist() == expected, (strategy, numba, rule)
    # Ranks of the valid held-out items of a row are distinct.
    for row, ok in zip(ranks.tolist(), valid.tolist()):
        kept = [r for r, v in zip(row, ok) if v]
        assert len(kept) == len(set(kept))


@pytest.mark.parametrize("n_targets", [12, 80])  # "auto" compares up to 64 targets, sorts above
def test_many_targets_sort_and_compare_paths_agree(n_targets):
    scores, targets, labels, seen = random_case(seed=1, rows=6, cols=100, n_targets=n_targets, n_seen=5,
                                                levels=5)
    auto, _ = target_ranks(scores, targets, labels, seen)
    compare, _ = target_ranks(scores, targets, labels, seen, strategy="compare")
    sort, _ = target_ranks(scores, targets, labels, seen, strategy="sort")
    assert (
        auto.tolist()
        == compare.tolist()
        == sort.tolist()
        == reference_ranks(scores.tolist(), targets.tolist(), labels.tolist(), seen.tolist())
    )
    with pytest.raises(ValueError, match="strategy"):
        target_ranks(scores, targets, labels, strategy="fast")


def test_multi_block_streaming_matches_the_reference(monkeypatch):
    """The CPU passes work through blocks of rows; tiny blocks must give the same ranks."""
    import recframe.metrics.ranking as ranking

    monkeypatch.setattr(ranking, "_CPU_BLOCK_ELEMENTS", 8)
    monkeypatch.setenv("RECFRAME_NUMBA", "0")  # the blocks belong to the torch path
    scores, targets, labels, seen = random_case(seed=2, rows=7, cols=13, n_targets=3, n_seen=4, levels=4)
    for rule in ("first", "last"):
        ranks, _ = target_ranks(scores, targets, labels, seen, strategy="compare", disliked_ties=rule)
        expected = reference_ranks(scores.tolist(), targets.tolist(), labels.tolist(), seen.tolist(), rule)
        assert ranks.tolist() == expected
