"""PopRec recomputed from the S3-Rec files: the hand-checked small case and the published rows."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.poprec_protocol import (
    PUBLISHED,
    SOURCES,
    counts,
    evaluate,
    locate,
    metrics,
    rank_of_test_items,
)


def _seqs() -> list[np.ndarray]:
    # three users; the last item of each is the test item, the one before the validation item
    return [np.array([1, 2, 3, 4]), np.array([2, 1, 4]), np.array([3, 2, 1, 2])]


def test_counts_follow_the_source() -> None:
    seqs = _seqs()
    assert counts(seqs, "train", 5).tolist() == [0, 1, 3, 1, 0]  # [1, 2], [2], [3, 2]
    assert counts(seqs, "train + valid", 5).tolist() == [0, 3, 3, 2, 0]  # [1, 2, 3], [2, 1], [3, 2, 1]
    assert counts(seqs, "all (test included)", 5).tolist() == [0, 3, 4, 2, 2]


def test_ranks_skip_the_users_earlier_items_and_break_ties_by_id() -> None:
    seqs = _seqs()
    item_counts = np.array([0, 3, 4, 2, 2])  # order: 2, 1, 3, 4, 0 (3 before 4: tie broken by id)
    # user 0: earlier {1, 2, 3} removed -> [4, 0]: rank of 4 is 0
    # user 1: earlier {1, 2} removed -> [3, 4, 0]: rank of 4 is 1
    # user 2: earlier {1, 2, 3} removed -> [4, 0]; the test item 2 was seen before: its position 0 minus the
    #         earlier items ranked above it (none) -> 0
    assert rank_of_test_items(seqs, item_counts).tolist() == [0, 1, 0]


def test_metrics_by_hand() -> None:
    out = metrics(np.array([0, 1, 30]), ks=(1, 5))
    assert out["hr@1"] == pytest.approx(1 / 3)
    assert out["hr@5"] == pytest.approx(2 / 3)
    assert out["ndcg@5"] == pytest.approx((1.0 + 1 / np.log2(3)) / 3)


@pytest.mark.slow
@pytest.mark.parametrize("dataset", sorted(PUBLISHED))
def test_published_poprec_needs_the_test_items_in_the_counts(dataset: str) -> None:
    """S3-Rec's PopRec rows are reproduced (to one user) only when popularity counts the test items too."""
    try:
        path = locate(dataset)
    except SystemExit as exc:
        pytest.skip(str(exc))
    results = evaluate(path)
    n_users = sum(1 for line in path.read_text().splitlines() if line)
    leaked, ours = results[SOURCES[-1]], results["train"]
    for metric, published in PUBLISHED[dataset].items():
        assert abs(leaked[metric] - published) <= 0.00005 + 1.0 / n_users
    assert max(abs(ours[m] - p) for m, p in PUBLISHED[dataset].items()) > 0.002
