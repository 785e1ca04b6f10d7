"""Disambiguation and the statistics formulas, checked by hand on a tiny table."""

from __future__ import annotations

import numpy as np
import pytest

from recframe.tokenizers import (
    build_sid_table,
    codebook_usage,
    collision_counter,
    collision_rate,
    disambiguate,
    perplexity,
)

# groups: (0,1) -> items 0, 1, 3; (2,0) -> items 2, 4; (1,1) -> item 5
CODES = np.array([[0, 1], [0, 1], [2, 0], [0, 1], [2, 0], [1, 1]])


def test_counter_within_colliding_groups_in_item_order():
    assert collision_counter(CODES).tolist() == [0, 1, 0, 2, 1, 0]


def test_disambiguation_makes_paths_unique_with_max_group_size():
    out, size = disambiguate(CODES)
    assert size == 3  # the largest group has three items
    assert out.shape == (6, 3) and np.array_equal(out[:, :2], CODES)
    assert len(np.unique(out, axis=0)) == 6
    assert out[:, 2].max() == size - 1


def test_no_extra_level_without_collisions():
    codes = np.array([[0, 1], [1, 0], [1, 1]])
    out, size = disambiguate(codes)
    assert size == 0 and np.array_equal(out, codes)


def test_stats_by_hand():
    assert codebook_usage(CODES, (4, 2)) == [0.75, 1.0]  # codes {0, 1, 2} of 4; {0, 1} of 2
    p0 = np.array([3, 2, 1]) / 6
    p1 = np.array([4, 2]) / 6
    expected = [np.exp(-(p0 * np.log(p0)).sum()), np.exp(-(p1 * np.log(p1)).sum())]
    assert perplexity(CODES) == pytest.approx(expected)
    assert collision_rate(CODES) == pytest.approx(5 / 6)  # all but item 5 share their path
    assert perplexity(np.zeros((5, 1), dtype=int)) == [1.0]
    assert perplexity(np.arange(4)[:, None]) == pytest.approx([4.0])


def test_build_sid_table_pads_and_records_stats():
    x = np.vstack([np.zeros((1, 3)), np.arange(18).reshape(6, 3)]).astype(np.float32)
    table = build_sid_table(CODES, (4, 2), x, {"tokenizer": "hand"})
    assert table.codes.shape == (7, 3) and not table.codes[0].any()
    assert table.codebook_sizes == (4, 2, 3)
    assert table.depth == 3 and table.semantic_depth == 2 and table.n_items == 6
    s = table.stats
    assert s["collision_rate"] == pytest.approx(5 / 6)
    assert (s["n_unique_paths"], s["n_colliding_items"], s["max_collision_group"]) == (3, 5, 3)
    assert s["disambiguated"] is True and s["disambiguation_size"] == 3
