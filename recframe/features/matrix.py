"""Validation of item feature matrices (the input of every semantic-ID tokenizer)."""

from __future__ import annotations

from typing import Any

import numpy as np


def as_feature_matrix(x: Any, *, has_padding_row: bool = True) -> np.ndarray:
    """Any item feature matrix as float32, C order, ``[n_items + 1, d]`` with row 0 zeros.

    Args:
        x: array-like or tensor ``[n_items + 1, d]`` whose row 0 is the padding item (all zeros),
            or ``[n_items, d]`` with ``has_padding_row=False`` (a zero row is then prepended).
        has_padding_row: whether row 0 of ``x`` is already the padding item.

    Raises:
        ValueError: not 2-D, no real item, non-finite values, or a non-zero row 0.
    """
    if hasattr(x, "detach"):  # torch tensor
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise ValueError(f"item features must be a 2-D matrix [n_items + 1, d]; got shape {arr.shape}.")
    if not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
            or arr.dtype == np.bool_):
        raise ValueError(f"item features must be numeric; got dtype {arr.dtype}.")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if not has_padding_row:
        arr = np.concatenate([np.zeros((1, arr.shape[1]), dtype=np.float32), arr])
    if arr.shape[0] < 2:
        raise ValueError(f"item features need at least one real item after the padding row; got shape "
                         f"{arr.shape}.")
    if not np.isfinite(arr).all():
        bad = int(np.argwhere(~np.isfinite(arr))[0, 0])
        raise ValueError(f"item features contain NaN or inf (first at row {bad}); clean or impute them "
                         "first.")
    if arr[0].any():
        raise ValueError("row 0 of the item feature matrix is the padding item and must be all zeros; if the "
                         "matrix has one row per real item, pass has_padding_row=False (a zero row is then "
                         "prepended).")
    return arr
