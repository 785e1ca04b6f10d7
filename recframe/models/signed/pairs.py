"""Signed training pairs: the labelled user–item pairs of a split, looked up and sampled on any device.

Shared by the sign-aware models (:mod:`recframe.models.signed.base`), the valence add-on
(:mod:`recframe.models.signed.valence`) and the valence probe (:mod:`recframe.models.signed.probe`).

A pair is keyed ``user * (n_items + 1) + item`` (int64), the key of
:class:`recframe.data.batches.NegativeSampler`, so sorted key tensors answer membership and label queries
with one ``torch.searchsorted``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor


def signed_pairs(inter: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unique ``(users, items, labels)`` of an ``Interactions``, each pair with its **latest** label.

    A pair rated more than once (rare: exact duplicates are dropped by the datamodule) keeps the label of
    its last row in time order (rows are sorted by user, then time), the user's most recent opinion.
    Labels: +1 liked, -1 disliked, 0 neither (e.g. rating 3). Sorted by pair key.
    """
    users = np.asarray(inter.user, dtype=np.int64)
    items = np.asarray(inter.item, dtype=np.int64)
    labels = np.asarray(inter.label, dtype=np.int8)
    keys = users * (int(inter.n_items) + 1) + items
    # np.unique keeps the first occurrence: run it on the reversed rows to keep the last
    _, first_of_reversed = np.unique(keys[::-1], return_index=True)
    last = len(keys) - 1 - first_of_reversed
    return users[last], items[last], labels[last]


def pair_keys(users: Tensor, items: Tensor, n_items: int) -> Tensor:
    """int64 keys ``users * (n_items + 1) + items`` (same shape as the inputs)."""
    return users.long() * (n_items + 1) + items.long()


def lookup(sorted_keys: Tensor, values: Tensor, keys: Tensor, missing: int = 0) -> Tensor:
    """``values`` of ``keys`` in ``sorted_keys`` (ascending, unique), ``missing`` where a key is absent."""
    if sorted_keys.numel() == 0:
        return torch.full_like(keys, missing, dtype=values.dtype)
    pos = torch.searchsorted(sorted_keys, keys).clamp(max=sorted_keys.numel() - 1)
    found = sorted_keys[pos] == keys
    return torch.where(found, values[pos], torch.full_like(values[pos], missing))


def contains(sorted_keys: Tensor, keys: Tensor) -> Tensor:
    """bool: whether each of ``keys`` is in ``sorted_keys`` (ascending)."""
    if sorted_keys.numel() == 0:
        return torch.zeros_like(keys, dtype=torch.bool)
    pos = torch.searchsorted(sorted_keys, keys).clamp(max=sorted_keys.numel() - 1)
    return sorted_keys[pos] == keys


def sample_unobserved(users: Tensor, n: int, n_items: int, known_keys: Tensor, tries: int = 20) -> Tensor:
    """``[len(users), n]`` items drawn uniformly from ``1..n_items`` outside each user's known pairs.

    A draw that hits a known pair (``known_keys``: sorted keys of the user's training items) is redrawn, up
    to ``tries`` rounds; a rare leftover keeps its draw, as :class:`recframe.data.batches.NegativeSampler`
    does. Uses torch's global generator on ``users``' device (reproducible under ``seed_everything``).
    """
    flat_users = users[:, None].expand(users.shape[0], n).reshape(-1)
    items = torch.randint(1, n_items + 1, flat_users.shape, device=users.device)
    redo = torch.nonzero(contains(known_keys, pair_keys(flat_users, items, n_items))).flatten()
    for _ in range(tries):  # only the draws that hit a known pair are drawn and checked again
        if redo.numel() == 0:
            break
        items[redo] = torch.randint(1, n_items + 1, redo.shape, device=users.device)
        redo = redo[contains(known_keys, pair_keys(flat_users[redo], items[redo], n_items))]
    return items.view(users.shape[0], n)


def padded_histories(indptr: Tensor, items: Tensor, users: Tensor, max_len: int) -> Tensor:
    """``[B, L]`` the last ``L <= max_len`` items of each user's CSR history, left-padded with 0.

    The layout of evaluation batches (:func:`recframe.data.batches.pad_rows`), built with tensor ops on
    ``users``' device; ``L`` is the longest history among ``users`` (at least 1).
    """
    starts, ends = indptr[users], indptr[users + 1]
    starts = torch.maximum(starts, ends - max_len)
    lengths = ends - starts
    width = max(int(lengths.max()) if users.numel() else 0, 1)
    col = torch.arange(width, device=users.device)
    offset = (width - lengths)[:, None]
    src = starts[:, None] + col[None, :] - offset
    valid = col[None, :] >= offset
    out = torch.zeros(users.shape[0], width, dtype=items.dtype, device=users.device)
    out[valid] = items[src[valid]]
    return out


__all__ = ["contains", "lookup", "pair_keys", "padded_histories", "sample_unobserved", "signed_pairs"]
