"""The Amazon decoding benchmark's user sample, trie size and table (the timing itself is not tested)."""

from __future__ import annotations

import argparse
from types import SimpleNamespace

import numpy as np
import pytest

from benchmarks.amazon_decoding import main, render, sample_test_users, trie_nodes


class _Histories:
    def __init__(self, rows: list[list[int]]) -> None:
        self.rows = [[], *rows]  # user 0 is the padding user

    def lengths(self) -> np.ndarray:
        return np.array([len(r) for r in self.rows])

    def of(self, user: int) -> np.ndarray:
        return np.array(self.rows[user])


def test_sample_takes_test_users_and_everything_before_their_last_item() -> None:
    inter = SimpleNamespace(histories=_Histories([[1, 2], [3, 4, 5], [6, 7, 8, 9, 10]]))
    users, hist = sample_test_users(inter, None, history=3, seed=0)
    assert users.tolist() == [2, 3]  # user 1 has 2 interactions: no test item
    assert hist.tolist() == [[0, 3, 4], [7, 8, 9]]  # left-padded, the last 3 before the test item
    again, _ = sample_test_users(inter, 1, history=3, seed=0)
    assert len(again) == 1 and again.tolist() == sample_test_users(inter, 1, history=3, seed=0)[0].tolist()


def test_trie_nodes_counts_distinct_prefixes_without_the_padding_row() -> None:
    codes = np.array([[0, 0, 0], [1, 2, 0], [1, 2, 1], [1, 3, 0], [2, 0, 0]])
    assert trie_nodes(codes) == 2 + 3 + 4  # {1, 2}; {12, 13, 20}; every item's full path


def test_render_has_one_row_per_ranking_and_dataset_with_the_ratio() -> None:
    beam = "TIGER, beam search (beam 20, top 10)"
    flash = "FLASH (2 layers), every item in one gather + top 10"
    rows = {beam: {"users_per_s": 10.0, "users_per_s_wall": 5.0},
            flash: {"users_per_s": 40.0, "users_per_s_wall": 20.0}}
    res = {"n_items": 12101, "rows": rows, "ratio_vs_beam": {beam: 1.0, flash: 4.0},
           "tiger": {"codebook_sizes": [64, 64, 64, 9], "trie_nodes": 100},
           "flash": {"codebook_sizes": [256] * 4}}
    ns = argparse.Namespace(users=8, seed=0, exact_users=2, history=50, batch=4, threads=1, repeats=1)
    text = render({"beauty": res}, ns, "cpu")
    assert f"| Beauty (12,101) | {flash} | 40.0 | 20.0 | x4.00 |" in text
    assert "1 thread(s) on cpu" in text


def test_a_bad_setting_is_refused_in_one_line(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--beam", "0", "--no-write"])
    assert "--beam must be a whole number >= 1; got 0." in capsys.readouterr().err
