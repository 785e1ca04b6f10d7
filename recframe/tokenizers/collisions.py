"""Collisions of semantic-ID paths and their resolution by an extra disambiguation level.

Two items *collide* when they share the full code path produced by a tokenizer. TIGER (Rajput
et al., 2023) makes paths unique by appending one more level: within each group of colliding
items a counter ``0, 1, 2, ...`` (here in increasing item order, so the result is
deterministic); items without a collision get ``0``. The new level's size is the largest group.
When no two items collide no level is appended (it would be all zeros and carry nothing).
"""

from __future__ import annotations

import numpy as np


def path_groups(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(group, group_size)`` per item: the id of its path (0..n_paths-1) and how many items share it.

    ``codes``: int ``[n, L]``, real items only (no padding row).
    """
    codes = _check_codes(codes)
    _, group, counts = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
    group = group.reshape(-1)
    return group, counts[group]


def collision_counter(codes: np.ndarray) -> np.ndarray:
    """Per item, its rank ``0, 1, ...`` among the items sharing its path (in item order)."""
    group, _ = path_groups(codes)
    order = np.argsort(group, kind="stable")  # items grouped by path, item order kept within a group
    sorted_group = group[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_group)) + 1]
    first = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    counter = np.empty(len(order), dtype=np.int64)
    counter[order] = np.arange(len(order)) - first
    return counter


def disambiguate(codes: np.ndarray) -> tuple[np.ndarray, int]:
    """Append a disambiguation level when paths collide.

    Returns ``(codes_out, level_size)``: ``codes_out`` is ``codes`` with the counter column of
    :func:`collision_counter` appended and ``level_size`` the largest collision group, or
    ``codes`` unchanged and ``level_size == 0`` when every path is already unique.
    """
    codes = _check_codes(codes)
    counter = collision_counter(codes)
    size = int(counter.max()) + 1 if len(counter) else 1
    if size == 1:
        return codes.copy(), 0
    return np.concatenate([codes, counter[:, None]], axis=1), size


def _check_codes(codes: np.ndarray) -> np.ndarray:
    codes = np.asarray(codes)
    if codes.ndim != 2 or not np.issubdtype(codes.dtype, np.integer):
        raise ValueError(f"codes must be an integer matrix [n_items, L]; got shape {codes.shape}, "
                         f"dtype {codes.dtype}.")
    return codes.astype(np.int64, copy=False)
