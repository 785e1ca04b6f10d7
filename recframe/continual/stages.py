"""Time stages for continual recommendation: which rows a model may train on at stage ``t`` and what it is
tested on at stage ``t + 1``.

The data is cut at **global-time quantiles** into ``T`` consecutive stages (``T = 5`` by default): stage
``s`` holds the rows with ``e_s <= timestamp < e_{s+1}`` where ``e = quantile(timestamps, linspace(0, 1,
T + 1))`` (the last stage includes the maximum): the rule :func:`recframe.data.splits.time_stage_of`, which
:func:`recframe.data.splits.time_stages` shares.

Users spanning stages
---------------------
A user's rows are sorted by time, so the rows known at the end of stage ``t`` are a **prefix** of the user's
history. A user active in several stages therefore contributes to each stage exactly the rows whose
timestamps fall in it:

* **training at stage t** counts only targets (next items) in stage ``t``; the user's rows of earlier stages
  may appear as *context* in front of them (they are known by then), rows of later stages never do
  (:meth:`StagedInteractions.stage_windows`);
* **testing at stage t + 1** evaluates the *returning* users: those with at least one row in stage ``t + 1``
  and at least one row in stages ``<= t``. The model reads their whole known history (stages ``<= t``), every
  known item is masked from the ranking, and all their stage-``(t + 1)`` rows are the held-out items
  (``relevance="all"``). A stage-``(t + 1)`` row whose item the user already had before is dropped from the
  targets (a masked item cannot be ranked; ML-100K has none after duplicate removal). Users who first appear
  in stage ``t + 1`` have no history to rank from and are not evaluated (cold start is a different problem).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from recframe.data.batches import SequenceWindows
from recframe.data.datamodule import EvalSet
from recframe.data.interactions import DataError, Histories, Interactions
from recframe.data.splits import time_stage_of

__all__ = ["StagedInteractions", "stage_index", "split_stages"]


def stage_index(timestamps: np.ndarray, n_stages: int) -> np.ndarray:
    """Stage of every timestamp under global-time quantile edges (int64 in ``0..n_stages-1``)."""
    if isinstance(n_stages, bool) or not isinstance(n_stages, (int, np.integer)) or n_stages < 2:
        raise DataError(f"n_stages={n_stages!r}; continual learning needs a whole number of stages >= 2 "
                        "(e.g. n_stages: 5).")
    return time_stage_of(timestamps, n_stages)


def split_stages(inter: Interactions, n_stages: int = 5) -> StagedInteractions:
    """Cut ``inter`` into ``n_stages`` global-time stages (see the module docstring)."""
    stage = stage_index(inter.timestamp, n_stages)
    counts = np.bincount(stage, minlength=n_stages)
    if (counts == 0).any():
        empty = int(np.flatnonzero(counts == 0)[0])
        raise DataError(f"{inter.name}: time stage {empty} of {n_stages} is empty (many equal timestamps); "
                        "use fewer stages (n_stages).")
    return StagedInteractions(inter, stage, n_stages)


@dataclass(frozen=True, eq=False)
class StagedInteractions:
    """One dataset with a stage per row.

    Rows of ``inter`` are sorted by (user, time), so ``stage`` is aligned with the flat CSR arrays of
    ``inter.histories`` and, per user, non-decreasing. Flat row indices are therefore stable ids of
    interactions across all stages (the replay buffer stores them).
    """

    inter: Interactions
    stage: np.ndarray
    n_stages: int

    @property
    def n_items(self) -> int:
        """Number of real items."""
        return self.inter.n_items

    @property
    def histories(self) -> Histories:
        """CSR histories of the whole table (prefixes of them are what each stage knows)."""
        return self.inter.histories

    @cached_property
    def _bounds(self) -> np.ndarray:
        """``[n_users + 1, n_stages + 1]``: flat index where each user's stage-``s`` rows begin.

        ``bounds[u, s]`` is the first row of user ``u`` with stage ``>= s``; ``bounds[u, n_stages]`` is the
        end of the user's rows. Rows of stage ``s`` are ``bounds[u, s]:bounds[u, s + 1]``.
        """
        indptr = self.histories.indptr
        n_rows = len(indptr) - 1
        user = np.repeat(np.arange(n_rows), np.diff(indptr))
        out = np.empty((n_rows, self.n_stages + 1), dtype=np.int64)
        for s in range(self.n_stages + 1):
            # per user, count rows with stage < s (stages are non-decreasing inside a user's rows)
            before = np.bincount(user, weights=(self.stage < s), minlength=n_rows).astype(np.int64)
            out[:, s] = indptr[:-1] + before
        return out

    def rows_upto(self, t: int) -> np.ndarray:
        """Boolean mask of the rows known at the end of stage ``t`` (stages ``<= t``)."""
        self._check_stage(t)
        return self.stage <= t

    def upto(self, t: int) -> Interactions:
        """The rows of stages ``<= t`` (same id space)."""
        return self.inter.select(self.rows_upto(t))

    def of_stage(self, t: int) -> Interactions:
        """The rows of stage ``t`` alone."""
        self._check_stage(t)
        return self.inter.select(self.stage == t)

    def known_end(self, t: int) -> np.ndarray:
        """Per user, the flat index one past their last row of stages ``<= t``."""
        self._check_stage(t)
        return self._bounds[:, t + 1]

    def stage_rows(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Per user, ``(first, end)`` flat indices of their stage-``t`` rows (``first == end``: none)."""
        self._check_stage(t)
        return self._bounds[:, t], self._bounds[:, t + 1]

    # ------------------------------------------------------------ training data
    def stage_windows(self, t: int, max_len: int, stride: int | None = None, cumulative: bool = False
                      ) -> SequenceWindows:
        """Next-item training windows whose counted targets are the rows of stage ``t``.

        Earlier rows of the same user serve as context; no window reaches past the user's last stage-``t``
        row. ``cumulative=True`` counts the targets of every stage ``<= t`` (full retraining). Windows are cut
        from the end backwards exactly as :meth:`recframe.data.batches.SequenceWindows.build` cuts a whole
        history (``stride`` apart, each counting its last ``stride`` targets), limited to the counted range.
        """
        first, end = self.stage_rows(t)
        if cumulative:
            first = self.histories.indptr[:-1].copy()
        lo = self.histories.indptr[:-1]
        return _windows(lo, first, end, max_len, stride)

    def target_windows(self, rows: np.ndarray, max_len: int) -> SequenceWindows:
        """One window per flat row in ``rows`` counting that row alone as the target (replay).

        Its context is the user's ``max_len`` rows before it, all earlier in time than the row.
        """
        rows = np.asarray(rows, dtype=np.int64)
        indptr = self.histories.indptr
        user = np.searchsorted(indptr, rows, side="right") - 1
        lo = indptr[user]
        if (rows <= lo).any():
            raise ValueError("a replayed row must have at least one earlier row of its user as context")
        starts = np.maximum(lo, rows - max_len)
        return SequenceWindows(starts, rows + 1, rows.copy())

    # ------------------------------------------------------------------ testing
    def test_set(self, t: int) -> EvalSet:
        """The evaluation at stage ``t + 1`` of a model updated through stage ``t`` (module docstring).

        ``known`` holds every user's rows of stages ``<= t`` (model input and masked items), ``heldout``
        their stage-``(t + 1)`` rows whose items they had not seen; ``users`` the returning users.
        """
        if not 0 <= t < self.n_stages - 1:
            raise DataError(f"test_set(t={t}): a model updated through stage t is tested on stage t + 1, so "
                            f"t must be in 0..{self.n_stages - 2}.")
        known_mask = self.rows_upto(t)
        known = self.inter.select(known_mask)
        nxt = self.stage == t + 1
        key = self.inter.user * (self.n_items + 1) + self.inter.item
        seen_keys = np.unique(key[known_mask])
        fresh = nxt & ~np.isin(key, seen_keys)
        heldout = self.inter.select(fresh)
        has_known = known.histories.lengths() > 0
        has_target = heldout.histories.lengths() > 0
        users = np.flatnonzero(has_known & has_target)
        return EvalSet(users=users, known=known.histories, heldout=heldout.histories)

    def _check_stage(self, t: int) -> None:
        if not 0 <= t < self.n_stages:
            raise DataError(f"stage {t} does not exist; stages are 0..{self.n_stages - 1}.")


def _windows(lo: np.ndarray, first: np.ndarray, end: np.ndarray, max_len: int, stride: int | None
             ) -> SequenceWindows:
    """Windows over flat rows: per user, targets ``max(first, lo + 1) .. end - 1``, context from ``lo``."""
    stride = max_len if stride is None else int(stride)
    if not 1 <= stride <= max_len:
        raise ValueError(f"window stride must be in [1, max_len={max_len}], got {stride}")
    starts, ends, counted = [], [], []
    for u in np.flatnonzero(end - np.maximum(first, lo + 1) > 0):  # one cheap step per user and stage
        first_target = max(int(first[u]), int(lo[u]) + 1)
        stop = int(end[u])
        while stop > first_target:
            start = max(int(lo[u]), stop - max_len - 1)
            count_from = max(start + 1, first_target, stop - stride)
            starts.append(start)
            ends.append(stop)
            counted.append(count_from)
            stop = count_from
    return SequenceWindows(*(np.asarray(col, dtype=np.int64) for col in (starts, ends, counted)))
