"""Train/validation/test splits. Each returns new :class:`Interactions` views.

All splits work on the per-user chronological order of :class:`Interactions`
(stable on timestamp ties), never mutate their input, and never let a held-out
interaction reach training (``tests/data/test_splits.py`` checks this for every
split).

* :func:`leave_one_out` — last interaction of each user is the test target,
  the second last the validation target (RecBole's ``LS`` with ``valid_and_test``).
* :func:`chronological_ratio` — per user, the first ``train`` share of the
  history trains, the next ``valid`` share validates, the rest is held out for
  test. This is the signed protocol: *all* of a user's last interactions are
  held out, liked and disliked alike.
* :func:`time_stages` — global-time stages for continual learning.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from recframe.data.interactions import DataError, Interactions


@dataclass(frozen=True)
class Split:
    """Three disjoint views of one dataset in one id space."""

    train: Interactions
    valid: Interactions
    test: Interactions
    protocol: str

    def __post_init__(self) -> None:
        for part, inter in (("train", self.train), ("valid", self.valid), ("test", self.test)):
            if len(inter) == 0:
                raise DataError(
                    f"{self.train.name}: the {part} part of the {self.protocol} split is empty; "
                    "users need more interactions (lower the k-core threshold or use a different split)."
                )


def _positions(inter: Interactions) -> tuple[np.ndarray, np.ndarray]:
    """Per row: its 0-based position in the user's history and the history length."""
    indptr = inter.histories.indptr
    lengths = np.diff(indptr)[inter.user]
    pos = np.arange(len(inter)) - indptr[inter.user]
    return pos, lengths


def leave_one_out(inter: Interactions, min_train: int = 1) -> Split:
    """Last item → test, second last → validation, the rest → train.

    Users with fewer than ``min_train + 2`` interactions keep everything in
    train (they still receive recommendations but are not evaluated), as
    RecBole does for users too short to split.
    """
    pos, length = _positions(inter)
    splittable = length >= min_train + 2
    test = splittable & (pos == length - 1)
    valid = splittable & (pos == length - 2)
    train = ~(test | valid)
    return Split(inter.select(train), inter.select(valid), inter.select(test), "leave-one-out")


def chronological_ratio(
    inter: Interactions, train: float = 0.8, valid: float = 0.1, min_length: int = 3
) -> Split:
    """Per-user chronological split by ratio.

    For a user with ``n`` interactions: ``n_train = max(1, floor(train * n))``,
    ``n_valid = floor(valid * n)`` (at least 1 when ``valid > 0``), the rest
    (at least 1) is test. Users with fewer than ``min_length`` interactions
    stay entirely in train.
    """
    if not (0 < train < 1 and 0 <= valid < 1 and train + valid < 1):
        raise DataError(
            f"chronological_ratio: train={train}, valid={valid} must satisfy 0<train, 0<=valid, "
            "train+valid<1 (the rest is test)."
        )
    pos, length = _positions(inter)
    n_train = np.maximum(1, np.floor(train * length)).astype(np.int64)
    n_valid = np.floor(valid * length).astype(np.int64)
    if valid > 0:
        n_valid = np.maximum(1, n_valid)
    n_train = np.minimum(n_train, np.maximum(1, length - n_valid - 1))
    splittable = length >= min_length
    is_train = (~splittable) | (pos < n_train)
    is_valid = splittable & (pos >= n_train) & (pos < n_train + n_valid)
    is_test = splittable & (pos >= n_train + n_valid)
    return Split(inter.select(is_train), inter.select(is_valid), inter.select(is_test), "chronological-ratio")


def time_stage_of(timestamps: np.ndarray, n_stages: int) -> np.ndarray:
    """The one stage rule: stage ``s`` of each timestamp under global-time quantile edges ``t_0..t_n``.

    ``t_s = quantile(timestamps, s / n_stages)``; a timestamp is in stage ``s`` when
    ``t_s <= timestamp < t_{s+1}`` (the last stage includes the maximum). int64 in ``0..n_stages-1``.
    """
    edges = np.quantile(timestamps, np.linspace(0.0, 1.0, n_stages + 1))
    return np.clip(np.searchsorted(edges, timestamps, side="right") - 1, 0, n_stages - 1).astype(np.int64)


def time_stages(inter: Interactions, n_stages: int = 4) -> list[Interactions]:
    """Cut the data at global-time quantiles into ``n_stages`` consecutive stages.

    Stage ``s`` holds the interactions with ``t_{s} <= timestamp < t_{s+1}``
    (the last stage includes the maximum). All stages share one id space, so a
    model trained on stage ``s`` can be evaluated on stage ``s+1``.
    """
    if n_stages < 1:
        raise DataError(f"time_stages: n_stages={n_stages}; it must be >= 1.")
    stage = time_stage_of(inter.timestamp, n_stages)
    stages = [inter.select(stage == s) for s in range(n_stages)]
    for s, part in enumerate(stages):
        if len(part) == 0:
            raise DataError(
                f"{inter.name}: time stage {s} of {n_stages} is empty (many equal timestamps); "
                "use fewer stages."
            )
    return stages


SPLITS = {"loo": leave_one_out, "leave_one_out": leave_one_out, "ratio": chronological_ratio}
"""The split protocols by name; :func:`make_split` is the one place that dispatches on them."""


def make_split(inter: Interactions, protocol: str, *, ratio: Sequence[float] | None = None,
               **kwargs: float) -> Split:
    """The one split dispatcher: the protocol named ``protocol`` applied to ``inter``.

    * ``"loo"`` / ``"leave_one_out"``: :func:`leave_one_out` (keyword ``min_train``);
    * ``"ratio"``: :func:`chronological_ratio` (keywords ``train``, ``valid``, ``min_length``).

    ``ratio=(train, valid)`` is the datamodule's ``data.ratio``: the shares of ``"ratio"``; protocols without
    shares (leave-one-out) ignore it. Other ``kwargs`` go to the split; an unknown protocol or keyword raises
    one :class:`DataError` naming it and the valid choices.
    """
    try:
        fn = SPLITS[protocol]
    except (KeyError, TypeError):
        raise DataError(f"unknown split {protocol!r}; choose one of {sorted(SPLITS)}") from None
    accepted = [name for name in inspect.signature(fn).parameters if name != "inter"]
    if ratio is not None and fn is chronological_ratio:
        if len(ratio) != 2:
            raise DataError(f"ratio={tuple(ratio)}; give (train, valid) shares, e.g. ratio=(0.8, 0.1).")
        kwargs = {"train": float(ratio[0]), "valid": float(ratio[1]), **kwargs}
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise DataError(f"split {protocol!r} has no setting {unknown[0]!r}; its settings: {accepted}")
    return fn(inter, **kwargs)
