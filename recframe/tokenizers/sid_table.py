"""The semantic-ID table: one code path per item, an artifact keyed by a fingerprint.

A :class:`SIDTable` is what every tokenizer's ``fit`` returns and what generative models, the
trie and constrained decoding consume. It is a plain, frozen value:

* ``codes``: int64 ``[n_items + 1, L]``. Row ``i`` is dense item ``i``'s code path; row 0 belongs
  to the padding item and is all zeros as a placeholder. Row 0 is *not* a path: a real item may
  also have the all-zero path, so consumers build tries and lookups from rows ``1..n_items`` only.
  ``L`` includes the disambiguation level when the tokenizer needed one
  (``stats["disambiguated"]``).
* ``codebook_sizes``: the number of codes at each level; a real item's code at level ``l`` is in
  ``0..codebook_sizes[l] - 1``. Every real item's full path is unique (checked on construction).
* ``fingerprint``: :func:`sid_fingerprint` of the item feature matrix and the tokenizer settings
  the table was fitted from (DESIGN invariant 4). :meth:`SIDTable.check` recomputes it and raises
  :class:`SIDTableMismatchError` on a stale table.
* ``settings``: the tokenizer's settings (JSON-able; what the fingerprint covers).
* ``stats``: codebook usage, perplexity, collision rate, fit time, ... (see
  :mod:`recframe.tokenizers.stats`).

``state_dict()`` holds only tensors, strings, numbers, lists and dicts, so a table rides inside a
checkpoint that is loaded with ``torch.load(weights_only=True)``; ``save``/``load`` write and read
such a file atomically.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

FORMAT_VERSION = 1
STATE_KEYS = ("codes", "codebook_sizes", "fingerprint", "settings", "stats")


class SIDTableMismatchError(ValueError):
    """A semantic-ID table that was fitted on other item features or tokenizer settings."""


def sid_fingerprint(features: np.ndarray, settings: dict[str, Any]) -> str:
    """sha256 over the feature matrix and the tokenizer settings.

    The digest covers, in order: the matrix shape (``"{rows}x{cols}:float32:"``, so that two
    reshapes of one buffer differ), the matrix bytes as float32 in C order, and
    ``json.dumps(settings, sort_keys=True)``.
    """
    arr = np.ascontiguousarray(features, dtype=np.float32)
    if arr.ndim != 2:
        raise ValueError(f"features must be a 2-D matrix [n_items + 1, d]; got shape {arr.shape}.")
    digest = hashlib.sha256(f"{arr.shape[0]}x{arr.shape[1]}:float32:".encode())
    digest.update(arr.tobytes())
    digest.update(json.dumps(to_plain(settings), sort_keys=True).encode())
    return digest.hexdigest()


def to_plain(obj: Any, where: str = "a SIDTable") -> Any:
    """Convert numpy scalars/arrays and tuples inside ``obj`` to plain Python (JSON/weights_only safe).

    Anything else raises one ``TypeError`` saying it cannot be stored in ``where``.
    """
    if isinstance(obj, dict):
        return {str(k): to_plain(v, where) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_plain(v, where) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_plain(obj.tolist(), where)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if obj is None or isinstance(obj, str | bool | int | float):
        return obj
    raise TypeError(f"{type(obj).__name__} value {obj!r} cannot be stored in {where}; use plain "
                    "str/int/float/bool/None, lists and dicts.")


@dataclass(frozen=True, eq=False)
class SIDTable:
    """Semantic-ID code paths of all items (see the module docstring for the contract).

    Args:
        codes: int64 ``[n_items + 1, L]``; row 0 all zeros (padding placeholder, not a path).
        codebook_sizes: codes per level, length ``L``.
        fingerprint: :func:`sid_fingerprint` of the features and settings the table came from.
        settings: the tokenizer settings (JSON-able).
        stats: plain-valued statistics of the fit.

    Raises:
        ValueError: ``codes`` has the wrong shape/dtype/range, row 0 is not zero, or two real
            items share a path.
    """

    codes: np.ndarray
    codebook_sizes: tuple[int, ...]
    fingerprint: str
    settings: dict[str, Any]
    stats: dict[str, Any]

    def __post_init__(self) -> None:
        codes = np.array(self.codes, copy=True)
        if codes.ndim != 2 or codes.shape[0] < 2 or codes.shape[1] < 1:
            raise ValueError(f"SIDTable codes must be [n_items + 1, L] with n_items >= 1 and L >= 1; "
                             f"got shape {codes.shape}.")
        if not np.issubdtype(codes.dtype, np.integer):
            raise ValueError(f"SIDTable codes must be integers; got dtype {codes.dtype}.")
        codes = codes.astype(np.int64)
        sizes = tuple(int(s) for s in self.codebook_sizes)
        if len(sizes) != codes.shape[1] or min(sizes) < 1:
            raise ValueError(f"codebook_sizes {sizes} must hold one positive size per level "
                             f"(codes have {codes.shape[1]} levels).")
        if codes[0].any():
            raise ValueError(f"SIDTable row 0 is the padding item and must be all zeros; got {codes[0]}.")
        real = codes[1:]
        bad = (real < 0) | (real >= np.asarray(sizes))
        if bad.any():
            item, level = (int(v) for v in np.argwhere(bad)[0])
            raise ValueError(f"item {item + 1} has code {real[item, level]} at level {level}, outside "
                             f"0..{sizes[level] - 1} (codebook_sizes={sizes}).")
        n_unique = len(np.unique(real, axis=0))
        if n_unique != len(real):
            raise ValueError(f"SIDTable paths must be unique per item; {len(real) - n_unique} of {len(real)} "
                             "items repeat another item's path. Disambiguate with "
                             "recframe.tokenizers.collisions.disambiguate.")
        if not isinstance(self.fingerprint, str) or not self.fingerprint:
            raise ValueError("SIDTable fingerprint must be a non-empty string (sid_fingerprint(features, "
                             "settings)).")
        codes.setflags(write=False)
        object.__setattr__(self, "codes", codes)
        object.__setattr__(self, "codebook_sizes", sizes)
        object.__setattr__(self, "settings", to_plain(dict(self.settings)))
        object.__setattr__(self, "stats", to_plain(dict(self.stats)))

    # ----------------------------------------------------------------- shape
    @property
    def n_items(self) -> int:
        """Number of real items (rows minus the padding row)."""
        return int(self.codes.shape[0] - 1)

    @property
    def depth(self) -> int:
        """Number of levels ``L`` (including the disambiguation level, when present)."""
        return int(self.codes.shape[1])

    @property
    def semantic_depth(self) -> int:
        """Number of levels before the disambiguation level (``depth`` when there is none)."""
        return self.depth - int(bool(self.stats.get("disambiguated", False)))

    # ---------------------------------------------------------------- checks
    def check(self, features: np.ndarray, settings: dict[str, Any] | None = None) -> None:
        """Raise :class:`SIDTableMismatchError` unless the table was fitted on ``features`` + ``settings``.

        ``settings`` defaults to the table's own settings (then only the features are checked).
        """
        settings = self.settings if settings is None else to_plain(dict(settings))
        expected = sid_fingerprint(features, settings)
        if expected == self.fingerprint:
            return
        keys = set(settings) | set(self.settings)
        changed = sorted(k for k in keys if settings.get(k) != self.settings.get(k))
        what = (f"the tokenizer settings differ in {', '.join(changed)}" if changed
                else "the item features differ (values or shape)")
        raise SIDTableMismatchError(
            f"SID table fingerprint {self.fingerprint} does not match fingerprint {expected} of the given "
            f"item features and tokenizer settings ({what}). Re-fit the tokenizer on these features "
            "(tokenizer.fit(features)) or load the SID table that was fitted on them.")

    # ------------------------------------------------------------- derivation
    @property
    def version(self) -> int:
        """How many times the table was derived by :meth:`reassigned` (0 = as the tokenizer fitted it)."""
        return int(self.settings.get("version", 0))

    def reassigned(self, items: Any, codes: Any, reason: str) -> "SIDTable":
        """A new table in which the rows ``items`` get the code paths ``codes`` (e.g. concept unlearning).

        Every other row is unchanged and the result is validated like any table, so two items can never
        end on one path. The derived table records its lineage: ``settings["version"]`` is this table's
        version + 1, ``settings["derived_from"]`` this table's fingerprint and ``settings["reassignment"]``
        the ``reason``; its ``fingerprint`` is the sha256 of this fingerprint, the reason and the new code
        matrix, so :meth:`check` against the original features fails (the codes are no longer the
        tokenizer's output) and every consumer keyed by fingerprint sees a new table. ``stats`` are kept,
        with ``stats["reassigned_items"]`` added.

        Args:
            items: dense item ids (``1..n_items``), distinct.
            codes: ``[len(items), L]`` their new paths.
            reason: a short description stored in the settings (e.g. the concept).
        """
        rows = np.asarray(items, dtype=np.int64).reshape(-1)
        new = np.asarray(codes, dtype=np.int64).reshape(len(rows), self.depth)
        if len(np.unique(rows)) != len(rows) or (len(rows) and (rows.min() < 1 or rows.max() > self.n_items)):
            raise ValueError(f"reassigned: items must be distinct ids in 1..{self.n_items}.")
        table = np.array(self.codes, copy=True)
        table[rows] = new
        digest = hashlib.sha256(f"{self.fingerprint}:{reason}:".encode())
        digest.update(np.ascontiguousarray(table).tobytes())
        settings = {**self.settings, "version": self.version + 1, "derived_from": self.fingerprint,
                    "reassignment": str(reason)}
        stats = {**self.stats, "reassigned_items": int(len(rows))}
        return SIDTable(codes=table, codebook_sizes=self.codebook_sizes, fingerprint=digest.hexdigest(),
                        settings=settings, stats=stats)

    # ----------------------------------------------------------- persistence
    def state_dict(self) -> dict[str, Any]:
        """Tensors, strings, numbers, lists and dicts only (safe for ``torch.load(weights_only=True)``)."""
        return {"format": FORMAT_VERSION, "codes": torch.from_numpy(self.codes.copy()),
                "codebook_sizes": list(self.codebook_sizes), "fingerprint": self.fingerprint,
                "settings": to_plain(self.settings), "stats": to_plain(self.stats)}

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> "SIDTable":
        """Rebuild a table from :meth:`state_dict` output (validated like a new table)."""
        if not isinstance(state, dict):
            raise ValueError(f"SIDTable state must be a dict; got {type(state).__name__}.")
        missing = [k for k in STATE_KEYS if k not in state]
        if missing:
            raise ValueError(f"SIDTable state is missing {', '.join(missing)}; it must come from "
                             "SIDTable.state_dict().")
        if state.get("format", FORMAT_VERSION) != FORMAT_VERSION:
            raise ValueError(f"SIDTable state has format {state['format']}; this version reads format "
                             f"{FORMAT_VERSION}. Re-fit the tokenizer.")
        codes = state["codes"]
        codes = codes.cpu().numpy() if isinstance(codes, torch.Tensor) else np.asarray(codes)
        return cls(codes=codes, codebook_sizes=tuple(state["codebook_sizes"]),
                   fingerprint=state["fingerprint"], settings=dict(state["settings"]),
                   stats=dict(state["stats"]))

    def save(self, path: str | Path) -> Path:
        """Write :meth:`state_dict` with ``torch.save`` atomically (temp file + rename)."""
        from recframe.checkpoint_io import atomic_write  # lazy: it imports Lightning

        state = self.state_dict()
        atomic_write(path, lambda fh: torch.save(state, fh))
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> "SIDTable":
        """Read a file written by :meth:`save` (``weights_only=True``)."""
        from recframe.checkpoint_io import load_checkpoint  # lazy: it imports Lightning

        return cls.from_state_dict(load_checkpoint(path))

    def __repr__(self) -> str:
        return (f"SIDTable(n_items={self.n_items}, codebook_sizes={self.codebook_sizes}, "
                f"tokenizer={self.settings.get('tokenizer')!r}, fingerprint={self.fingerprint[:12]}...)")
