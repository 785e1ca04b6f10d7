"""Item content features: matrix validation, the non-text fallback (one warning), the text cache.

The default suite never loads the text model: the cache tests replace ``encode_texts`` with a
counting fake. The real MiniLM encoding of ML-100K is in ``test_minilm_slow.py``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import torch

from recframe.data.interactions import ItemFeatures
from recframe.features import as_feature_matrix, item_content_features, metadata_features
from recframe.features import item_content as ic
from recframe.features import text_encoder as te


def items(titles=("Star Trek", "Star Trek II", "Heat"), genres=(["Sci-Fi"], ["Sci-Fi", "Action"], ["Crime"]),
          years=(1979, 1982, 0)) -> ItemFeatures:
    return ItemFeatures(title=np.array(["", *titles], dtype=object), categories=[[], *map(list, genres)],
                        year=np.array([0, *years], dtype=np.int64))


# ---------------------------------------------------------------- matrices
def test_as_feature_matrix_accepts_any_matrix():
    x = np.vstack([np.zeros(3), np.ones((2, 3))])
    out = as_feature_matrix(x)
    assert out.dtype == np.float32 and out.flags.c_contiguous and out.shape == (3, 3)
    assert np.array_equal(as_feature_matrix(torch.from_numpy(x)), out)
    assert np.array_equal(as_feature_matrix(np.ones((2, 3)), has_padding_row=False), out)
    assert np.array_equal(item_content_features(x), out)  # same API for a plain matrix


@pytest.mark.parametrize("bad, match", [
    (np.ones((3, 2)), "has_padding_row=False"),
    (np.zeros(4), "2-D"),
    (np.zeros((1, 4)), "at least one real item"),
    (np.array([[0.0, 0.0], [np.nan, 1.0]]), "NaN"),
    (np.array([["a"], ["b"]]), "numeric"),
])
def test_as_feature_matrix_rejects_bad_input(bad, match):
    with pytest.raises(ValueError, match=match):
        as_feature_matrix(bad)


def test_bad_encoder_and_missing_features():
    with pytest.raises(ValueError, match="unknown encoder 'bert'"):
        item_content_features(items(), encoder="bert")
    with pytest.raises(ValueError, match="no item features"):
        item_content_features(None)
    with pytest.raises(ValueError, match="no vectors"):
        item_content_features(items(), encoder="vectors")
    vec = np.vstack([np.zeros(2), np.eye(2)[[0, 1, 0]]])
    with_vectors = ItemFeatures(title=items().title, vectors=vec)
    assert np.array_equal(item_content_features(with_vectors, encoder="vectors"), vec.astype(np.float32))


# ---------------------------------------------------------- non-text features
def test_metadata_features_blocks():
    x = metadata_features(items(), title_dim=16)
    assert x.shape == (4, 16 + 3 + 2) and x.dtype == np.float32 and not x[0].any()
    title, genre, year = x[:, :16], x[:, 16:19], x[:, 19:]
    assert np.allclose(np.linalg.norm(title[1:], axis=1), 1.0)
    assert title[1] @ title[2] > 0.5  # share the words "star" and "trek"
    # genres sorted: Action, Crime, Sci-Fi; multi-hot / sqrt(count)
    assert np.allclose(genre[1:], [[0, 0, 1], [2 ** -0.5, 0, 2 ** -0.5], [0, 1, 0]])
    assert np.allclose(year[1:], [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # unknown year is flagged


def test_hashed_titles_ignore_case_and_order():
    x = metadata_features(items(titles=("Star Trek", "trek STAR", "Heat")), title_dim=32)
    assert np.array_equal(x[1, :32], x[2, :32])


def test_fallback_without_text_extra_warns_once(monkeypatch, caplog):
    monkeypatch.setattr(te, "_importable", lambda module: False)
    monkeypatch.setattr(ic, "_warned_no_text", False)
    with caplog.at_level(logging.WARNING, logger="recframe.features"):
        a = item_content_features(items())
        b = item_content_features(items())
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "pip install recframe[text]" in warnings[0].getMessage()
    assert np.array_equal(a, metadata_features(items())) and np.array_equal(a, b)


# ------------------------------------------------------------------- cache
@pytest.fixture
def fake_encoder(monkeypatch):
    calls = []

    def encode(texts, model_dir, **kwargs):
        calls.append(list(texts))
        return np.array([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32)

    monkeypatch.setattr(te, "encode_texts", encode)
    # the cache logic must not depend on the optional `text` extra being installed
    monkeypatch.setattr(te, "resolve_encoder", lambda encoder: (Path("fake-model"), f"fake:{encoder}"))
    return calls


def test_second_call_reads_the_cache(fake_encoder, tmp_path):
    first = item_content_features(items(), cache_dir=tmp_path)
    assert len(fake_encoder) == 1 and fake_encoder[0] == items().texts()[1:]  # padding row not encoded
    files = list(tmp_path.glob("*.npy"))
    assert len(files) == 1 and len(files[0].stem) == 64
    second = item_content_features(items(), cache_dir=tmp_path)
    assert len(fake_encoder) == 1  # read from the cache, not encoded again
    assert np.array_equal(first, second) and not first[0].any() and first.shape == (4, 3)


def test_different_text_or_model_gives_a_different_key(fake_encoder, tmp_path):
    item_content_features(items(), cache_dir=tmp_path)
    item_content_features(items(titles=("Star Trek", "Star Trek II", "Heat 2")), cache_dir=tmp_path)
    assert len(fake_encoder) == 2 and len(list(tmp_path.glob("*.npy"))) == 2
    texts = items().texts()
    assert te.cache_key("model-a", texts) != te.cache_key("model-b", texts)
    assert te.cache_key("model-a", texts) != te.cache_key("model-a", texts[:-1] + [texts[-1] + " "])


def test_cache_off_and_unreadable_cache(fake_encoder, tmp_path, caplog):
    item_content_features(items(), cache_dir=tmp_path, cache=False)
    assert not list(tmp_path.glob("*.npy"))
    item_content_features(items(), cache_dir=tmp_path)
    path = next(tmp_path.glob("*.npy"))
    path.write_bytes(b"not a numpy file")
    with caplog.at_level(logging.WARNING, logger="recframe.features"):
        again = item_content_features(items(), cache_dir=tmp_path)
    assert len(fake_encoder) == 3 and "unreadable" in caplog.text
    assert np.load(path).shape == again.shape  # rewritten


def test_default_cache_dir_follows_the_data_root(monkeypatch, tmp_path):
    monkeypatch.setenv("RECFRAME_DATA", str(tmp_path))
    assert te.default_cache_dir() == tmp_path / ".cache" / "item_text"
