"""BM25 against a hand computation; paired t-test, bootstrap and Spearman against their formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recframe.conversational.bm25 import BM25, tokenize
from recframe.conversational.stats import paired_bootstrap, paired_ttest, spearman


def test_bm25_matches_hand_computation() -> None:
    docs = [["quiet", "cheap", "cheap"], ["loud"], ["quiet", "loud", "bar", "music"]]
    k1, b = 1.2, 0.75
    bm = BM25(k1, b).fit(docs)
    avgdl = (3 + 1 + 4) / 3

    def term(tf: float, n_t: int, dl: int) -> float:
        idf = math.log(1 + (3 - n_t + 0.5) / (n_t + 0.5))
        return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

    expected = [term(1, 2, 3) + term(2, 1, 3), 0.0, term(1, 2, 4)]
    assert bm.scores(["quiet", "cheap", "zebra"]) == pytest.approx(expected)
    # repeated query terms count twice
    assert bm.scores(["cheap", "cheap"])[0] == pytest.approx(2 * term(2, 1, 3))


def test_bm25_refuses_bad_settings_and_tokenizer() -> None:
    with pytest.raises(ValueError, match="k1"):
        BM25(k1=-1)
    with pytest.raises(ValueError, match="no documents"):
        BM25().fit([])
    assert tokenize("A kid-friendly, QUIET café!") == ["kid-friendly", "quiet", "café"]


def test_paired_ttest_formula() -> None:
    a = np.array([0.9, 0.8, 0.7, 1.0, 0.6])
    b = np.array([0.5, 0.7, 0.6, 0.4, 0.6])
    d = a - b
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    out = paired_ttest(a, b)
    assert out["t"] == pytest.approx(t) and out["n"] == 5 and out["mean_diff"] == pytest.approx(d.mean())
    from scipy import stats

    assert out["p"] == pytest.approx(2 * stats.t.sf(abs(t), df=4))


def test_paired_ttest_edge_cases() -> None:
    same = paired_ttest(np.ones(4), np.ones(4))
    assert same["t"] == 0.0 and same["p"] == 1.0
    shifted = paired_ttest(np.ones(4), np.zeros(4))
    assert shifted["p"] == 0.0 and shifted["mean_diff"] == 1.0
    nan = paired_ttest(np.array([1.0, np.nan, 0.5, 0.2]), np.array([0.0, 1.0, np.nan, 0.1]))
    assert nan["n"] == 2
    assert math.isnan(paired_ttest(np.array([1.0]), np.array([0.0]))["p"])
    with pytest.raises(ValueError, match="equal shapes"):
        paired_ttest(np.ones(3), np.ones(4))


def test_bootstrap_interval_covers_the_mean_difference() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(0.3, 1.0, 400)
    b = a - 0.3 + rng.normal(0, 0.1, 400)
    low, high = paired_bootstrap(a, b, samples=2000)
    assert low < 0.3 < high and high - low < 0.05


def test_spearman_by_hand() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    y = np.array([2.0, 1.0, 4.0, 3.0, 5.0])
    d2 = np.sum((x - y) ** 2)  # ranks equal values here
    assert spearman(x, y)["rho"] == pytest.approx(1 - 6 * d2 / (5 * (25 - 1)))
    assert math.isnan(spearman(x, np.ones(5))["rho"])
