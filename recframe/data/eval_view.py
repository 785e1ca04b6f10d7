"""``EvaluationView``: the read-only evaluation data a callback may use.

Callbacks that run around training (DESIGN "Seams": a ``ReportCallback`` reading the
evaluation-data view) need the users of a stage, what the model may see of them, their
held-out items and the item side information. They get all of it from
``RecDataModule.eval_view(stage)`` and never from ``dm.split``, so the datamodule's
internals can change without breaking them, and a callback cannot change the data the
model is evaluated on:

* every array is a read-only numpy view (``writeable=False``; assigning into it raises),
  titles and categories are tuples, ``extra`` features a read-only mapping;
* :meth:`EvaluationView.batches` yields fresh tensors, built by the same code as the
  datamodule's ``val_dataloader`` / ``test_dataloader``, with the same keys and dtypes
  (``users``, ``history``, ``seen``, ``targets``, ``labels``): exactly what ``model.score``
  takes.

Ids: *dense* ids index the model's score columns (items ``1..n_items``, 0 is padding) and
users ``1..n_users``; *raw* ids are the dataset's own strings.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch

from recframe.data.interactions import DataError, Histories, ItemFeatures

if TYPE_CHECKING:
    from recframe.data.datamodule import EvalSet


def read_only(arr: np.ndarray) -> np.ndarray:
    """A view of ``arr`` that raises on assignment (``arr`` itself stays as it was)."""
    out = np.asarray(arr).view()
    out.flags.writeable = False
    return out


def _read_only_histories(h: Histories) -> Histories:
    return Histories(indptr=read_only(h.indptr), items=read_only(h.items),
                     timestamps=read_only(h.timestamps), labels=read_only(h.labels))


def _read_only_features(f: ItemFeatures | None) -> ItemFeatures | None:
    if f is None:
        return None
    return ItemFeatures(
        title=None if f.title is None else read_only(f.title),
        categories=None if f.categories is None else tuple(tuple(c) for c in f.categories),  # type: ignore[arg-type]
        year=None if f.year is None else read_only(f.year),
        vectors=None if f.vectors is None else read_only(f.vectors),
        extra=MappingProxyType({k: read_only(v) for k, v in (f.extra or {}).items()}),  # type: ignore[arg-type]
    )


class EvaluationView:
    """Read-only evaluation data of one stage (module docstring).

    Built by :meth:`recframe.data.datamodule.RecDataModule.eval_view`; not meant to be
    constructed by hand.

    Attributes:
        stage: ``"valid"`` or ``"test"``.
        n_items: number of real items; score rows have ``n_items + 1`` columns.
        n_users: number of real users.
        max_len: the datamodule's history length (default of :meth:`batches`).
        batch_size: the datamodule's evaluation batch size (default of :meth:`batches`).
        users: dense ids of the stage's users (those with a held-out item), in loader order.
        raw_users: their raw ids, aligned with ``users``.
        histories: CSR by dense user id of what the model may see at this stage
            (training at ``valid``; training + validation at ``test``); these items are masked
            in evaluation.
        heldout: CSR by dense user id of the stage's held-out items and their signed labels.
        item_ids: raw id of every dense item id (index 0 is padding).
        item_features: the items' side features (``None`` when the data has none).
        item_titles: one title per dense item id (``None`` when the data has none).
        item_popularity: training interactions per dense item id (index 0 is 0).
    """

    def __init__(self, stage: Literal["valid", "test"], eval_set: EvalSet, *, n_items: int, n_users: int,
                 max_len: int, batch_size: int, user_ids: np.ndarray, item_ids: np.ndarray,
                 item_features: ItemFeatures | None, item_popularity: np.ndarray) -> None:
        self._eval_set = eval_set
        self.stage = stage
        self.n_items = int(n_items)
        self.n_users = int(n_users)
        self.max_len = int(max_len)
        self.batch_size = int(batch_size)
        self.users = read_only(eval_set.users)
        self.raw_users = read_only(np.asarray(user_ids)[eval_set.users])
        self.histories = _read_only_histories(eval_set.known)
        self.heldout = _read_only_histories(eval_set.heldout)
        self.item_ids = read_only(item_ids)
        self.item_features = _read_only_features(item_features)
        titles = None if item_features is None else item_features.title
        self.item_titles: tuple[str, ...] | None = None if titles is None else tuple(str(t) for t in titles)
        self.item_popularity = read_only(item_popularity)

    def __len__(self) -> int:
        """Number of users evaluated at this stage."""
        return len(self.users)

    def __setattr__(self, name: str, value: object) -> None:
        if name in self.__dict__:
            raise AttributeError(f"EvaluationView is read-only; {name!r} cannot be replaced.")
        super().__setattr__(name, value)

    def history(self, user: int, raw: bool = False) -> np.ndarray:
        """Items the model may see of dense user ``user``, oldest first (raw ids when ``raw``)."""
        items = self.histories.of(int(user))
        return self.item_ids[items] if raw else items

    def targets(self, user: int, raw: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Held-out items of dense user ``user`` (raw ids when ``raw``) and their signed labels."""
        lo, hi = self.heldout.indptr[int(user)], self.heldout.indptr[int(user) + 1]
        items = self.heldout.items[lo:hi]
        return (self.item_ids[items] if raw else items), self.heldout.labels[lo:hi]

    def batches(self, max_len: int | None = None, size: int | None = None,
                device: torch.device | str | None = None) -> Iterator[dict[str, torch.Tensor]]:
        """The stage's users in loader order, ``size`` at a time, as ``model.score`` batches.

        Keys and dtypes are those of the datamodule's evaluation loader: ``users`` int64
        ``[B]``, ``history`` int64 ``[B, <= max_len]`` (left-padded, most recent last),
        ``seen`` int64 (every visible item, to mask), ``targets`` int64 and ``labels`` int8
        (right-padded). Each batch is a fresh copy, moved to ``device`` when given.

        Args:
            max_len: history length (default: the datamodule's ``max_len``).
            size: users per batch (default: the datamodule's ``eval_batch_size``).
            device: where to put the tensors (default: CPU).
        """
        max_len = self.max_len if max_len is None else int(max_len)
        size = self.batch_size if size is None else int(size)
        if max_len < 1 or size < 1:
            raise DataError(f"EvaluationView.batches needs max_len >= 1 and size >= 1, got "
                            f"max_len={max_len}, size={size}.")
        for start in range(0, len(self.users), size):
            idx = list(range(start, min(start + size, len(self.users))))
            batch = self._eval_set.batch(idx, max_len)
            yield batch if device is None else {k: v.to(device) for k, v in batch.items()}


__all__ = ["EvaluationView", "read_only"]
