"""Per-row seen-item exclusion: parse the caller's sets once, filter over-fetched candidates vectorised.

An exclusion set is stored as one sorted array of keys ``row * (n_items + 1) + item``; a
candidate ``(row, item)`` is excluded when its key is found by ``np.searchsorted``. Filtering a
``[R, k_fetch]`` candidate block is then a handful of whole-array numpy operations, with no
per-row Python loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: What ``ItemIndex.search(..., exclude=...)`` accepts: ``None``; a CSR tuple ``(indptr, indices)``
#: (``indptr`` of length ``B + 1``); a ``scipy.sparse`` matrix with ``B`` rows (its column indices
#: are item ids); or a list of ``B`` id arrays. A *tuple* is always read as CSR, a *list* as rows.
Exclusions = Any  # None | tuple[indptr, indices] | scipy.sparse matrix | Sequence[id array]


@dataclass(frozen=True)
class ExclusionSet:
    """Normalised exclusions for ``n_rows`` query rows over items ``1..n_items``.

    Attributes:
        keys: sorted unique ``int64`` keys ``row * (n_items + 1) + item`` (padding id 0 dropped).
        per_row: ``int64 [n_rows]`` number of distinct excluded real items of each row.
        n_items: catalogue size.
    """

    keys: np.ndarray
    per_row: np.ndarray
    n_items: int

    def contains(self, rows: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Boolean mask, shaped like ``items``, of the pairs ``(rows[i], items[i, j])`` that are excluded."""
        if self.keys.size == 0:
            return np.zeros(items.shape, dtype=bool)
        key = rows.astype(np.int64)[:, None] * (self.n_items + 1) + items
        pos = np.minimum(np.searchsorted(self.keys, key), self.keys.size - 1)
        return self.keys[pos] == key


def as_exclusion_set(exclude: Exclusions, n_rows: int, n_items: int) -> ExclusionSet:
    """Validate and normalise ``exclude`` for ``n_rows`` queries (see :data:`Exclusions`)."""
    empty = ExclusionSet(np.empty(0, np.int64), np.zeros(n_rows, np.int64), n_items)
    if exclude is None:
        return empty
    indptr, indices = _to_csr(exclude, n_rows)
    if indices.size == 0:
        return empty
    if indices.min() < 0 or indices.max() > n_items:
        bad = int(indices[(indices < 0) | (indices > n_items)][0])
        raise ValueError(f"exclude holds item id {bad}, outside 0..n_items={n_items}; item ids are "
                         "1..n_items (0 is padding and is ignored). Pass the ids of this index's catalogue.")
    rows = np.repeat(np.arange(n_rows, dtype=np.int64), np.diff(indptr))
    keys = np.unique(rows * (n_items + 1) + indices)
    keys = keys[keys % (n_items + 1) != 0]
    per_row = np.bincount(keys // (n_items + 1), minlength=n_rows).astype(np.int64)
    return ExclusionSet(keys, per_row, n_items)


def select_top_k(labels: np.ndarray, scores: np.ndarray, rows: np.ndarray, excl: ExclusionSet,
                 k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keep, per row and in the given order, the first ``k`` candidates that are real and not excluded.

    Args:
        labels: ``[R, k_fetch]`` FAISS labels (internal position ``i`` is item ``i + 1``; ``-1`` is none).
        scores: ``[R, k_fetch]`` their scores, best first.
        rows: ``[R]`` the query-row number of each candidate row (to look up its exclusions).
        excl: the normalised exclusions.
        k: how many to keep.

    Returns:
        ``(items int64 [R, k], scores float32 [R, k], counts int64 [R])``; entries past ``counts``
        are item 0 with score ``-inf``.
    """
    n_rows = labels.shape[0]
    ids = labels.astype(np.int64) + 1
    valid = labels >= 0
    valid &= ~excl.contains(rows, ids)
    rank = np.cumsum(valid, axis=1) - 1
    keep = valid & (rank < k)
    r, c = np.nonzero(keep)
    out_items = np.zeros((n_rows, k), dtype=np.int64)
    out_scores = np.full((n_rows, k), -np.inf, dtype=np.float32)
    out_items[r, rank[r, c]] = ids[r, c]
    out_scores[r, rank[r, c]] = scores[r, c]
    return out_items, out_scores, keep.sum(axis=1).astype(np.int64)


def _to_csr(exclude: Exclusions, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    if hasattr(exclude, "indptr") and hasattr(exclude, "indices") and hasattr(exclude, "shape"):
        if exclude.shape[0] != n_rows:
            raise ValueError(f"exclude is a sparse matrix with {exclude.shape[0]} rows but there are "
                             f"{n_rows} queries; pass one row of seen items per query.")
        exclude = exclude.tocsr() if hasattr(exclude, "tocsr") else exclude
        indptr, indices = _int_array(exclude.indptr, "exclude.indptr"), _int_array(exclude.indices,
                                                                                   "exclude.indices")
    elif isinstance(exclude, tuple):
        if len(exclude) != 2:
            raise ValueError(f"exclude is a tuple of {len(exclude)} items; a tuple must be the CSR pair "
                             "(indptr, indices). Pass a list for one id array per query.")
        indptr, indices = _int_array(exclude[0], "exclude indptr"), _int_array(exclude[1], "exclude indices")
    elif isinstance(exclude, Sequence) and not isinstance(exclude, (str, bytes)):
        if len(exclude) != n_rows:
            raise ValueError(f"exclude lists {len(exclude)} id arrays but there are {n_rows} queries; "
                             "pass one (possibly empty) array of seen items per query.")
        parts = [_int_array(ids, f"exclude[{i}]") for i, ids in enumerate(exclude)]
        indptr = np.zeros(n_rows + 1, dtype=np.int64)
        np.cumsum([p.size for p in parts], out=indptr[1:])
        indices = np.concatenate(parts) if parts else np.empty(0, np.int64)
    else:
        raise ValueError(f"exclude has type {type(exclude).__name__}; pass None, a CSR tuple "
                         "(indptr, indices), a scipy.sparse matrix, or a list of id arrays (one per query).")
    if indptr.shape != (n_rows + 1,):
        raise ValueError(f"exclude indptr has shape {indptr.shape}; for {n_rows} queries it must have "
                         f"{n_rows + 1} entries (CSR: row i's ids are indices[indptr[i]:indptr[i + 1]]).")
    if indptr[0] != 0 or indptr[-1] != indices.size or (np.diff(indptr) < 0).any():
        raise ValueError("exclude indptr must start at 0, never decrease and end at len(indices) "
                         f"(got start {indptr[0]}, end {indptr[-1]}, len(indices) {indices.size}).")
    return indptr, indices


def _int_array(values: Any, name: str) -> np.ndarray:
    if hasattr(values, "detach"):  # torch tensor
        values = values.detach().cpu().numpy()
    arr = np.asarray(values)
    if arr.size == 0:
        return np.empty(0, np.int64)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be a 1-D array of integer item ids; got dtype {arr.dtype}, "
                         f"shape {arr.shape}.")
    return arr.astype(np.int64, copy=False)
