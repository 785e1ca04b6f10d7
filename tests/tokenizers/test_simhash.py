"""SimHash: hand-computed bits, identical vectors, angular locality, seeding, centring."""

from __future__ import annotations

import numpy as np
import pytest

from recframe.tokenizers import SimHashTokenizer
from recframe.tokenizers.simhash import bits_to_codes, simhash_bits, simhash_codes


def test_known_answer_with_a_fixed_projection():
    x = np.array([[1.0, 2.0], [-1.0, 0.5], [0.0, -3.0]])
    projection = np.array([[1.0, 0.0, 1.0, -1.0], [0.0, 1.0, 1.0, 1.0]])
    # x @ P = [1, 2, 3, 1], [-1, .5, -.5, 1.5], [0, -3, -3, -3]; bit = (value >= 0)
    assert simhash_bits(x, projection).tolist() == [[1, 1, 1, 1], [0, 1, 0, 1], [1, 0, 0, 0]]
    # two levels of two bits, most significant first: 11|11, 01|01, 10|00
    assert simhash_codes(x, projection, 2).tolist() == [[3, 3], [1, 1], [2, 0]]
    assert bits_to_codes(np.array([[1, 0, 1, 1, 0, 0]], dtype=np.uint8), 3).tolist() == [[5, 4]]


def test_tokenizer_uses_the_seeded_gaussian_projection(clusters):
    x, _ = clusters
    tok = SimHashTokenizer(n_levels=3, bits_per_level=4, center=False, seed=3)
    table = tok.fit(x)
    projection = np.random.default_rng(3).standard_normal((16, 12))
    assert np.allclose(tok.projection_, projection)
    expected = simhash_codes(x[1:], projection, 4)
    assert np.array_equal(tok.encode(x[1:]), expected)
    assert np.array_equal(table.codes[1:, :3], expected)
    assert table.codebook_sizes[:3] == (16, 16, 16)


def test_identical_vectors_get_identical_codes_then_a_counter():
    rng = np.random.default_rng(0)
    x = np.vstack([np.zeros((1, 8)), rng.standard_normal((5, 8))]).astype(np.float32)
    x[4] = x[2]
    table = SimHashTokenizer(n_levels=2, bits_per_level=8, seed=0).fit(x)
    assert np.array_equal(table.codes[2, :2], table.codes[4, :2])
    assert table.stats["disambiguated"] and table.codebook_sizes[2] == 2
    assert (table.codes[2, 2], table.codes[4, 2]) == (0, 1)


def test_nearer_vectors_share_more_bits():
    """Bits agree with probability 1 - angle / pi: checked on 4096 bits (sd of the rate < 0.008)."""
    rng = np.random.default_rng(1)
    d = 16
    base = rng.standard_normal(d)
    base /= np.linalg.norm(base)
    ortho = rng.standard_normal(d)
    ortho -= ortho @ base * base
    ortho /= np.linalg.norm(ortho)
    angles = [0.2, 0.8, 1.6]
    vecs = [base] + [np.cos(a) * base + np.sin(a) * ortho for a in angles]
    x = np.vstack([np.zeros(d), *vecs]).astype(np.float32)
    tok = SimHashTokenizer(n_levels=512, bits_per_level=8, center=False, seed=0)
    tok.fit(x)
    bits = simhash_bits(x[1:], tok.projection_)
    agree = [(bits[0] == bits[i + 1]).mean() for i in range(len(angles))]
    assert agree[0] > agree[1] > agree[2]
    for a, rate in zip(angles, agree):
        assert rate == pytest.approx(1 - a / np.pi, abs=0.04)


def test_centering_balances_bits():
    rng = np.random.default_rng(0)
    x = 5.0 + rng.standard_normal((400, 8))  # all items far from the origin, in one direction
    feats = np.vstack([np.zeros((1, 8)), x])
    raw = SimHashTokenizer(n_levels=4, bits_per_level=4, center=False, seed=0).fit(feats)
    centred = SimHashTokenizer(n_levels=4, bits_per_level=4, center=True, seed=0).fit(feats)
    off = lambda t: np.abs(np.asarray(t.stats["bit_balance"]) - 0.5).mean()  # noqa: E731
    assert off(centred) < 0.1 < off(raw)
    assert centred.stats["collision_rate"] < raw.stats["collision_rate"]


def test_seed_determinism(clusters):
    x, _ = clusters
    a = SimHashTokenizer(seed=5).fit(x)
    b = SimHashTokenizer(seed=5).fit(x)
    c = SimHashTokenizer(seed=6).fit(x)
    assert np.array_equal(a.codes, b.codes)
    assert not np.array_equal(a.codes, c.codes)


def test_bits_per_level_limit():
    with pytest.raises(ValueError, match="bits_per_level"):
        SimHashTokenizer(bits_per_level=31)
