"""The one table type of recframe: :class:`Interactions`.

Every source (RecBole atomic files, CSV/Parquet, MovieLens-100K, the synthetic
generator) produces an :class:`Interactions`; every split returns new
:class:`Interactions` that share the same id space; every model sees batches
built from them.

Conventions
-----------
* Users and items carry dense integer ids ``1..n_users`` and ``1..n_items``;
  id ``0`` is reserved for padding everywhere (embedding tables have
  ``n_items + 1`` rows, score matrices ``n_items + 1`` columns).
* Dense ids are assigned in order of first appearance in the source file, as
  RecBole does, so that the two frameworks see the same id space.
* ``user_ids[u]`` / ``item_ids[i]`` map a dense id back to the raw id (a string);
  index 0 holds ``"[PAD]"``. Integer raw ids stay integers until these maps
  are built: the dense ids come from one hash pass over the integers
  (``pandas.factorize``, first-appearance order) and only the distinct ids are
  turned into strings, so a 10M-row table never holds a string per row.
* Rows are stored sorted by (user, timestamp) with a *stable* sort: ties in
  time keep their file order (as RecBole does), so splits are comparable.
* ``label`` is the signed feedback: +1 liked, -1 disliked, 0 unknown; see
  :func:`recframe.data.filters.signed_labels` for the rule that derives it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

PAD = "[PAD]"


class DataError(ValueError):
    """A data problem the user can fix: names the file/key and the fix."""


def refuse_infinite(values: np.ndarray, locate: Callable[[int], str], shown: Sequence[Any]) -> None:
    """Raise :class:`DataError` at the first ``inf``/``-inf`` of ``values`` (nothing if there is none).

    ``locate(i)`` names row ``i`` (file, line or row, column) and ``shown[i]`` is its value as read.
    """
    infinite = np.isinf(values)
    if infinite.any():
        first = int(np.flatnonzero(infinite)[0])
        raise DataError(
            f"{locate(first)} has value {shown[first]!r}, which is not finite ({int(infinite.sum())} such "
            "rows). Every value there must be a finite number; fix or drop those rows."
        )


@dataclass(frozen=True)
class ItemFeatures:
    """Optional per-item side information, row ``i`` describes dense item ``i``.

    Row 0 (padding) is empty. ``title`` is text, ``categories`` a list of
    strings per item, ``year`` an integer (0 when unknown) and ``vectors`` an
    optional dense matrix ``[n_items + 1, d]``.
    """

    title: np.ndarray | None = None  # object array of str, len n_items+1
    categories: list[list[str]] | None = None
    year: np.ndarray | None = None  # int64, len n_items+1
    vectors: np.ndarray | None = None  # float32 [n_items+1, d]
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def texts(self) -> list[str]:
        """One text per item (row 0 empty): ``"title (year); genre, genre"``."""
        n = self._length()
        out = []
        for i in range(n):
            parts = []
            if self.title is not None and self.title[i]:
                t = str(self.title[i])
                if self.year is not None and self.year[i]:
                    t += f" ({int(self.year[i])})"
                parts.append(t)
            if self.categories is not None and self.categories[i]:
                parts.append(", ".join(self.categories[i]))
            out.append("; ".join(parts))
        return out

    def _length(self) -> int:
        for arr in (self.title, self.categories, self.year, self.vectors):
            if arr is not None:
                return len(arr)
        return 0


@dataclass(frozen=True)
class Histories:
    """Per-user chronological histories in CSR form.

    ``items[indptr[u]:indptr[u+1]]`` are user ``u``'s items in time order.
    ``indptr`` has length ``n_users + 2`` (row 0 is the padding user, empty).
    """

    indptr: np.ndarray
    items: np.ndarray
    timestamps: np.ndarray
    labels: np.ndarray

    def of(self, user: int) -> np.ndarray:
        """Items of one dense user id, in time order."""
        return self.items[self.indptr[user] : self.indptr[user + 1]]

    def lengths(self) -> np.ndarray:
        """History length per user (index 0 is the padding user)."""
        return np.diff(self.indptr)


@dataclass(frozen=True, eq=False)
class Interactions:
    """A table of user–item interactions in a dense id space.

    Attributes:
        user: dense user id per row, int64 in ``1..n_users``.
        item: dense item id per row, int64 in ``1..n_items``.
        timestamp: float64 per row (row order when the source has none).
        rating: float32 per row, NaN when the source has no rating.
        label: int8 signed label per row (+1 liked, -1 disliked, 0 unknown).
        user_ids: raw user id per dense id (index 0 is ``"[PAD]"``).
        item_ids: raw item id per dense id (index 0 is ``"[PAD]"``).
        item_features: optional :class:`ItemFeatures` aligned with item ids.
        name: a human-readable dataset name used in messages and logs.
    """

    user: np.ndarray
    item: np.ndarray
    timestamp: np.ndarray
    rating: np.ndarray
    label: np.ndarray
    user_ids: np.ndarray
    item_ids: np.ndarray
    item_features: ItemFeatures | None = None
    name: str = "interactions"

    # ------------------------------------------------------------------ build
    @classmethod
    def from_raw(
        cls,
        users: Sequence[Any] | np.ndarray,
        items: Sequence[Any] | np.ndarray,
        timestamps: Sequence[float] | np.ndarray | None = None,
        ratings: Sequence[float] | np.ndarray | None = None,
        labels: Sequence[int] | np.ndarray | None = None,
        *,
        item_features: dict[Any, dict[str, Any]] | None = None,
        name: str = "interactions",
        user_prefix: str = "",
        item_prefix: str = "",
    ) -> "Interactions":
        """Build from raw ids (any hashable values, stringified).

        Dense ids are assigned in order of first appearance. Integer id arrays
        are mapped as integers (no per-row strings); only the distinct ids
        become the strings of ``user_ids``/``item_ids``, which equal what
        stringifying every row would give. ``user_prefix``/``item_prefix`` are
        put in front of every raw id in those maps (the synthetic generator's
        ``"u7"``/``"i12"``), so integer ids can carry a readable name without a
        string per row. ``item_features`` maps a raw item id (as it appears in
        ``item_ids``) to a dict with optional keys ``title``, ``categories``,
        ``year``; items without an interaction are dropped.
        Labels default to 0 (unknown); use :func:`recframe.data.filters.signed_labels`
        to derive them from ratings.
        """
        users = np.asarray(users)
        items = np.asarray(items)
        n = len(users)
        if len(items) != n:
            raise DataError(f"{name}: {n} user ids but {len(items)} item ids; every row needs both.")
        if n == 0:
            raise DataError(f"{name}: no interactions. Check the source file and the filters applied.")
        u_raw, u_dense = dense_ids(users, user_prefix)
        i_raw, i_dense = dense_ids(items, item_prefix)
        ts = np.arange(n, dtype=np.float64) if timestamps is None else np.asarray(timestamps, np.float64)
        if not np.isfinite(ts).all():
            row = int(np.flatnonzero(~np.isfinite(ts))[0])
            raise DataError(f"{name}: timestamp of row {row} is {ts[row]}; every timestamp must be a finite "
                            f"number ({int((~np.isfinite(ts)).sum())} rows are not). Fix or drop those rows.")
        rt = np.full(n, np.nan, np.float32) if ratings is None else np.asarray(ratings, np.float32)
        lb = np.zeros(n, dtype=np.int8) if labels is None else np.asarray(labels, dtype=np.int8)
        feats = None
        if item_features:
            feats = _features_from_dict(item_features, i_raw[1:])
        inter = cls(
            user=u_dense,
            item=i_dense,
            timestamp=ts,
            rating=rt,
            label=lb,
            user_ids=u_raw,
            item_ids=i_raw,
            item_features=feats,
            name=name,
        )
        return inter._sorted()

    def _sorted(self) -> "Interactions":
        """Rows ordered by (user, timestamp), stable in file order on ties."""
        order = sort_order(self.user, self.timestamp)
        return self if order is None else self._take(order)

    def _take(self, index: np.ndarray) -> "Interactions":
        return replace(
            self,
            user=self.user[index],
            item=self.item[index],
            timestamp=self.timestamp[index],
            rating=self.rating[index],
            label=self.label[index],
        )

    # ------------------------------------------------------------ properties
    @property
    def n_users(self) -> int:
        """Number of real users (dense ids ``1..n_users``)."""
        return len(self.user_ids) - 1

    @property
    def n_items(self) -> int:
        """Number of real items (dense ids ``1..n_items``)."""
        return len(self.item_ids) - 1

    def __len__(self) -> int:
        return len(self.user)

    def __repr__(self) -> str:
        return (
            f"Interactions(name={self.name!r}, rows={len(self)}, users={self.n_users}, "
            f"items={self.n_items}, liked={int((self.label > 0).sum())}, "
            f"disliked={int((self.label < 0).sum())})"
        )

    @cached_property
    def histories(self) -> Histories:
        """CSR histories by user, in time order (built once, cached)."""
        counts = np.bincount(self.user, minlength=self.n_users + 1)
        indptr = np.zeros(self.n_users + 2, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        # rows are already sorted by (user, time), so CSR is a view of them
        return Histories(indptr=indptr, items=self.item, timestamps=self.timestamp, labels=self.label)

    @cached_property
    def fingerprint(self) -> str:
        """sha256 over ids, timestamps, ratings, labels and raw-id maps (16 hex chars)."""
        h = hashlib.sha256()
        for arr in (self.user, self.item, self.timestamp, self.rating, self.label):
            h.update(np.ascontiguousarray(arr).tobytes())
        h.update("\x1f".join(self.user_ids.tolist()).encode())
        h.update("\x1f".join(self.item_ids.tolist()).encode())
        return h.hexdigest()[:16]

    def item_popularity(self) -> np.ndarray:
        """Interaction count per dense item id (index 0 is padding = 0)."""
        return np.bincount(self.item, minlength=self.n_items + 1)

    # --------------------------------------------------------------- lookups
    @cached_property
    def _user_lookup(self) -> dict[str, int]:
        return {raw: i for i, raw in enumerate(self.user_ids) if i > 0}

    @cached_property
    def _item_lookup(self) -> dict[str, int]:
        return {raw: i for i, raw in enumerate(self.item_ids) if i > 0}

    def user_index(self, raw: Any) -> int:
        """Dense id of a raw user id; raises ``KeyError`` naming the id."""
        try:
            return self._user_lookup[str(raw)]
        except KeyError:
            raise KeyError(f"unknown user {raw!r} in dataset {self.name!r}") from None

    def item_index(self, raw: Any) -> int:
        """Dense id of a raw item id; raises ``KeyError`` naming the id."""
        try:
            return self._item_lookup[str(raw)]
        except KeyError:
            raise KeyError(f"unknown item {raw!r} in dataset {self.name!r}") from None

    # ----------------------------------------------------------------- views
    def select(self, mask: np.ndarray) -> "Interactions":
        """A new table with the rows where ``mask`` is true, same id space."""
        mask = np.asarray(mask)
        return self._take(np.flatnonzero(mask) if mask.dtype == bool else mask)

    def with_labels(self, labels: np.ndarray) -> "Interactions":
        """A copy with new signed labels."""
        return replace(self, label=np.asarray(labels, dtype=np.int8))

    def concat(self, other: "Interactions") -> "Interactions":
        """Rows of both tables (same id space required), re-sorted by (user, time)."""
        if other.item_ids is not self.item_ids and not np.array_equal(other.item_ids, self.item_ids):
            raise DataError("concat needs two views of the same dataset (their item id maps differ)")
        merged = replace(
            self,
            user=np.concatenate([self.user, other.user]),
            item=np.concatenate([self.item, other.item]),
            timestamp=np.concatenate([self.timestamp, other.timestamp]),
            rating=np.concatenate([self.rating, other.rating]),
            label=np.concatenate([self.label, other.label]),
        )
        return merged._sorted()

    def compact(self) -> "Interactions":
        """Re-index to drop users/items with no remaining rows (after filtering).

        First-appearance order of the surviving ids is preserved. Item features
        follow their items.
        """
        keep_u = np.unique(self.user)
        keep_i = np.unique(self.item)
        if len(keep_u) == self.n_users and len(keep_i) == self.n_items:
            return self
        u_map = np.zeros(self.n_users + 1, dtype=np.int64)
        u_map[keep_u] = np.arange(1, len(keep_u) + 1)
        i_map = np.zeros(self.n_items + 1, dtype=np.int64)
        i_map[keep_i] = np.arange(1, len(keep_i) + 1)
        rows_i = np.concatenate([[0], keep_i])
        feats = self.item_features
        if feats is not None:
            feats = ItemFeatures(
                title=None if feats.title is None else feats.title[rows_i],
                categories=None if feats.categories is None else [feats.categories[i] for i in rows_i],
                year=None if feats.year is None else feats.year[rows_i],
                vectors=None if feats.vectors is None else feats.vectors[rows_i],
                extra={k: v[rows_i] for k, v in feats.extra.items()},
            )
        return replace(
            self,
            user=u_map[self.user],
            item=i_map[self.item],
            user_ids=self.user_ids[np.concatenate([[0], keep_u])],
            item_ids=self.item_ids[rows_i],
            item_features=feats,
        )._sorted()


def dense_ids(raw: np.ndarray, prefix: str = "") -> tuple[np.ndarray, np.ndarray]:
    """Dense ids ``1..k`` in order of first appearance, and the raw-id map.

    Returns ``(id_map, dense)``: ``id_map`` is an object array of ``k + 1``
    strings (``"[PAD]"`` then ``prefix + str(raw id)`` in order of first
    appearance) and ``dense`` the int64 dense id of every row.

    Integer arrays are factorised as integers (one hash pass, no string per
    row) and only the ``k`` distinct values are stringified; arrays of Python
    strings are factorised as they are; anything else (floats, bools, mixed
    objects) is stringified row by row first, as every raw id is compared as
    its string. All three give the same ids and maps as stringifying every row
    and ranking the distinct strings by first appearance.
    """
    if raw.dtype.kind not in "iuUO" or (raw.dtype.kind == "O" and pd.api.types.infer_dtype(
            raw, skipna=False) != "string"):
        raw = raw.astype(str)
    codes, uniques = pd.factorize(raw, sort=False, use_na_sentinel=False)
    dense = codes.astype(np.int64, copy=False)
    dense += 1
    names = uniques.astype(str) if uniques.dtype.kind in "iu" else uniques
    if prefix:
        names = np.char.add(prefix, names.astype(str))
    id_map = np.empty(len(uniques) + 1, dtype=object)
    id_map[0] = PAD
    id_map[1:] = names
    return id_map, dense


def sort_order(user: np.ndarray, timestamp: np.ndarray) -> np.ndarray | None:
    """The stable (user, timestamp) order of the rows, or ``None`` when they already are in it.

    One linear pass checks the order first, so sorted sources (the synthetic
    generator, most logs) skip the ``O(n log n)`` lexsort and its index array.
    Ties in time keep their row order (lexsort is stable).
    """
    if len(user) < 2:
        return None
    u0, u1 = user[:-1], user[1:]
    ordered = u1 > u0
    ordered |= (u1 == u0) & (timestamp[1:] >= timestamp[:-1])
    if ordered.all():
        return None
    return np.lexsort((timestamp, user))


def _features_from_dict(features: dict[Any, dict[str, Any]], item_raw: np.ndarray) -> ItemFeatures:
    n = len(item_raw) + 1
    lookup = {str(k): v for k, v in features.items()}
    title = np.full(n, "", dtype=object)
    cats: list[list[str]] = [[] for _ in range(n)]
    year = np.zeros(n, dtype=np.int64)
    has = {"title": False, "categories": False, "year": False}
    for i, raw in enumerate(item_raw, start=1):
        row = lookup.get(str(raw))
        if not row:
            continue
        if row.get("title") is not None:
            title[i] = str(row["title"])
            has["title"] = True
        if row.get("categories"):
            cats[i] = [str(c) for c in row["categories"]]
            has["categories"] = True
        if row.get("year"):
            year[i] = int(row["year"])
            has["year"] = True
    return ItemFeatures(
        title=title if has["title"] else None,
        categories=cats if has["categories"] else None,
        year=year if has["year"] else None,
    )
