"""CIM on the offline MiniLM: the adapter's output embedding is sentence-transformers' own sentence embedding,
a focused view only drops tokens from the attention, and the genre task is built as documented."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from calib_ext.cim import CIMDetector
from calib_ext.cim.text import TextMultipleChoiceAdapter, genre_questions
from recframe.features.text_encoder import encode_texts, resolve_encoder

TITLES = ["Star Trek: First Contact", "Toy Story", "The Godfather", "Sleepless in Seattle"]
OPTIONS = ["Sci-Fi movie", "Animation movie", "Crime movie", "Romance movie"]


@pytest.fixture(scope="module")
def adapter() -> TextMultipleChoiceAdapter:
    return TextMultipleChoiceAdapter(OPTIONS, miss_k=2)


def test_embedding_is_the_sentence_transformers_embedding(adapter: TextMultipleChoiceAdapter) -> None:
    batch = adapter.tokenize(TITLES, [[0], [1], [2], [3]])
    with torch.inference_mode():
        ours = torch.nn.functional.normalize(adapter.embed(batch), dim=1).numpy()
        all_kept = adapter.embed(batch, batch["maskable"].clone())
    ref = encode_texts(TITLES, resolve_encoder("all-MiniLM-L6-v2")[0], device="cpu")
    np.testing.assert_allclose(ours, ref, atol=2e-5)
    torch.testing.assert_close(torch.nn.functional.normalize(all_kept, dim=1), torch.from_numpy(ours))
    lp = adapter.log_probs(batch, adapter.embed(batch))
    assert lp.argmax(1).tolist() == [0, 1, 2, 3]             # the easy questions are answered right


def test_focused_view_only_drops_tokens(adapter: TextMultipleChoiceAdapter) -> None:
    batch = adapter.tokenize(TITLES, [[0], [1], [2], [3]])
    seen: list[torch.Tensor] = []
    forward = adapter.model.forward

    def spy(*args, **kw):
        seen.append(kw["attention_mask"].clone())
        return forward(*args, **kw)

    adapter.model.forward = spy
    try:
        det = CIMDetector(keep_fractions=(0.5,), n_clusters=4, progress=False).fit(adapter, skip_first=False)
        res = det.score(adapter, [batch])
    finally:
        del adapter.model.forward
    original = batch["attention_mask"].bool()
    special = original & ~batch["maskable"]
    rows = torch.cat(seen).bool()
    assert len(rows) > 3 * len(TITLES)                        # the masked variants ran
    for row in rows:   # each row: a subset of some question's tokens that keeps its [CLS]/[SEP]
        pairs = zip(original, special, strict=True)
        assert any(bool((row <= o).all() and (s <= row).all()) for o, s in pairs)
    assert set(res.errors) == {"wrong_top1", "miss@2"} and res.n == 4


def test_genre_questions() -> None:
    q, opts, corr = genre_questions(["A", "B", "C"], [("Comedy", "Drama"), ("unknown",), ("Drama",)])
    assert q == ["A", "C"] and opts == ["Comedy movie", "Drama movie"] and corr == [[0, 1], [1]]
    with pytest.raises(ValueError, match="no item has a genre"):
        genre_questions(["A"], [("unknown",)])
