"""Long synthetic histories with a planted long-range preference that a short window misses.

:func:`make_long_history` draws ``min_events .. max_events`` events per user (default 2,000-2,200;
the issue's range is 2,000-5,000) over ``n_clusters`` item clusters, no item repeated within a user
(so full-ranking evaluation with seen items masked stays meaningful):

* **Theme.** Each user has a theme cluster. In the first ``early_events`` events a share
  ``early_rate`` of the picks come from it; afterwards only a share ``late_rate`` (a sparse
  reappearance), so a window of the last ``w`` events holds on average ``w * late_rate`` theme items.
* **Sessions.** Every other pick belongs to a session in a random non-theme cluster: sessions follow
  the cluster's item cycle (the next unseen successor), and end with probability
  ``1 / session_len`` per event. The next item inside a session is predictable from the last few
  items; the theme is not.
* **Planted reappearance.** The last ``planted`` events of every user (the validation and test items
  under leave-one-out) are theme items. A model that remembers the early theme ranks the theme's
  unseen items high; a model that reads only the recent window must guess the theme from the rare
  late reappearances.
* Theme picks are popularity-weighted (Zipf ``popularity_skew``) among the theme's unseen items.

Deterministic under ``seed``. Returned with its ground truth (:class:`LongHistoryData`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recframe.data.filters import signed_labels
from recframe.data.interactions import Interactions


@dataclass(frozen=True)
class LongHistoryData:
    """The interactions plus the planted structure (dense ids of ``interactions``).

    Attributes:
        interactions: the table (all ratings 5, so every event is liked).
        user_theme: theme cluster of each dense user (index 0 = padding, -1).
        item_cluster: cluster of each dense item (index 0 = padding, -1).
        row_is_theme: per row of ``interactions`` (time-sorted per user): picked from the theme.
    """

    interactions: Interactions
    user_theme: np.ndarray
    item_cluster: np.ndarray
    row_is_theme: np.ndarray


def make_long_history(n_users: int = 120, n_clusters: int = 24, items_per_cluster: int = 250,
                      min_events: int = 2000, max_events: int = 2200, early_events: int = 200,
                      early_rate: float = 0.5, late_rate: float = 0.01, session_len: float = 20.0,
                      planted: int = 2, popularity_skew: float = 1.0, seed: int = 0) -> LongHistoryData:
    """Generate long histories with an early theme that reappears late (see the module docstring).

    Args:
        n_users: users.
        n_clusters: item clusters (>= 2).
        items_per_cluster: items per cluster.
        min_events: shortest history.
        max_events: longest history.
        early_events: length of the early phase, where the theme is frequent.
        early_rate: share of theme picks in the early phase.
        late_rate: share of theme picks after it (before the planted tail).
        session_len: mean session length in events.
        planted: final events of every user that are theme picks (2 = validation + test item).
        popularity_skew: Zipf exponent of item popularity within a cluster.
        seed: random seed.
    """
    if n_clusters < 2 or items_per_cluster < 2:
        raise ValueError(f"need n_clusters >= 2 and items_per_cluster >= 2, got {n_clusters}, "
                         f"{items_per_cluster}")
    if not 1 <= min_events <= max_events:
        raise ValueError(f"need 1 <= min_events <= max_events, got {min_events}, {max_events}")
    if not (0 <= early_rate <= 1 and 0 <= late_rate <= 1) or session_len < 1 or planted < 0:
        raise ValueError("need early_rate and late_rate in [0, 1], session_len >= 1 and planted >= 0")
    theme_budget = early_events * early_rate + max_events * late_rate + planted
    if theme_budget > 0.9 * items_per_cluster:
        raise ValueError(f"items_per_cluster={items_per_cluster} is too small for ~{theme_budget:.0f} theme "
                         "picks per user without repeats; raise it or lower the rates.")
    rng = np.random.default_rng(seed)
    n_items = n_clusters * items_per_cluster
    catalogue = ClusterCatalogue(rng, n_clusters, items_per_cluster, popularity_skew)
    cluster_of, cluster_list = catalogue.cluster_of, catalogue.cluster_list
    popular_unseen = catalogue.popular_unseen

    def open_session(theme: int, left: np.ndarray) -> int:
        return int(rng.choice(np.flatnonzero((left > 0) & (np.arange(n_clusters) != theme))))

    users, items, theme_rows = [], [], []
    themes = rng.integers(0, n_clusters, size=n_users)
    for u in range(n_users):
        n = int(rng.integers(min_events, max_events + 1))
        theme = int(themes[u])
        seen = np.zeros(n_items, dtype=bool)
        left = np.full(n_clusters, items_per_cluster)  # unseen items per cluster
        session, cur = -1, -1
        rate = np.where(np.arange(n) < early_events, early_rate, late_rate)
        rate[n - planted:] = 1.0
        take_theme = (rng.random(n) < rate).tolist()
        new_session = (rng.random(n) < 1.0 / session_len).tolist()
        for t in range(n):
            if take_theme[t]:
                pick, is_theme = popular_unseen(theme, seen), True
            else:
                if session < 0 or left[session] == 0 or new_session[t]:
                    session, cur = open_session(theme, left), -1
                pick = catalogue.next_unseen(cur, seen) if cur >= 0 else popular_unseen(session, seen)
                is_theme, cur = False, pick
            seen[pick] = True
            left[cluster_list[pick]] -= 1
            items.append(pick)
            theme_rows.append(is_theme)
        users.extend([u] * n)
    inter, u_dense, item_cluster, order = sequences_to_interactions(users, items, n_users, cluster_of,
                                                                    "synthetic-long")
    user_theme = np.full(inter.n_users + 1, -1, dtype=np.int64)
    user_theme[u_dense] = themes
    return LongHistoryData(interactions=inter, user_theme=user_theme, item_cluster=item_cluster,
                           row_is_theme=np.asarray(theme_rows)[order])


class ClusterCatalogue:
    """Items in equal clusters, each with a popularity order and a random item cycle (for the long sets).

    Item ``i`` is in cluster ``i // items_per_cluster``. Draws from ``rng`` in a fixed order (each cluster's
    popularity order, then each cluster's cycle), so a generator's output is a function of its seed.

    Attributes:
        cluster_of: ``[n_items]`` cluster of each item (``cluster_list``: the same as a list).
        members: per cluster, its items from most to least popular.
        successor: per item, the next item along its cluster's cycle (a list).
    """

    def __init__(self, rng: np.random.Generator, n_clusters: int, items_per_cluster: int,
                 popularity_skew: float) -> None:
        self.rng = rng
        self.n_items = n_clusters * items_per_cluster
        self.cluster_of = np.repeat(np.arange(n_clusters), items_per_cluster)
        self.cluster_list = self.cluster_of.tolist()
        self.members = [rng.permutation(np.flatnonzero(self.cluster_of == c)) for c in range(n_clusters)]
        successor = np.empty(self.n_items, dtype=np.int64)
        for c in range(n_clusters):
            cycle = rng.permutation(self.members[c])
            successor[cycle] = np.roll(cycle, -1)
        self.successor = successor.tolist()
        self.weights = 1.0 / np.arange(1, items_per_cluster + 1) ** popularity_skew

    def popular_unseen(self, c: int, seen: np.ndarray) -> int:
        """A Zipf-popularity-weighted draw among cluster ``c``'s items not in ``seen`` (one must exist)."""
        free = ~seen[self.members[c]]
        w = self.weights[free]
        return int(self.members[c][free][self.rng.choice(int(free.sum()), p=w / w.sum())])

    def next_unseen(self, item: int, seen: np.ndarray) -> int:
        """The first item after ``item`` along its cluster's cycle not in ``seen`` (one must exist)."""
        nxt = self.successor[item]
        while seen[nxt]:
            nxt = self.successor[nxt]
        return nxt


def sequences_to_interactions(users: list[int], items: list[int], n_users: int, cluster_of: np.ndarray,
                              name: str) -> tuple[Interactions, np.ndarray, np.ndarray, np.ndarray]:
    """Liked interactions from generated events (user ``u`` -> ``"u{u}"``, item ``i`` -> ``"i{i}"``).

    ``users``/``items`` list every event, each user's events contiguous and in time order; events are an
    hour apart. Returns the interactions, the dense id of each generated user ``[n_users]``, the cluster of
    each dense item ``[n_items + 1]`` (padding -1), and the permutation that puts per-event lists in the
    interactions' row order (user, time).
    """
    users_a, items_a = np.asarray(users), np.asarray(items)
    stamps = np.concatenate([np.arange(c) for c in np.bincount(users_a)]).astype(float) * 3600.0
    inter = Interactions.from_raw(np.char.add("u", users_a.astype(str)),
                                  np.char.add("i", items_a.astype(str)), 1_600_000_000.0 + stamps,
                                  np.full(len(users_a), 5.0), name=name)
    inter = signed_labels(inter)
    u_dense = np.array([inter.user_index(f"u{u}") for u in range(n_users)])
    item_cluster = np.full(inter.n_items + 1, -1, dtype=np.int64)
    for dense, raw in enumerate(inter.item_ids[1:], start=1):
        item_cluster[dense] = cluster_of[int(raw[1:])]
    return inter, u_dense, item_cluster, np.lexsort((stamps, u_dense[users_a]))


__all__ = ["ClusterCatalogue", "LongHistoryData", "make_long_history", "sequences_to_interactions"]
