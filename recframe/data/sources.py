"""Load interactions from files: RecBole atomic files and CSV/TSV/Parquet tables.

Both loaders return an :class:`~recframe.data.interactions.Interactions` whose
dense ids follow the first appearance of each raw id in file order (as RecBole
does), with rows then sorted stably by (user, timestamp).

Column maps use the keys ``user``, ``item``, ``rating`` and ``timestamp``;
``rating`` and ``timestamp`` are optional (``None`` means "not present").
Every problem raises one :class:`~recframe.data.interactions.DataError` that
names the file, the line or key, and the fix.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recframe.data.atomic_io import AtomicTable, read_atomic
from recframe.data.interactions import DataError, Interactions, refuse_infinite

COLUMN_KEYS = ("user", "item", "rating", "timestamp")
ITEM_FEATURE_KEYS = ("title", "year", "categories")
DEFAULT_ATOMIC_COLUMNS: dict[str, str] = {
    "user": "user_id",
    "item": "item_id",
    "rating": "rating",
    "timestamp": "timestamp",
}
_OPTIONAL = ("rating", "timestamp")
_CATEGORY_NAMES = ("class", "genre", "genres", "categories", "category")
_YEAR_NAMES = ("year", "release_year")


# ----------------------------------------------------------------- atomic
def load_atomic(
    directory: str | Path,
    name: str | None = None,
    *,
    columns: Mapping[str, str | None] | None = None,
    item_columns: Mapping[str, str | None] | None = None,
    encoding: str = "utf-8",
) -> Interactions:
    """Load a dataset stored as RecBole atomic files.

    Reads ``DIRECTORY/NAME.inter`` and, when present, ``NAME.item`` for item
    features (``NAME.user`` is not needed for :class:`Interactions`; see
    :func:`load_user_table`).

    Args:
        directory: the folder holding the files, or the ``.inter`` file itself.
        name: dataset name; defaults to the folder name (or the file stem).
        columns: which ``.inter`` fields hold ``user``, ``item``, ``rating``
            and ``timestamp``; defaults to ``user_id``, ``item_id``,
            ``rating``, ``timestamp``. Keys left out keep the default; rating
            and timestamp may be absent from the file unless named here
            explicitly; map them to ``None`` to ignore them.
        item_columns: which ``.item`` fields hold ``title``, ``year`` and
            ``categories``. By default: title is the first field whose name
            contains "title", year a field named ``year``/``release_year`` (or
            ending in ``year``), categories a field named ``class``, ``genre``
            or ``categories`` (``token_seq``: space separated).
        encoding: text encoding of the files.

    Raises:
        DataError: a file is missing, empty or malformed, a mapped field is not
            in the header, or a rating/timestamp is not a number.
    """
    directory = Path(directory)
    if directory.suffix == ".inter" and not directory.is_dir():
        name = name or directory.stem
        directory = directory.parent
    name = name or directory.name
    inter_path = directory / f"{name}.inter"
    if not inter_path.is_file():
        found = sorted(p.name for p in directory.glob("*.inter")) if directory.is_dir() else []
        hint = f" The folder has {', '.join(found)}; pass name=..." if found else ""
        raise DataError(
            f"{name}.inter not found in {directory}/: load_atomic expects DIRECTORY/NAME.inter "
            f"(plus optional NAME.item, NAME.user).{hint}"
        )
    mapping, explicit = _column_map(columns, DEFAULT_ATOMIC_COLUMNS, f"{inter_path.name}: columns")
    table = read_atomic(inter_path, encoding=encoding)
    for key in ("user", "item"):
        table.require(mapping[key], f"{key} ids (columns[{key!r}])")
    for key in _OPTIONAL:
        field = mapping[key]
        if field is not None and field not in table.types:
            if key in explicit:
                table.require(field, f"{key} (columns[{key!r}])")
            mapping[key] = None
    users = table.tokens(mapping["user"])
    items = table.tokens(mapping["item"])
    ratings = table.floats(mapping["rating"]) if mapping["rating"] else None
    timestamps = table.floats(mapping["timestamp"], allow_empty=False) if mapping["timestamp"] else None

    features = None
    item_path = directory / f"{name}.item"
    if item_path.is_file():
        features = _item_features(read_atomic(item_path, encoding=encoding), mapping["item"], item_columns)
    return Interactions.from_raw(users, items, timestamps, ratings, item_features=features, name=name)


def load_user_table(
    directory: str | Path, name: str | None = None, *, encoding: str = "utf-8"
) -> pd.DataFrame:
    """The ``NAME.user`` atomic file as a string DataFrame (fields as columns).

    :class:`Interactions` has no slot for user features; use this when a model
    needs them. Raises :class:`DataError` if the file is missing or malformed.
    """
    directory = Path(directory)
    name = name or directory.name
    return read_atomic(directory / f"{name}.user", encoding=encoding).frame


def _item_features(
    table: AtomicTable, item_field: str, item_columns: Mapping[str, str | None] | None
) -> dict[str, dict[str, Any]]:
    """Map raw item id -> {title, year, categories} from an ``.item`` table."""
    table.require(item_field, "item ids (the same field name as in the .inter file)")
    chosen: dict[str, str | None] = {
        "title": next((f for f in table.fields if "title" in f.lower()), None),
        "year": next(
            (f for f in table.fields if f.lower() in _YEAR_NAMES),
            next((f for f in table.fields if f.lower().endswith("year")), None),
        ),
        "categories": next((f for f in table.fields if f.lower() in _CATEGORY_NAMES), None),
    }
    if item_columns:
        for key, field in item_columns.items():
            if key not in ITEM_FEATURE_KEYS:
                raise DataError(
                    f"{table.label}: unknown key {key!r} in item_columns; use {', '.join(ITEM_FEATURE_KEYS)}."
                )
            if field is not None:
                table.require(field, f"item {key} (item_columns[{key!r}])")
            chosen[key] = field
    ids = table.tokens(item_field)
    titles = table.frame[chosen["title"]].str.strip().tolist() if chosen["title"] else None
    years = table.frame[chosen["year"]].str.strip().tolist() if chosen["year"] else None
    cats = table.token_seqs(chosen["categories"]) if chosen["categories"] else None
    out: dict[str, dict[str, Any]] = {}
    for row, raw in enumerate(ids):
        if raw in out:  # first row of a duplicated item id wins
            continue
        feat: dict[str, Any] = {}
        if titles is not None:
            feat["title"] = titles[row]
        if years is not None:
            feat["year"] = _parse_year(years[row])
        if cats is not None:
            feat["categories"] = cats[row]
        out[raw] = feat
    return out


def _parse_year(value: str) -> int | None:
    """A 4-digit-ish year, or ``None`` for values like 'unknown' or ''."""
    value = value.strip()
    if value[:4].isdigit():
        return int(value[:4])
    try:
        year = float(value)
    except ValueError:
        return None
    return int(year) if np.isfinite(year) and year > 0 else None


# ------------------------------------------------------------------ tables
def load_table(
    path: str | Path,
    columns: Mapping[str, str | None],
    *,
    sep: str | None = None,
    name: str | None = None,
    encoding: str = "utf-8",
) -> Interactions:
    """Load interactions from a CSV, TSV or Parquet file with a header row.

    Args:
        path: the file; ``.parquet``/``.pq`` is read with pyarrow, anything
            else as delimited text.
        columns: ``{"user": ..., "item": ..., "rating": ..., "timestamp": ...}``
            naming the file's columns; ``user`` and ``item`` are required.
        sep: field separator for text files; default from the suffix
            (``.tsv``/``.tab`` -> tab, ``.csv`` -> comma, otherwise sniffed).
        name: dataset name; defaults to the file stem.

    Timestamps may be numbers or, in Parquet, datetime columns (converted to
    seconds since the epoch).

    Raises:
        DataError: the file is missing or empty, a mapped column is absent, or a
            rating/timestamp is not a number.
    """
    path = Path(path)
    name = name or path.stem
    if not path.is_file():
        raise DataError(f"{path}: file not found; pass the path of a CSV, TSV or Parquet file.")
    mapping, _ = _column_map(columns, {}, f"{path.name}: columns")
    for key in ("user", "item"):
        if not mapping.get(key):
            raise DataError(f"{path.name}: columns needs a {key!r} entry naming the {key} id column.")
    is_parquet = path.suffix.lower() in (".parquet", ".pq")
    frame = _read_parquet(path) if is_parquet else _read_text(path, sep, encoding)
    header = [str(c) for c in frame.columns]
    for key, column in mapping.items():
        if column is not None and column not in frame.columns:
            raise DataError(
                f"{path.name}: column {column!r} (columns[{key!r}]) is not in the file; its columns are "
                f"{', '.join(header)}. Fix the column map."
            )
    if len(frame) == 0:
        raise DataError(f"{path.name}: has a header but no data rows.")
    where = "row" if is_parquet else "line"
    offset = 0 if is_parquet else 2  # text: line 1 is the header

    def ids(key: str) -> np.ndarray:
        col = frame[mapping[key]]
        if pd.api.types.is_integer_dtype(col) and not col.isna().any():
            # integer ids stay integers (only the id map's distinct ids become strings)
            return col.to_numpy(dtype=getattr(col.dtype, "numpy_dtype", col.dtype))
        values = col.astype(str).str.strip().to_numpy(dtype=object)
        missing = col.isna().to_numpy() | (values == "")
        if missing.any():
            at = int(np.flatnonzero(missing)[0]) + offset
            raise DataError(
                f"{path.name} {where} {at}: column {mapping[key]!r} ({key} id) is empty; every row needs one."
            )
        return values

    def numbers(key: str) -> np.ndarray | None:
        column = mapping.get(key)
        if column is None:
            return None
        col = frame[column]
        if pd.api.types.is_datetime64_any_dtype(col):
            if key != "timestamp":
                raise DataError(f"{path.name}: column {column!r} ({key}) holds dates, not numbers.")
            return col.to_numpy(dtype="datetime64[ns]").astype(np.int64) / 1e9
        values = pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64)
        refuse_infinite(values, lambda i: f"{path.name} {where} {i + offset}: column {column!r} ({key})",
                        col.to_numpy(dtype=object))
        bad = np.isnan(values) & col.notna().to_numpy()
        if key == "timestamp":
            bad |= col.isna().to_numpy()
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise DataError(
                f"{path.name} {where} {first + offset}: column {column!r} ({key}) has value "
                f"{col.iloc[first]!r}, which is not a number ({int(bad.sum())} such rows). "
                "Fix the value or the column map."
            )
        return values

    return Interactions.from_raw(ids("user"), ids("item"), numbers("timestamp"), numbers("rating"), name=name)


def _read_parquet(path: Path) -> pd.DataFrame:
    if path.stat().st_size == 0:
        raise DataError(f"{path.name}: the file is empty (0 bytes); expected a Parquet file.")
    try:
        return pd.read_parquet(path)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise DataError(
            f"{path.name}: cannot read as Parquet ({exc}). Is it really a Parquet file?"
        ) from None


def _read_text(path: Path, sep: str | None, encoding: str) -> pd.DataFrame:
    if sep is None:
        suffix = path.suffix.lower()
        sep = "\t" if suffix in (".tsv", ".tab") else "," if suffix == ".csv" else None
    try:
        return pd.read_csv(
            path,
            sep=sep,
            dtype=str,
            keep_default_na=False,
            na_values=[""],
            encoding=encoding,
            engine="c" if sep is not None else "python",
            quoting=csv.QUOTE_MINIMAL,
        )
    except pd.errors.EmptyDataError:
        raise DataError(
            f"{path.name}: the file is empty; expected a header row naming the columns, then one "
            "interaction per line."
        ) from None
    except pd.errors.ParserError as exc:
        raise DataError(f"{path.name}: cannot parse ({exc}); check the separator (sep=...).") from None
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path.name}: not valid {encoding} text ({exc.reason} at byte {exc.start}); pass encoding=..."
        ) from None


def _column_map(
    columns: Mapping[str, str | None] | None, defaults: Mapping[str, str], where: str
) -> tuple[dict[str, str | None], set[str]]:
    """Merge a user column map over the defaults; unknown keys raise."""
    mapping: dict[str, str | None] = {k: defaults.get(k) for k in COLUMN_KEYS}
    explicit: set[str] = set()
    for key, value in (columns or {}).items():
        if key not in COLUMN_KEYS:
            raise DataError(
                f"{where}: unknown key {key!r}; the column map takes {', '.join(COLUMN_KEYS)} "
                "(e.g. columns={'user': 'uid', 'item': 'iid'})."
            )
        if value is not None and not isinstance(value, str):
            raise DataError(f"{where}: columns[{key!r}] must be a column name (str) or None, not {value!r}.")
        mapping[key] = value
        explicit.add(key)
    for key in ("user", "item"):
        if key in explicit and mapping[key] is None:
            raise DataError(f"{where}: columns[{key!r}] cannot be None; every row needs a {key} id.")
    return mapping, explicit


__all__ = [
    "COLUMN_KEYS",
    "DEFAULT_ATOMIC_COLUMNS",
    "load_atomic",
    "load_table",
    "load_user_table",
]
