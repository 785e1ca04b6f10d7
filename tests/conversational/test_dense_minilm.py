"""The dense baseline with the real offline MiniLM encoder (slow: loads the model)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from recframe.conversational.baselines import DenseSystem
from recframe.conversational.view import Catalog, ContextTurn, dialogue_view
from recframe.features.text_encoder import TextEncoderUnavailable, resolve_encoder
from tests.conversational.fixtures import tiny_release

pytestmark = pytest.mark.slow


def test_minilm_dense_matches_paraphrased_needs(tmp_path: Path) -> None:
    try:
        resolve_encoder("all-MiniLM-L6-v2")
    except TextEncoderUnavailable:
        pytest.skip("the text extra is not installed")
    release = tiny_release()
    system = DenseSystem(cache_dir=str(tmp_path), n_citations=1).fit(Catalog.from_release(release))
    view = dialogue_view(release.dialogues[0], 1)
    pred = system.predict(
        dataclasses.replace(view, history=(ContextTurn("user", "inform", "a lively italian spot"),))
    )
    assert pred.ranking[0] == "C" and release.reviews[pred.citations[0].review_id].poi_id == "C"
    pred = system.predict(
        dataclasses.replace(view, history=(ContextTurn("user", "inform", "inexpensive noodles"),))
    )
    assert pred.ranking[-1] == "B"  # the pricey place is least similar to an inexpensive request
    assert any(p.name.endswith(".npy") for p in tmp_path.iterdir())  # embeddings cached on disk
