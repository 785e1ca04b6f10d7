"""The S3-Rec sequence format (Amazon Beauty, Sports and Outdoors, Toys and Games) and its catalog source.

The sequential-recommendation literature (S3-Rec, TIGER, LETTER, ActionPiece, ...) reports on three
Amazon 5-core review datasets distributed by the S3-Rec repository as two files per dataset:

* ``<Name>.txt``: one line per user, ``user_id item_1 item_2 ... item_n``, space-separated positive
  integers, items in chronological order. There are no timestamps: the order *is* the time.
* ``<Name>_item2attributes.json``: ``{"item_id": [attribute ids]}``, brand and category attributes
  as integer ids (no names, no text).

:func:`convert_s3rec` turns them into RecBole atomic files:

* ``NAME.inter`` (``user_id:token item_id:token timestamp:float``): one row per (user, position),
  in file order, with the 0-based position in the user's line as the timestamp. Histories are
  sorted by timestamp, so the order of the line is kept exactly and leave-one-out holds out the
  last item of each line (the published protocol). There is no rating column (implicit feedback).
* ``NAME.item`` (``item_id:token categories:token_seq``): one row per item of the attribute file,
  in increasing item id, with the attribute ids written as tokens ``a<ID>``. They load as item
  categories, which :mod:`recframe.features.metadata` turns into a multi-hot block (the only item
  content this data has).

:func:`fetch_s3rec` is the catalog source kind ``s3rec_txt``. It reads the two raw files from the
first place that has them: ``$RECFRAME_S3REC_DIR``, then the local mirror folders named in the
catalog entry (relative to the project root, then to the working directory), then the upstream URL
pinned to a commit. Each raw file is sha256-checked against the catalog before conversion; the
converted atomic files are checked again by :func:`recframe.data.catalog.prepare`.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from recframe.data.interactions import DataError

ENV_MIRROR = "RECFRAME_S3REC_DIR"
"""Environment variable naming a folder that holds the raw S3-Rec files (checked first)."""

PROJECT_ROOT = Path(__file__).resolve().parents[2]

_INTER_HEADER = "user_id:token\titem_id:token\ttimestamp:float"
_ITEM_HEADER = "item_id:token\tcategories:token_seq"


def convert_s3rec(
    sequences: bytes, attributes: bytes, *, name: str, labels: tuple[str, str]
) -> dict[str, bytes]:
    """Convert the raw S3-Rec files to ``{NAME.inter: bytes, NAME.item: bytes}``.

    Args:
        sequences: contents of ``<Name>.txt``.
        attributes: contents of ``<Name>_item2attributes.json``.
        name: the dataset name (file stem of the atomic files).
        labels: the two raw file names, used in error messages.

    Raises:
        DataError: a line that is not ``user item...`` of positive integers (naming the file and
            line), a user listed twice, or an attribute file that is not a JSON object of integer
            lists (naming the key).
    """
    seq_label, attr_label = labels
    try:
        text = sequences.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{seq_label}: not UTF-8 text ({exc}); is this the right file?") from None
    rows = [_INTER_HEADER]
    seen_users: set[str] = set()
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        bad = next((p for p in parts if not p.isdigit() or int(p) <= 0), None)
        if len(parts) < 2 or bad is not None:
            what = (
                f"token {bad!r} is not a positive integer"
                if bad is not None
                else "no items after the user id"
            )
            raise DataError(
                f"{seq_label} line {lineno}: expected 'user_id item_1 ... item_n' (positive integers, "
                f"space separated); {what}. Re-fetch the file (`recframe data prepare NAME --force`)."
            )
        user = parts[0]
        if user in seen_users:
            raise DataError(
                f"{seq_label} line {lineno}: user {user} appears on an earlier line; one line per user."
            )
        seen_users.add(user)
        rows.extend(f"{user}\t{item}\t{pos}" for pos, item in enumerate(parts[1:]))
    if len(rows) == 1:
        raise DataError(f"{seq_label}: no interactions (the file is empty).")
    items = [_ITEM_HEADER]
    for item, attrs in _read_attributes(attributes, attr_label):
        items.append(f"{item}\t{' '.join(f'a{a}' for a in attrs)}")
    return {
        f"{name}.inter": ("\n".join(rows) + "\n").encode("utf-8"),
        f"{name}.item": ("\n".join(items) + "\n").encode("utf-8"),
    }


def _read_attributes(blob: bytes, label: str) -> list[tuple[int, list[int]]]:
    """``[(item id, attribute ids)]`` sorted by item id, validated."""
    try:
        data = json.loads(blob.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{label}: not valid JSON ({exc}). Re-fetch the file.") from None
    if not isinstance(data, dict):
        raise DataError(f"{label}: expected a JSON object {{item_id: [attribute ids]}} at the top level.")
    out: list[tuple[int, list[int]]] = []
    for key, attrs in data.items():
        if (
            not str(key).isdigit()
            or not isinstance(attrs, list)
            or not all(isinstance(a, int) and not isinstance(a, bool) for a in attrs)
        ):
            raise DataError(
                f"{label}: key {key!r} must be an item id mapping to a list of integer attribute ids; "
                f"got {attrs!r}."
            )
        out.append((int(key), sorted(set(attrs))))
    out.sort()
    return out


# ------------------------------------------------------------------ source
def mirror_dirs(source: Mapping[str, Any]) -> list[Path]:
    """Folders to look in, in order: ``$RECFRAME_S3REC_DIR``, then ``mirror`` (relative to the project
    root, then to the working directory)."""
    out: list[Path] = []
    env = os.environ.get(ENV_MIRROR)
    if env:
        out.append(Path(env))
    for rel in source.get("mirror") or []:
        rel_path = Path(rel)
        out.extend([rel_path] if rel_path.is_absolute() else [PROJECT_ROOT / rel_path, Path.cwd() / rel_path])
    return out


def fetch_s3rec(source: Mapping[str, Any], name: str, log: Callable[[str], None]) -> dict[str, bytes]:
    """Catalog source kind ``s3rec_txt``: read (mirror) or download (``base_url``) the raw files,
    check their sha256, convert them with :func:`convert_s3rec`.

    The source entry has ``files: {sequences: FILE, attributes: FILE}``, ``sha256: {FILE: HEX}``,
    optional ``mirror: [folders]`` and optional ``base_url`` (the upstream folder, pinned to a
    commit), and ``timeout_s`` for the download.
    """
    files = source.get("files") or {}
    try:
        seq_name, attr_name = files["sequences"], files["attributes"]
    except KeyError as exc:
        raise DataError(f"catalog entry {name!r}: an s3rec_txt source needs files.{exc.args[0]}.") from None
    sums: Mapping[str, str] = source.get("sha256") or {}
    raw: dict[str, bytes] = {}
    if "mirror" in source or os.environ.get(ENV_MIRROR):
        folder = next(
            (d for d in mirror_dirs(source) if (d / seq_name).is_file() and (d / attr_name).is_file()), None
        )
        if folder is None:
            tried = ", ".join(str(d) for d in mirror_dirs(source)) or "none"
            raise DataError(f"{seq_name} and {attr_name} not found in a local mirror (looked in: {tried}).")
        log(f"{name}: reading {seq_name} and {attr_name} from {folder}")
        for fname in (seq_name, attr_name):
            raw[fname] = (folder / fname).read_bytes()
    elif source.get("base_url"):
        base = str(source["base_url"]).rstrip("/")
        timeout = float(source.get("timeout_s", 30))
        for fname in (seq_name, attr_name):
            url = f"{base}/{fname}"
            log(f"{name}: trying {url} (timeout {timeout:g} s)")
            try:
                with urllib.request.urlopen(url, timeout=timeout) as resp:
                    raw[fname] = resp.read()
            except (urllib.error.URLError, OSError, ValueError) as exc:
                raise DataError(f"cannot download {url} ({getattr(exc, 'reason', exc)}).") from None
    else:
        raise DataError(f"catalog entry {name!r}: an s3rec_txt source needs 'mirror' or 'base_url'.")
    for fname, blob in raw.items():
        want = sums.get(fname)
        got = hashlib.sha256(blob).hexdigest()
        if want and got != want:
            raise DataError(
                f"{fname}: sha256 mismatch (expected {want}, got {got}); not used. The copy is edited, "
                "truncated or a different version; restore the original file."
            )
    return convert_s3rec(raw[seq_name], raw[attr_name], name=name, labels=(seq_name, attr_name))


__all__ = ["ENV_MIRROR", "convert_s3rec", "fetch_s3rec", "mirror_dirs"]
