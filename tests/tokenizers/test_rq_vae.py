"""RQ-VAE: trains (loss falls), codebooks used after k-means init and after training, determinism.

A scaled-down network (16 -> 32 -> 8 latent, 3 x 8 codes, 40 epochs of 300 items) keeps this fast.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import adjusted_rand_score

from recframe.tokenizers import RQVAETokenizer

SMALL = dict(n_levels=3, codebook_size=8, latent_dim=8, hidden=(32,), epochs=40, batch_size=64, device="cpu")


@pytest.fixture(scope="module")
def trained(clusters):
    x, labels = clusters
    tok = RQVAETokenizer(**SMALL, seed=0)
    return x, labels, tok, tok.fit(x)


def test_loss_decreases(trained):
    _, _, tok, table = trained
    h = tok.loss_history_
    assert len(h) == 40
    assert np.mean(h[-5:]) < 0.5 * np.mean(h[:2])
    assert table.stats["loss_last_epoch"] == pytest.approx(h[-1])


def test_codebooks_are_used(trained):
    x, labels, tok, table = trained
    assert min(tok.init_usage_) >= 0.75  # no dead codebook right after the k-means init
    assert min(table.stats["codebook_usage"]) >= 0.5
    assert min(table.stats["perplexity"]) > 3.0
    # the first level still separates the planted clusters reasonably
    assert adjusted_rand_score(labels, table.codes[1:, 0]) > 0.6
    assert np.array_equal(tok.encode(x[1:]), table.codes[1:, :3])


def test_same_seed_same_codes_other_seed_other_codes(trained):
    x, _, _, table = trained
    again = RQVAETokenizer(**SMALL, seed=0).fit(x)
    other = RQVAETokenizer(**SMALL, seed=1).fit(x)
    assert np.array_equal(table.codes, again.codes)
    assert not np.array_equal(table.codes, other.codes)


def test_global_rng_untouched(clusters):
    x, _ = clusters
    torch.manual_seed(123)
    RQVAETokenizer(**{**SMALL, "epochs": 1}, seed=0).fit(x)
    after = torch.rand(3)
    torch.manual_seed(123)
    assert torch.equal(after, torch.rand(3))


def test_zero_epochs_is_the_kmeans_init(clusters):
    x, _ = clusters
    tok = RQVAETokenizer(**{**SMALL, "epochs": 0}, seed=0)
    table = tok.fit(x)
    assert tok.loss_history_ == [] and table.stats["codebook_usage"] == tok.init_usage_


def test_batch_must_hold_a_codebook():
    with pytest.raises(ValueError, match="batch_size"):
        RQVAETokenizer(codebook_size=256, batch_size=128)
