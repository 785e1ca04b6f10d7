"""SIDTable: validation, state_dict / file round trips with weights_only loads, fingerprint checks."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from recframe.tokenizers import RQKMeansTokenizer, SIDTable, SIDTableMismatchError, sid_fingerprint


@pytest.fixture(scope="module")
def fitted(clusters):
    x, _ = clusters
    tok = RQKMeansTokenizer(n_levels=2, codebook_size=8, seed=0)
    return x, tok, tok.fit(x)


def _same(a: SIDTable, b: SIDTable) -> None:
    assert np.array_equal(a.codes, b.codes) and a.codes.dtype == b.codes.dtype == np.int64
    assert a.codebook_sizes == b.codebook_sizes and a.fingerprint == b.fingerprint
    assert a.settings == b.settings and a.stats == b.stats


def test_state_dict_round_trip_through_torch_weights_only(fitted):
    _, _, table = fitted
    buf = io.BytesIO()
    torch.save({"state_dict": {}, "sid_table": table.state_dict()}, buf)  # rides inside a checkpoint
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)
    restored = SIDTable.from_state_dict(loaded["sid_table"])
    assert restored.fingerprint == table.fingerprint
    _same(table, restored)


def test_save_and_load_file(fitted, tmp_path):
    _, _, table = fitted
    path = table.save(tmp_path / "sub" / "sid.pt")
    assert path.is_file() and not list(path.parent.glob(".*tmp"))
    _same(table, SIDTable.load(path))


def test_shape_properties(fitted):
    x, _, table = fitted
    assert table.n_items == len(x) - 1
    assert table.depth == table.codes.shape[1] == len(table.codebook_sizes)
    assert table.semantic_depth == 2
    with pytest.raises(ValueError):
        table.codes[1, 0] = 5  # read-only


def test_fingerprint_is_features_plus_settings(fitted):
    x, tok, table = fitted
    assert table.fingerprint == sid_fingerprint(x, tok.get_settings())
    assert table.settings == tok.get_settings()
    table.check(x, tok.get_settings())  # matches: no error
    table.check(x.astype(np.float64))  # dtype does not matter, the values do


def test_check_names_both_fingerprints_and_the_fix(fitted):
    x, tok, table = fitted
    other = x.copy()
    other[5, 0] += 1e-3
    with pytest.raises(SIDTableMismatchError) as err:
        table.check(other, tok.get_settings())
    msg = str(err.value)
    assert table.fingerprint in msg and sid_fingerprint(other, tok.get_settings()) in msg
    assert "item features differ" in msg and "Re-fit the tokenizer" in msg
    assert isinstance(err.value, ValueError)
    settings = {**tok.get_settings(), "seed": 1}
    with pytest.raises(SIDTableMismatchError, match="settings differ in seed"):
        table.check(x, settings)
    with pytest.raises(SIDTableMismatchError):
        table.check(x.reshape(-1, 8)[: len(x) * 2])  # same bytes, other shape


@pytest.mark.parametrize("codes, sizes, match", [
    ([[1, 0], [0, 1]], (2, 2), "row 0"),
    ([[0, 0], [0, 2]], (2, 2), "outside 0..1"),
    ([[0, 0], [1, 1], [1, 1]], (2, 2), "unique"),
    ([[0, 0], [1, 1]], (2,), "one positive size per level"),
    ([[0, 0]], (2, 2), "n_items >= 1"),
])
def test_invalid_tables_are_rejected(codes, sizes, match):
    with pytest.raises(ValueError, match=match):
        SIDTable(np.array(codes), sizes, "f" * 64, {}, {})


def test_from_state_dict_missing_key(fitted):
    _, _, table = fitted
    state = table.state_dict()
    del state["fingerprint"]
    with pytest.raises(ValueError, match="missing fingerprint"):
        SIDTable.from_state_dict(state)
