"""bnlearn networks from the pgmpy wheel: explicit prepare (verified, cached), load never downloads."""

from __future__ import annotations

import gzip
import hashlib

import pytest

from causal_ext.unico import networks, write_bif
from causal_ext.unico.examples import kidney_stones
from causal_ext.unico.networks import is_prepared_bnlearn, load_bnlearn, prepare_bnlearn
from recframe.data.interactions import DataError

TOY = gzip.compress(write_bif(kidney_stones()).encode(), mtime=0)


def _fetch(calls):
    def fetch(source, name, log):
        calls.append(sorted(source["members"].values()))
        return {f: TOY for f in source["members"]}

    return fetch


def test_prepare_verifies_caches_and_loads(tmp_path, monkeypatch):
    monkeypatch.setitem(networks.BNLEARN_NETWORKS, "toy", hashlib.sha256(TOY).hexdigest())
    with pytest.raises(DataError, match="not prepared"):
        load_bnlearn("toy", tmp_path)  # loading never downloads
    calls: list = []
    folder = prepare_bnlearn(["toy"], tmp_path, fetch=_fetch(calls), verbose=False)
    assert folder == tmp_path / "bnlearn" and calls == [["pgmpy/utils/example_models/toy.bif.gz"]]
    assert is_prepared_bnlearn("toy", tmp_path)
    prepare_bnlearn(["toy"], tmp_path, fetch=_fetch(calls), verbose=False)
    assert len(calls) == 1  # cached: no second fetch
    bn = load_bnlearn("toy", tmp_path)
    assert bn.name == "toy" and bn.variables == ["size", "treatment", "recovery"]
    (folder / "toy.bif.gz").write_bytes(gzip.compress(b"network x { }"))
    with pytest.raises(DataError, match="sha256"):
        load_bnlearn("toy", tmp_path)


def test_checksum_mismatch_writes_nothing_and_unknown_names(tmp_path, monkeypatch):
    monkeypatch.setitem(networks.BNLEARN_NETWORKS, "toy", "0" * 64)
    with pytest.raises(DataError, match="sha256 mismatch"):
        prepare_bnlearn(["toy"], tmp_path, fetch=_fetch([]), verbose=False)
    assert not (tmp_path / "bnlearn" / "toy.bif.gz").exists()
    with pytest.raises(DataError, match="pinned: asia"):
        load_bnlearn("nope", tmp_path)


def test_any_bif_path_loads(tmp_path):
    plain = tmp_path / "mine.bif"
    plain.write_bytes(gzip.decompress(TOY) if TOY[:2] == b"\x1f\x8b" else TOY)
    packed = tmp_path / "other.bif.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    for path, name in ((plain, "mine"), (packed, "other"), (str(packed), "other")):
        bn = load_bnlearn(path)
        assert bn.name == name and bn.variables == ["size", "treatment", "recovery"]
    with pytest.raises(DataError, match="not found"):
        load_bnlearn(tmp_path / "missing.bif")


def test_any_network_the_installed_pgmpy_ships():
    """hailfinder is not pinned but parses from the installed pgmpy (a declared dev dependency)."""
    shipped = networks.installed_pgmpy_networks()
    assert {"hailfinder", "hepar2", "win95pts", "alarm"} <= set(shipped)
    bn = load_bnlearn("hailfinder")
    assert bn.name == "hailfinder" and len(bn.variables) == 56 and len(bn.edges) == 66


@pytest.mark.slow
def test_real_bnlearn_networks_from_the_pgmpy_wheel():
    """Fetches pgmpy==1.1.2 (pip download, not installed) on first use; checks the network sizes."""
    prepare_bnlearn(verbose=False)
    sizes = {
        n: (len(bn.variables), len(bn.edges)) for n in networks.BNLEARN_NETWORKS for bn in [load_bnlearn(n)]
    }
    assert sizes["asia"] == (8, 8) and sizes["sachs"] == (11, 17) and sizes["child"] == (20, 25)
    assert sizes["alarm"] == (37, 46) and sizes["insurance"] == (27, 52)
