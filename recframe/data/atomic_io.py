"""Parser for RecBole atomic files (``NAME.inter``, ``NAME.item``, ``NAME.user``).

An atomic file is tab-separated text. Its first line is a header whose fields
look like ``name:type`` with ``type`` one of ``token``, ``token_seq``,
``float`` or ``float_seq``; sequence values are space separated. There is no
quoting. This module only parses and validates; turning the columns into an
:class:`~recframe.data.interactions.Interactions` is the job of
:mod:`recframe.data.sources`.

Every problem raises a single :class:`~recframe.data.interactions.DataError`
whose message names the file, the line (1-based, the header is line 1) or the
field, and what to do about it.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from recframe.data.interactions import DataError, refuse_infinite

ATOMIC_TYPES = ("token", "token_seq", "float", "float_seq")

_PANDAS_LINE = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


@dataclass(frozen=True)
class AtomicTable:
    """The parsed body of one atomic file, every value still a string.

    Attributes:
        path: the file that was read.
        fields: field names in header order (without the ``:type`` suffix).
        types: field name -> atomic type.
        frame: one string column per field; blank lines are dropped.
        lines: 1-based file line of each row of ``frame`` (for messages).
    """

    path: Path
    fields: list[str]
    types: dict[str, str]
    frame: pd.DataFrame
    lines: np.ndarray

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def label(self) -> str:
        """The file name used in messages."""
        return self.path.name

    def require(self, field: str, what: str) -> None:
        """Raise a :class:`DataError` if ``field`` is not in the header."""
        if field not in self.types:
            raise DataError(
                f"{self.label} line 1: no field {field!r} for the {what}; the header has "
                f"{', '.join(self.fields)}. Pass the right field name in `columns`."
            )

    def tokens(self, field: str, *, allow_empty: bool = False) -> np.ndarray:
        """The raw string values of ``field`` (an object array).

        Empty values are an error unless ``allow_empty``: ids must be present.
        """
        values = self.frame[field].str.strip().to_numpy(dtype=object)
        if not allow_empty:
            empty = np.flatnonzero(values == "")
            if len(empty):
                line = int(self.lines[empty[0]])
                raise DataError(
                    f"{self.label} line {line}: field {field!r} is empty ({len(empty)} rows like this); "
                    "every row needs a value there. Fix or drop those rows."
                )
        return values

    def floats(self, field: str, *, allow_empty: bool = True, finite: bool = True) -> np.ndarray:
        """``field`` converted to float64.

        Empty values (and a literal ``nan``) become NaN if ``allow_empty``,
        else they are an error. A value that is not a number, or (``finite``)
        is ``inf``/``-inf``, raises a :class:`DataError` naming the first
        offending line and value.
        """
        raw = self.frame[field].str.strip()
        try:  # fast path: every value parses
            values = raw.astype(np.float64).to_numpy()
            if (allow_empty or not np.isnan(values).any()) and not (finite and np.isinf(values).any()):
                return values
        except (ValueError, TypeError):
            values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
        text = raw.to_numpy(dtype=object)
        if finite:
            refuse_infinite(values, lambda i: f"{self.label} line {self.lines[i]}: field {field!r}", text)
        bad = np.isnan(values)
        if allow_empty and bad.any():
            idx = np.flatnonzero(bad)
            missing = (text[idx] == "") | (raw.iloc[idx].str.lower().to_numpy(dtype=object) == "nan")
            bad[idx[missing]] = False
        if not bad.any():
            return values
        first = int(np.flatnonzero(bad)[0])
        line = int(self.lines[first])
        value = text[first]
        kind = self.types.get(field, "float")
        fix = (
            "Every row needs a value there."
            if value == "" or value.lower() == "nan"
            else "Fix the value, or map a different field in `columns`."
        )
        raise DataError(
            f"{self.label} line {line}: field {field!r} ({kind}) has value {value!r}, "
            f"which is not a number ({int(bad.sum())} such rows). {fix}"
        )

    def token_seqs(self, field: str) -> list[list[str]]:
        """``field`` split on spaces (``token_seq`` values); empty -> ``[]``."""
        return [v.split() for v in self.frame[field].tolist()]


def read_header(path: Path, *, encoding: str = "utf-8") -> tuple[list[str], dict[str, str]]:
    """Read and validate the ``name:type`` header line of an atomic file."""
    if not path.is_file():
        raise DataError(f"{path}: file not found.")
    with open(path, "rb") as fh:
        raw = fh.readline()
    try:
        first = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path.name} line 1: not valid {encoding} text ({exc.reason} at byte {exc.start}); "
            "re-save the file as UTF-8 or pass encoding=... to the loader."
        ) from None
    if first.startswith("\ufeff"):
        first = first[1:]
    first = first.rstrip("\r\n")
    if not first.strip():
        raise DataError(
            f"{path.name}: the file is empty (no header line); an atomic file starts with a "
            "tab-separated header like 'user_id:token<TAB>item_id:token<TAB>rating:float'."
        )
    fields: list[str] = []
    types: dict[str, str] = {}
    for column in first.split("\t"):
        name, sep, kind = column.strip().rpartition(":")
        if not sep or not name:
            raise DataError(
                f"{path.name} line 1: field {column.strip()!r} has no ':type' suffix; atomic headers "
                f"look like '{column.strip() or 'rating'}:float' (types: {', '.join(ATOMIC_TYPES)}). "
                "Is the file tab-separated with a RecBole header?"
            )
        if kind not in ATOMIC_TYPES:
            raise DataError(
                f"{path.name} line 1: field {name!r} has unknown type {kind!r}; use one of "
                f"{', '.join(ATOMIC_TYPES)}."
            )
        if name in types:
            raise DataError(f"{path.name} line 1: field {name!r} appears twice in the header; rename one.")
        fields.append(name)
        types[name] = kind
    return fields, types


def read_atomic(path: str | Path, *, encoding: str = "utf-8") -> AtomicTable:
    """Parse one atomic file into an :class:`AtomicTable` (all values as strings)."""
    path = Path(path)
    fields, types = read_header(path, encoding=encoding)
    try:
        frame = pd.read_csv(
            path,
            sep="\t",
            header=None,
            skiprows=1,
            names=fields,
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            quoting=csv.QUOTE_NONE,
            skip_blank_lines=False,
            encoding=encoding,
            engine="c",
        )
    except pd.errors.EmptyDataError:
        frame = pd.DataFrame({f: pd.Series(dtype=object) for f in fields})
    except pd.errors.ParserError as exc:
        match = _PANDAS_LINE.search(str(exc))
        if match:
            want, line, saw = match.groups()
            raise DataError(
                f"{path.name} line {line}: {saw} tab-separated values but the header has {want} "
                f"fields ({', '.join(fields)}). Fix that line (stray tab?) or the header."
            ) from None
        raise DataError(f"{path.name}: cannot parse as tab-separated text ({exc}).") from None
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path.name} line {_undecodable_line(path, encoding)}: not valid {encoding} text "
            f"({exc.reason}); re-save the file as UTF-8 or pass encoding=... to the loader."
        ) from None
    lines = np.arange(2, len(frame) + 2, dtype=np.int64)
    blank = (frame == "").all(axis=1).to_numpy()
    if blank.any():
        frame = frame.loc[~blank].reset_index(drop=True)
        lines = lines[~blank]
    if len(frame) == 0:
        raise DataError(
            f"{path.name}: has a header but no data rows; add rows below the header "
            "(one interaction per line)."
        )
    return AtomicTable(path=path, fields=fields, types=types, frame=frame, lines=lines)


def _undecodable_line(path: Path, encoding: str) -> int | str:
    """1-based number of the first line that does not decode (for messages only)."""
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            try:
                line.decode(encoding)
            except UnicodeDecodeError:
                return lineno
    return "?"
