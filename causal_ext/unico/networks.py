"""bnlearn Bayesian networks read out of the pgmpy wheel (explicit prepare step, cached, checksummed).

The pgmpy wheel ships the bnlearn repository's networks as gzipped BIF files under
``pgmpy/utils/example_models/``. :func:`prepare_bnlearn` fetches the pinned wheel with ``pip download
--no-deps`` (:func:`recframe.data.catalog.fetch_pip_wheel`: pgmpy is neither installed nor imported),
checks each file's sha256 and writes it atomically to ``ROOT/bnlearn/NAME.bif.gz``;
:func:`load_bnlearn` parses a prepared file with :func:`causal_ext.unico.bif.read_bif` and never
downloads (invariant 5 of docs/architecture.md). ``ROOT`` is :func:`recframe.data.catalog.default_root`
(``$RECFRAME_DATA``, else ``./datasets``).
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from causal_ext.unico.bif import read_bif
from causal_ext.unico.network import DiscreteBN
from recframe.data.interactions import DataError

if TYPE_CHECKING:  # heavy imports (pandas, torch) only where they are used
    from causal_ext.datasets import Fetch

__all__ = [
    "BNLEARN_NETWORKS",
    "BNLEARN_REQUIREMENT",
    "installed_pgmpy_networks",
    "is_prepared_bnlearn",
    "load_bnlearn",
    "prepare_bnlearn",
]

BNLEARN_REQUIREMENT = "pgmpy==1.1.2"
"""The pinned wheel the BIF files are read from."""

_MEMBER = "pgmpy/utils/example_models/{}.bif.gz"

BNLEARN_NETWORKS: dict[str, str] = {
    "asia": "7d5e7b8549834824c1b05f367eb7860fa3fca3adaf3649f0c7be6035af197197",
    "cancer": "dcfafbaadabcd1b8c9ec531e16721a19fc06829e980a3967d6345496ea081818",
    "earthquake": "77a41f1d509cea15eb7caf9dba932907837149e7145a2cc9d6c95c80849e62b0",
    "survey": "676e1fe97efec18b31d1a0a3bcd9b7d52985129c60a78b69172c99e82902ef96",
    "sachs": "ed1830fbde101ed50cce3c7a3c8cbf1d2f5225531cf35ff09fb3cec0af101bce",
    "child": "2bc3236dcbdbf9c9f1bbdeb060aa93c0bdee389d23a549b7248b9d89ed8a980c",
    "alarm": "f5860caa7137b5817e0c4f169cce0f1451ce6c246b96f5ce4fb4a8167993be29",
    "insurance": "92bcecd1b85387726af564bf1b50cd400ddbbea1b017303cc54d4654e50a8971",
}
"""Network name -> sha256 of its ``.bif.gz`` member in the pgmpy 1.1.2 wheel.

asia (Lauritzen & Spiegelhalter 1988, 8 nodes), cancer (Korb & Nicholson 2010, 5), earthquake
(Pearl 1988, 5), survey (Scutari & Denis 2014, 6), sachs (Sachs et al. 2005, 11, discretised
to LOW/AVG/HIGH), child (Spiegelhalter & Cowell 1992, 20), alarm (Beinlich et al. 1989, 37),
insurance (Binder et al. 1997, 27)."""


def _folder(root: str | Path | None) -> Path:
    from recframe.data.catalog import default_root

    return (Path(root) if root is not None else default_root()) / "bnlearn"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_names(names: list[str]) -> None:
    unknown = [n for n in names if n not in BNLEARN_NETWORKS]
    if unknown:
        raise DataError(f"unknown bnlearn network(s) {unknown}; known: {', '.join(BNLEARN_NETWORKS)}.")


def is_prepared_bnlearn(name: str, root: str | Path | None = None) -> bool:
    """True if ``ROOT/bnlearn/NAME.bif.gz`` exists with its sha256."""
    _check_names([name])
    path = _folder(root) / f"{name}.bif.gz"
    return path.is_file() and _sha256(path) == BNLEARN_NETWORKS[name]


def prepare_bnlearn(
    names: list[str] | None = None,
    root: str | Path | None = None,
    *,
    force: bool = False,
    verbose: bool = True,
    fetch: Fetch | None = None,
) -> Path:
    """Fetch, verify and cache bnlearn networks (default: all known) under ``ROOT/bnlearn/``.

    Idempotent: files already present with the right sha256 are kept (unless ``force``); one wheel
    download serves every missing network. ``fetch`` is the wheel reader (default
    :func:`recframe.data.catalog.fetch_pip_wheel`; tests pass a fake).

    Raises:
        DataError: an unknown name, the fetch failed, or a checksum mismatch (nothing is written then).
    """
    names = list(BNLEARN_NETWORKS) if names is None else list(names)
    _check_names(names)
    log = print if verbose else (lambda _msg: None)
    folder = _folder(root)
    todo = [n for n in names if force or not is_prepared_bnlearn(n, root)]
    if not todo:
        log(f"bnlearn {names}: already prepared under {folder} (checksums verified)")
        return folder
    source = {
        "requirement": BNLEARN_REQUIREMENT,
        "timeout_s": 300,
        "members": {f"{n}.bif.gz": _MEMBER.format(n) for n in todo},
    }
    if fetch is None:
        from recframe.data.catalog import fetch_pip_wheel as fetch
    files = fetch(source, "bnlearn", log)
    for n in todo:
        blob = files.get(f"{n}.bif.gz")
        if blob is None:
            raise DataError(f"{BNLEARN_REQUIREMENT} did not provide {_MEMBER.format(n)}.")
        got = hashlib.sha256(blob).hexdigest()
        if got != BNLEARN_NETWORKS[n]:
            raise DataError(
                f"{_MEMBER.format(n)} from {BNLEARN_REQUIREMENT}: sha256 mismatch (expected "
                f"{BNLEARN_NETWORKS[n]}, got {got}); not written."
            )
    from recframe.checkpoint_io import atomic_write

    for n in todo:
        atomic_write(folder / f"{n}.bif.gz", lambda fh, b=files[f"{n}.bif.gz"]: fh.write(b))
    log(f"bnlearn {todo}: prepared under {folder} from {BNLEARN_REQUIREMENT}")
    return folder


def installed_pgmpy_networks() -> dict[str, Path]:
    """``name -> path`` of every ``.bif.gz`` network the installed pgmpy ships (empty without pgmpy).

    Found through the package's location only: pgmpy is not imported.
    """
    spec = importlib.util.find_spec("pgmpy")
    if spec is None or not spec.submodule_search_locations:
        return {}
    out: dict[str, Path] = {}
    for base in spec.submodule_search_locations:
        folder = Path(base) / "utils" / "example_models"
        for path in sorted(folder.glob("*.bif.gz")):
            out.setdefault(path.name[: -len(".bif.gz")], path)
    return out


def load_bnlearn(name: str | Path, root: str | Path | None = None, *, verify: bool = True) -> DiscreteBN:
    """Parse a bnlearn network (never downloads).

    ``name`` is one of three things, tried in this order:

    * a path to a ``.bif`` or ``.bif.gz`` file (any BIF network, e.g. one of your own);
    * a pinned name in :data:`BNLEARN_NETWORKS`, read from the prepared, checksummed cache;
    * the name of any network the installed pgmpy ships (:func:`installed_pgmpy_networks`: hailfinder,
      hepar2, win95pts, andes, ...), read from the installed wheel as it is (no pinned checksum).

    Raises:
        DataError: a missing file, a pinned network not prepared (the message says how), a failed sha256,
            or an unknown name (the message lists the known ones).
    """
    text = str(name)
    if text.endswith((".bif", ".bif.gz")) or "/" in text or "\\" in text:
        path = Path(text)
        if not path.is_file():
            raise DataError(f"BIF network file {path} not found; pass an existing .bif or .bif.gz file "
                            "or a bnlearn network name.")
        return read_bif(path)
    if text in BNLEARN_NETWORKS:
        path = _folder(root) / f"{text}.bif.gz"
        if not path.is_file():
            raise DataError(
                f"bnlearn network {text!r} is not prepared under {path.parent}; run "
                f"causal_ext.unico.networks.prepare_bnlearn([{text!r}]) first (it runs "
                f"`pip download {BNLEARN_REQUIREMENT} --no-deps`)."
            )
        if verify and _sha256(path) != BNLEARN_NETWORKS[text]:
            raise DataError(
                f"{path} fails sha256 verification; prepare it again with "
                f"prepare_bnlearn([{text!r}], force=True)."
            )
        return read_bif(path, text)
    shipped = installed_pgmpy_networks()
    if text in shipped:
        return read_bif(shipped[text], text)
    raise DataError(
        f"unknown bnlearn network {text!r}; pinned: {', '.join(BNLEARN_NETWORKS)}; shipped by the installed "
        f"pgmpy: {', '.join(sorted(shipped)) or 'none (pgmpy is not installed)'}; "
        "or pass a .bif/.bif.gz path."
    )
