"""Synthetic staged data with a planted preference shift, for the continual protocol's end-to-end checks.

Every user is active in every one of ``n_stages`` equal time windows (``per_stage`` interactions each, at
uniformly random times inside the window), so every user is a returning user at every test. Items form
``n_clusters`` equal clusters; a user draws items of their *current* cluster (popularity-weighted), except:

* **shifters** (share ``shift_rate``): at a random stage ``s >= 1`` their cluster changes for good;
* **excursions** (share ``noise_rate``): in a random stage ``s <= n_stages - 2`` the *second half* of their
  interactions is drawn uniformly from the whole catalogue (a transient, incoherent burst), and the next
  stage returns to their cluster;
* everyone else is stable.

So at a stage boundary the newest items of a shifter are coherent and predict the next stage, while those of
an excursion are scattered and do not: the planted case where refreshing the drift helps the first and
consolidating into the anchor helps the second. ``user_type`` (0 stable, 1 shifter, 2 excursion),
``event_stage`` and the clusters are returned for the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recframe.data.interactions import Interactions

__all__ = ["ShiftData", "make_shift_data"]


@dataclass(frozen=True)
class ShiftData:
    """The table plus the planted structure (per dense user id; index 0 is padding, -1)."""

    interactions: Interactions
    user_type: np.ndarray
    event_stage: np.ndarray
    n_stages: int


def make_shift_data(n_users: int = 300, n_items: int = 600, n_clusters: int = 6, n_stages: int = 4,
                    per_stage: int = 12, shift_rate: float = 0.3, noise_rate: float = 0.3, seed: int = 0
                    ) -> ShiftData:
    """Generate the data (deterministic under ``seed``; see the module docstring)."""
    if n_items % n_clusters or n_clusters < 2 or n_stages < 3 or per_stage < 4:
        raise ValueError("make_shift_data needs n_items divisible by n_clusters >= 2, n_stages >= 3 and "
                         "per_stage >= 4")
    if not (0 <= shift_rate and 0 <= noise_rate and shift_rate + noise_rate <= 1):
        raise ValueError("shift_rate and noise_rate must be >= 0 with a sum <= 1")
    size = n_items // n_clusters
    if per_stage * n_stages > size:
        raise ValueError(f"a cluster has {size} items but a user draws per_stage * n_stages = "
                         f"{per_stage * n_stages} distinct ones; raise n_items or lower per_stage")
    rng = np.random.default_rng(seed)
    clusters = rng.permutation(n_items).reshape(n_clusters, size)
    pop = 1.0 / np.arange(1, size + 1)
    pop /= pop.sum()
    kind = rng.choice(3, size=n_users, p=[1 - shift_rate - noise_rate, shift_rate, noise_rate])
    event = np.where(kind == 1, rng.integers(1, n_stages, n_users), rng.integers(0, n_stages - 1, n_users))
    event = np.where(kind == 0, -1, event)
    home = rng.integers(0, n_clusters, n_users)
    away = (home + rng.integers(1, n_clusters, n_users)) % n_clusters
    users, items, times = [], [], []
    for u in range(n_users):
        had = np.zeros(n_items, dtype=bool)  # no repeats: a user's items are new to them
        for s in range(n_stages):
            cluster = away[u] if kind[u] == 1 and s >= event[u] else home[u]
            members = clusters[cluster]
            p = np.where(had[members], 0.0, pop)
            drawn = members[rng.choice(size, per_stage, replace=False, p=p / p.sum())]
            if kind[u] == 2 and s == event[u]:
                half = per_stage // 2
                fresh = np.flatnonzero(~had & ~np.isin(np.arange(n_items), drawn))
                drawn[half:] = rng.choice(fresh, per_stage - half, replace=False)
            had[drawn] = True
            ts = np.sort(s + rng.random(per_stage))
            users += [u] * per_stage
            items += drawn.tolist()
            times += ts.tolist()
    inter = Interactions.from_raw(users, items, np.asarray(times) * 86_400.0, name="continual-shift")
    # dense user ids follow first appearance, i.e. the generation order u -> u + 1
    pad = np.array([-1])
    return ShiftData(inter, np.concatenate([pad, kind]), np.concatenate([pad, event]), n_stages)
