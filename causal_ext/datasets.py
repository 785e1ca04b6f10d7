"""Real causal data sets with a reference graph, read out of published wheels.

Some Python packages ship benchmark data sets inside their wheels; the
Causal Discovery Toolbox (``cdt==0.6.0``) ships the Sachs et al. (2005)
flow-cytometry data and its consensus graph under ``cdt/data/resources``.
:func:`prepare_causal` fetches such a wheel with ``pip download --no-deps``
(:func:`recframe.data.catalog.fetch_pip_wheel`: the package is never
installed or imported), checks each file's sha256 and writes it atomically
under ``ROOT/NAME/``; :func:`load_causal` reads a prepared data set into a
:class:`CausalDataset` (a DataFrame plus the directed edges of the reference
graph). Nothing is downloaded at import time, and loading never downloads:
preparing is the explicit step (invariant 5 of docs/architecture.md).

The root is the one of :func:`recframe.data.catalog.default_root`
(``$RECFRAME_DATA``, else ``./datasets``). A new data set is one more
:class:`WheelDatasetSpec` in :data:`CAUSAL_DATASETS` (requirement, members
with their sha256, and a parser from the prepared files to a
:class:`CausalDataset`).
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recframe.checkpoint_io import atomic_write
from recframe.data.catalog import default_root, fetch_pip_wheel, sha256_file
from recframe.data.interactions import DataError

Fetch = Callable[[Mapping[str, Any], str, Callable[[str], None]], dict[str, bytes]]


@dataclass(frozen=True)
class CausalDataset:
    """Observational data with a reference (consensus) causal graph.

    Attributes:
        name: the data set's name.
        data: one row per sample, one column per variable.
        edges: directed edges ``(cause, effect)`` of the reference graph, by column name.
        description: what the data are and how they were read.
    """

    name: str
    data: pd.DataFrame
    edges: list[tuple[str, str]]
    description: str = ""

    @property
    def variables(self) -> list[str]:
        """Column names, in order."""
        return [str(c) for c in self.data.columns]

    def parents(self, target: str) -> set[str]:
        """The reference parents of ``target``."""
        if target not in self.variables:
            raise ValueError(f"unknown variable {target!r}; variables are {self.variables}.")
        return {c for c, e in self.edges if e == target}

    def adjacency(self) -> np.ndarray:
        """(d, d) 0/1 matrix with ``A[i, j] = 1`` for an edge variable i -> variable j."""
        idx = {v: i for i, v in enumerate(self.variables)}
        a = np.zeros((len(idx), len(idx)), dtype=int)
        for c, e in self.edges:
            a[idx[c], idx[e]] = 1
        return a


@dataclass(frozen=True)
class WheelDatasetSpec:
    """Where a causal data set lives in a wheel and how to read it.

    Attributes:
        requirement: pip requirement of the wheel, pinned (e.g. ``"cdt==0.6.0"``).
        members: local file name -> (member path inside the wheel, sha256).
        parse: prepared folder -> :class:`CausalDataset`.
        description: one paragraph on the data and its reference graph.
        citation: the reference to cite.
    """

    requirement: str
    members: dict[str, tuple[str, str]]
    parse: Callable[[Path], CausalDataset]
    description: str = ""
    citation: str = ""
    timeout_s: float = field(default=300.0)


def _read_edges(path: Path) -> list[tuple[str, str]]:
    """A two-column CSV of ``Cause,Effect`` rows (header first) as a list of edges."""
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    if not rows or [h.strip().lower() for h in rows[0]] != ["cause", "effect"]:
        got = rows[0] if rows else "nothing"
        raise DataError(f"{path.name}: expected a 'Cause,Effect' header; got {got}.")
    edges = []
    for lineno, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != 2:
            raise DataError(f"{path.name} line {lineno}: expected 2 fields (cause, effect); got {row}.")
        edges.append((row[0].strip(), row[1].strip()))
    return edges


SACHS_DESCRIPTION = (
    "Sachs et al. (2005) multiparameter single-cell flow cytometry of 11 phosphorylated proteins and "
    "phospholipids in human T cells: cdt 0.6.0's cyto_full_data.csv, 7466 cells pooled over the "
    "stimulation/inhibition conditions (raw intensities, not log-transformed), with the 18-edge "
    "consensus network of cyto_full_target.csv (the graph used by cdt and many causal-discovery papers)."
)


def _parse_sachs(folder: Path) -> CausalDataset:
    data = pd.read_csv(folder / "sachs.data.csv")
    edges = _read_edges(folder / "sachs.graph.csv")
    unknown = sorted({v for e in edges for v in e} - set(data.columns))
    if unknown:
        raise DataError(f"sachs.graph.csv names variables missing from the data: {unknown}.")
    return CausalDataset("sachs", data, edges, SACHS_DESCRIPTION)


CAUSAL_DATASETS: dict[str, WheelDatasetSpec] = {
    "sachs": WheelDatasetSpec(
        requirement="cdt==0.6.0",
        members={
            "sachs.data.csv": ("cdt/data/resources/cyto_full_data.csv",
                               "fc331dcd0bc1d8765986b88cd1d23dd5a3f52e4ffc299fdf96de9d522ddf01aa"),
            "sachs.graph.csv": ("cdt/data/resources/cyto_full_target.csv",
                                "398bc137b2669432ef12e0c57d3783fa876c1c7e2377577d3e75410f085485f6"),
        },
        parse=_parse_sachs,
        description=SACHS_DESCRIPTION,
        citation=("K. Sachs, O. Perez, D. Pe'er, D. A. Lauffenburger, G. P. Nolan (2005). Causal "
                  "protein-signaling networks derived from multiparameter single-cell data. Science "
                  "308(5721):523-529."),
    ),
}
"""Known causal data sets by name."""


def _spec(name: str) -> WheelDatasetSpec:
    if name not in CAUSAL_DATASETS:
        raise DataError(f"unknown causal dataset {name!r}; known: {', '.join(sorted(CAUSAL_DATASETS))}.")
    return CAUSAL_DATASETS[name]


def _folder(name: str, root: str | Path | None) -> Path:
    return (Path(root) if root is not None else default_root()) / name


def is_prepared_causal(name: str, root: str | Path | None = None) -> bool:
    """True if every file of ``name`` is under ``ROOT/NAME/`` with its sha256."""
    folder = _folder(name, root)
    return all((folder / f).is_file() and sha256_file(folder / f) == sha
               for f, (_member, sha) in _spec(name).members.items())


def prepare_causal(name: str, root: str | Path | None = None, *, force: bool = False, verbose: bool = True,
                   fetch: Fetch = fetch_pip_wheel) -> Path:
    """Fetch, verify and cache causal data set ``name`` under ``ROOT/NAME/``; return that folder.

    Idempotent: files already present with the right sha256 are kept (unless
    ``force``). ``fetch`` is the wheel reader (tests pass a fake).

    Raises:
        DataError: unknown name, the fetch failed, or a file's sha256 does not
            match (nothing is written then).
    """
    spec = _spec(name)
    log = print if verbose else (lambda _msg: None)
    folder = _folder(name, root)
    if not force and is_prepared_causal(name, root):
        log(f"{name}: already prepared under {folder} (checksums verified)")
        return folder
    source = {"requirement": spec.requirement, "timeout_s": spec.timeout_s,
              "members": {f: member for f, (member, _sha) in spec.members.items()}}
    files = fetch(source, name, log)
    for fname, (member, want) in spec.members.items():
        if fname not in files:
            raise DataError(f"{spec.requirement} did not provide {member}.")
        got = hashlib.sha256(files[fname]).hexdigest()
        if got != want:
            raise DataError(f"{member} from {spec.requirement}: sha256 mismatch (expected {want}, "
                            f"got {got}); not written. The wheel changed or the download is corrupt.")
    for fname, blob in files.items():
        if fname in spec.members:
            atomic_write(folder / fname, lambda fh, b=blob: fh.write(b))
    log(f"{name}: prepared under {folder} from {spec.requirement}")
    return folder


def load_causal(name: str, root: str | Path | None = None, *, verify: bool = True) -> CausalDataset:
    """Load a prepared causal data set (never downloads).

    Raises:
        DataError: not prepared (the message says how), or a file fails its sha256.
    """
    spec = _spec(name)
    folder = _folder(name, root)
    missing = [f for f in spec.members if not (folder / f).is_file()]
    if missing:
        raise DataError(f"causal dataset {name!r} is not prepared under {folder} "
                        f"(missing {', '.join(missing)}); run causal_ext.datasets.prepare_causal({name!r}) "
                        "first (it runs "
                        f"`pip download {spec.requirement} --no-deps`).")
    if verify and not is_prepared_causal(name, root):
        raise DataError(f"causal dataset {name!r} under {folder} fails sha256 verification; prepare it again "
                        f"with prepare_causal({name!r}, force=True).")
    return spec.parse(folder)


__all__ = [
    "CAUSAL_DATASETS",
    "CausalDataset",
    "WheelDatasetSpec",
    "is_prepared_causal",
    "load_causal",
    "prepare_causal",
]
