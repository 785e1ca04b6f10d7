"""RQ-VAE with LETTER's collaborative regulariser: the InfoNCE by hand, the seam, and a planted case.

Planted case: items in two collaborative clusters whose text vectors are pure noise (text cannot
separate them). With the regulariser, items of one CF cluster share their first-level code more often
than items of different clusters; without it the two rates are about equal. Measured (n = 128, 2 x 4
codes, 100 epochs, seeds 0/1/2): share(same) - share(cross) = 0.007 / 0.013 / 0.046 without, 0.047 /
0.210 / 0.067 with ``collab_weight=1`` -- a real but modest pull at the first level.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from recframe.tokenizers import RQKMeansTokenizer, RQVAETokenizer
from recframe.tokenizers.rq_vae import info_nce

SMALL = dict(n_levels=2, codebook_size=4, latent_dim=8, hidden=(32,), batch_size=32, device="cpu")


def planted(n: int = 128, d: int = 16, dc: int = 8, seed: int = 0):
    """``(text [n + 1, d] noise, collaborative [n + 1, dc] two clusters +-u plus noise, cluster [n])``."""
    rng = np.random.default_rng(seed)
    cluster = rng.permutation(np.repeat([0, 1], n // 2))
    text = np.vstack([np.zeros(d), rng.standard_normal((n, d))]).astype(np.float32)
    u = rng.standard_normal(dc)
    u /= np.linalg.norm(u)
    cf = np.where(cluster[:, None] == 0, u, -u) + 0.3 * rng.standard_normal((n, dc))
    return text, np.vstack([np.zeros(dc), cf]).astype(np.float32), cluster


def share_gap(codes: np.ndarray, cluster: np.ndarray) -> float:
    """P(same first-level code | same cluster) - P(same first-level code | different clusters)."""
    c = codes[1:, 0]
    eq = c[:, None] == c[None, :]
    same = cluster[:, None] == cluster[None, :]
    off = ~np.eye(len(c), dtype=bool)
    return float(eq[same & off].mean() - eq[~same].mean())


def test_info_nce_by_hand():
    q = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    k = torch.tensor([[3.0, 0.0], [1.0, 1.0]])
    tau = 0.5
    # cosines: row 0 -> (1, 1/sqrt2), row 1 -> (0, 1/sqrt2)
    r = 1 / math.sqrt(2)
    want = 0.5 * (-(1 / tau) + math.log(math.exp(1 / tau) + math.exp(r / tau))
                  - (r / tau) + math.log(math.exp(0.0) + math.exp(r / tau)))
    assert float(info_nce(q, k, tau)) == pytest.approx(want, rel=1e-6)
    # perfectly aligned, well separated pairs at a small temperature: loss -> 0
    eye = torch.eye(4)
    assert float(info_nce(eye, 5 * eye, 0.01)) < 1e-10


def test_without_collaborative_nothing_changes():
    text, cf, _ = planted(n=64)
    plain = RQVAETokenizer(**SMALL, epochs=5, seed=0).fit(text)
    again = RQVAETokenizer(**SMALL, epochs=5, seed=0, collab_weight=0.7).fit(text, collaborative=None)
    assert np.array_equal(plain.codes, again.codes)
    assert plain.fingerprint == again.fingerprint and "collaborative" not in plain.settings
    assert "collab_weight" not in plain.settings


@pytest.fixture(scope="module")
def regularised():
    text, cf, cluster = planted(n=64)
    tok = RQVAETokenizer(**SMALL, epochs=30, seed=0, collab_weight=1.0)
    return text, cf, cluster, tok, tok.fit(text, collaborative=cf)


def test_regulariser_trains_and_is_fingerprinted(regularised):
    text, cf, _, tok, table = regularised
    h = tok.collab_history_
    assert len(h) == 30 and np.mean(h[-3:]) < np.mean(h[:3]) - 0.5  # the alignment is learned
    assert table.stats["collab_loss_last_epoch"] == pytest.approx(h[-1])
    assert table.settings["collab_weight"] == 1.0 and table.settings["collab_temperature"] == 0.1
    assert len(table.settings["collaborative"]) == 64
    short = {**SMALL, "epochs": 1, "seed": 0, "collab_weight": 1.0}
    fps = {RQVAETokenizer(**short).fit(text).fingerprint,
           RQVAETokenizer(**short).fit(text, collaborative=cf).fingerprint,
           RQVAETokenizer(**short).fit(text, collaborative=cf[:, ::-1]).fingerprint}
    assert len(fps) == 3  # with / without / another collaborative matrix
    # cold-start encoding needs the features only, and reproduces the fitted codes
    assert np.array_equal(tok.encode(text[1:]), table.codes[1:, :2])
    assert tok.collab_proj_.weight.shape == (cf.shape[1], SMALL["latent_dim"])


def test_regulariser_is_deterministic(regularised):
    text, cf, _, _, table = regularised
    again = RQVAETokenizer(**SMALL, epochs=30, seed=0, collab_weight=1.0).fit(text, collaborative=cf)
    assert np.array_equal(again.codes, table.codes)


def test_bad_collaborative_input():
    text, cf, _ = planted(n=64)
    with pytest.raises(ValueError, match="does not take a collaborative matrix.*hybrid_item_features"):
        RQKMeansTokenizer(n_levels=2, codebook_size=4).fit(text, collaborative=cf)
    with pytest.raises(ValueError, match="collaborative has 63 items but features 64"):
        RQVAETokenizer(**SMALL, epochs=1).fit(text, collaborative=cf[:-1])
    with pytest.raises(ValueError, match="collab_weight"):
        RQVAETokenizer(**SMALL, collab_weight=-1)
    with pytest.raises(ValueError, match="collab_temperature"):
        RQVAETokenizer(**SMALL, collab_temperature=0)


@pytest.mark.slow
def test_regulariser_pulls_first_level_codes_toward_cf_clusters():
    """Mean share gap over three seeds: with the regulariser clearly above without (module docstring)."""
    text, cf, cluster = planted()
    gaps = {}
    for w in (0.0, 1.0):
        gaps[w] = np.mean([
            share_gap(RQVAETokenizer(**SMALL, epochs=100, seed=s, collab_weight=w)
                      .fit(text, collaborative=cf if w else None).codes, cluster)
            for s in (0, 1, 2)])
    assert abs(gaps[0.0]) < 0.06
    assert gaps[1.0] > gaps[0.0] + 0.04
