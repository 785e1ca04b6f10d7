"""Cold-start items: hold a set of items out of training entirely, then ask for them from content alone.

Protocol (``RecDataModule(cold_items={"fraction": 0.1, "seed": 0})``):

* **Cold items.** A fraction of the items that have at least ``min_interactions`` interactions is drawn
  uniformly at random (``numpy.random.default_rng(seed)``); choice: uniform over items rather than
  proportional to popularity, so the cold set has the catalogue's mix of head and tail items. Every
  interaction with a cold item is removed before the warm data is split, so no training, validation or
  test row mentions one. The catalogue (ids, content features) is unchanged: a model still has a column
  for every cold item and its content, never an interaction.
* **Cold test cases.** For each user with at least one cold interaction and ``min_history`` warm
  interactions before it: the target is the user's *last* cold interaction (the richest history), the
  input is the user's warm interactions before it in time order (the model's window of them), and the
  user's other cold items are masked from the ranking (known positives that were not given as input,
  the seen-item rule of the warm protocol).
* **Ranking.** Over the cold items only (the usual cold-start protocol: a warm-trained model always
  prefers warm items, so the question is which new item fits the user), with the evaluator's pessimistic
  tie rule (:func:`recframe.metrics.ranking.target_ranks`) and its metric definitions
  (:func:`recframe.metrics.ranking.standard_metrics`); see :mod:`recframe.metrics.cold_start`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from recframe.data.interactions import DataError, Interactions

__all__ = ["ColdItems", "ColdEvalSet", "hold_out_cold_items", "cold_eval_set", "check_cold_settings"]


@dataclass(frozen=True)
class ColdItems:
    """The held-out cold items and every interaction removed with them."""

    items: np.ndarray  #: sorted dense ids of the cold items
    removed: Interactions  #: all interactions with a cold item (same id space as the data)


@dataclass(frozen=True)
class ColdEvalSet:
    """Cold test cases: ``users[n]`` asks for ``targets[n]`` after ``histories[n]`` (warm items, oldest
    first); ``masked[n]`` are that user's other cold items, excluded from the ranking."""

    cold_items: np.ndarray
    users: np.ndarray
    histories: list[np.ndarray]
    targets: np.ndarray
    masked: list[np.ndarray]

    def __len__(self) -> int:
        return len(self.users)


def check_cold_settings(settings: dict[str, Any] | None) -> dict[str, Any] | None:
    """Validated ``data.cold_items`` settings (defaults filled), or ``None`` when off."""
    if settings is None:
        return None
    if not isinstance(settings, dict):
        raise DataError("data.cold_items must be a mapping like {fraction: 0.1, seed: 0}; got "
                        f"{settings!r}.")
    known = {"fraction": 0.1, "seed": 0, "min_interactions": 1, "min_history": 1}
    unknown = set(settings) - set(known)
    if unknown:
        raise DataError(f"data.cold_items has unknown keys {sorted(unknown)}; valid: {sorted(known)}.")
    out = {**known, **settings}
    if not 0.0 < float(out["fraction"]) < 1.0:
        raise DataError(f"data.cold_items.fraction must be in (0, 1); got {out['fraction']!r}.")
    for key in ("seed", "min_interactions", "min_history"):
        if isinstance(out[key], bool) or not isinstance(out[key], int) or out[key] < 0:
            raise DataError(f"data.cold_items.{key} must be a whole number >= 0; got {out[key]!r}.")
    return out


def hold_out_cold_items(inter: Interactions, fraction: float = 0.1, seed: int = 0,
                        min_interactions: int = 1, **_: Any) -> tuple[Interactions, ColdItems]:
    """Draw the cold items and remove their interactions: ``(warm interactions, ColdItems)``."""
    counts = inter.item_popularity()
    eligible = np.flatnonzero(counts >= max(min_interactions, 1))
    eligible = eligible[eligible > 0]
    n_cold = int(round(fraction * len(eligible)))
    if n_cold < 1 or n_cold >= len(eligible):
        raise DataError(f"data.cold_items.fraction={fraction} leaves {n_cold} cold items of {len(eligible)} "
                        "eligible; choose a fraction that keeps at least one cold and one warm item.")
    rng = np.random.default_rng(seed)
    cold = np.sort(rng.choice(eligible, size=n_cold, replace=False))
    is_cold = np.isin(inter.item, cold)
    return inter.select(~is_cold), ColdItems(items=cold, removed=inter.select(is_cold))


def cold_eval_set(warm: Interactions, cold: ColdItems, min_history: int = 1) -> ColdEvalSet:
    """The cold test cases of the module docstring, from the warm rows and the removed cold rows."""
    warm_hist, cold_hist = warm.histories, cold.removed.histories
    users, histories, targets, masked = [], [], [], []
    for user in np.flatnonzero(cold_hist.lengths() > 0):
        lo, hi = cold_hist.indptr[user], cold_hist.indptr[user + 1]
        target, when = int(cold_hist.items[hi - 1]), float(cold_hist.timestamps[hi - 1])
        wlo, whi = warm_hist.indptr[user], warm_hist.indptr[user + 1]
        before = warm_hist.items[wlo:whi][warm_hist.timestamps[wlo:whi] < when]
        if len(before) < max(min_history, 1):
            continue
        users.append(int(user))
        histories.append(before.astype(np.int64))
        targets.append(target)
        others = np.unique(cold_hist.items[lo:hi])
        masked.append(others[others != target].astype(np.int64))
    return ColdEvalSet(cold_items=cold.items, users=np.asarray(users, dtype=np.int64), histories=histories,
                       targets=np.asarray(targets, dtype=np.int64), masked=masked)
