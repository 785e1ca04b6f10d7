"""Long synthetic histories whose planted preference is a *set of interests* revisited over a lifetime.

:func:`make_interest_revisits` draws ``min_events .. max_events`` events per user over ``n_clusters`` item
clusters, no item repeated within a user:

* **Interests.** Each user has ``n_interests`` interest clusters, drawn at random and fixed for life.
* **Sessions.** Events come in sessions of mean length ``session_len`` (geometric). A session stays in one
  cluster and follows the cluster's item cycle (the next unseen successor), so inside a session the next
  item is predictable from the last one. A new session goes, with probability ``1 - explore``, to one of the
  user's interests other than the current one (uniformly), else to a random non-interest cluster. Its first
  item is popularity-weighted (Zipf ``popularity_skew``) among the cluster's unseen items.
* **Planted revisits.** The last ``planted`` events (the validation and test items under leave-one-out) each
  start a one-item session in an interest cluster that is *absent from the preceding* ``window`` *events*
  (the least recently visited interest when every interest is present).
* An interest whose items are all seen drops out of the draws (the generator refuses settings whose mean load
  per interest exceeds 80 % of a cluster, so this stays rare).

Why this plants a long-range preference that next-item training can learn. With many interests and sessions
of ~``session_len`` events, a window of ``window`` events shows only a few of a user's interests; the whole
history shows all of them. Every session start into an interest missing from the recent window (about
``(1 - explore) / session_len`` of all events, thousands per epoch) is a training target that rewards
remembering the interest set, so the signal is not rare. A model that knows the set ranks the absent
interests' popular unseen items high; one that sees only the window must spread its guess over every
cluster it has not just seen. The gain shows at Recall@50 and beyond (the cluster is known, the item within
it only up to popularity), which is where the RecMem claim sits.

Choices and why: popularity-weighted session starts (not "resume where the user left off") keep the planted
information at the level of clusters, a set that a fixed-size memory can hold, rather than of individual
items. :mod:`recframe.data.synthetic_long` plants a single early theme instead; there, the current session's
cluster fills the top ranks and the late theme targets are too rare a signal (measured: full-prefix attention
is as theme-blind as truncation on its small set).

Deterministic under ``seed``. Returned with its ground truth (:class:`InterestHistoryData`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recframe.data.interactions import Interactions
from recframe.data.synthetic_long import ClusterCatalogue, sequences_to_interactions

__all__ = ["InterestHistoryData", "make_interest_revisits"]


@dataclass(frozen=True)
class InterestHistoryData:
    """The interactions plus the planted structure (dense ids of ``interactions``).

    Attributes:
        interactions: the table (all ratings 5, so every event is liked).
        user_interests: ``[n_users + 1, n_interests]`` interest clusters of each dense user (row 0: -1).
        item_cluster: cluster of each dense item (index 0 = padding, -1).
        row_is_session_start: per row of ``interactions`` (time-sorted per user): first item of a session.
        row_is_planted: per row: one of the planted revisits (the last ``planted`` events of its user).
    """

    interactions: Interactions
    user_interests: np.ndarray
    item_cluster: np.ndarray
    row_is_session_start: np.ndarray
    row_is_planted: np.ndarray


def make_interest_revisits(n_users: int = 64, n_clusters: int = 64, items_per_cluster: int = 250,
                           n_interests: int = 8, min_events: int = 2000, max_events: int = 2100,
                           session_len: float = 20.0, explore: float = 0.3, window: int = 48,
                           planted: int = 2, popularity_skew: float = 1.0,
                           seed: int = 0) -> InterestHistoryData:
    """Generate long histories of sessions over a lifelong set of interests (see the module docstring).

    Args:
        n_users: users.
        n_clusters: item clusters (more than ``n_interests``).
        items_per_cluster: items per cluster.
        n_interests: interest clusters per user (>= 2, so a revisit can leave the current cluster).
        min_events: shortest history.
        max_events: longest history.
        session_len: mean session length in events (>= 1).
        explore: share of sessions in a random non-interest cluster.
        window: the planted revisits go to interests absent from this many preceding events.
        planted: final events of every user that are planted revisits (2 = validation + test item).
        popularity_skew: Zipf exponent of item popularity within a cluster.
        seed: random seed.
    """
    if not 2 <= n_interests < n_clusters or items_per_cluster < 2:
        raise ValueError(f"need 2 <= n_interests < n_clusters and items_per_cluster >= 2, got n_interests="
                         f"{n_interests}, n_clusters={n_clusters}, items_per_cluster={items_per_cluster}")
    if not 1 <= min_events <= max_events:
        raise ValueError(f"need 1 <= min_events <= max_events, got {min_events}, {max_events}")
    if not 0 <= explore <= 1 or session_len < 1 or planted < 0 or window < 0:
        raise ValueError("need explore in [0, 1], session_len >= 1, planted >= 0 and window >= 0")
    per_interest = max_events * (1 - explore) / n_interests
    if per_interest > 0.8 * items_per_cluster:
        raise ValueError(f"items_per_cluster={items_per_cluster} is too small for ~{per_interest:.0f} events "
                         "per interest cluster without repeats; raise it, add interests or shorten the "
                         "histories.")
    rng = np.random.default_rng(seed)
    n_items = n_clusters * items_per_cluster
    catalogue = ClusterCatalogue(rng, n_clusters, items_per_cluster, popularity_skew)
    cluster_of, cluster_list = catalogue.cluster_of, catalogue.cluster_list
    popular_unseen = catalogue.popular_unseen

    users, items, starts, planted_rows = [], [], [], []
    interests = np.stack([rng.choice(n_clusters, size=n_interests, replace=False) for _ in range(n_users)])
    for u in range(n_users):
        n = int(rng.integers(min_events, max_events + 1))
        mine = interests[u]
        others = np.setdiff1d(np.arange(n_clusters), mine)
        seen = np.zeros(n_items, dtype=bool)
        left = np.full(n_clusters, items_per_cluster)
        history: list[int] = []  # clusters of this user's events so far
        cluster, cur = -1, -1
        new_session = (rng.random(n) < 1.0 / session_len).tolist()
        wander = (rng.random(n) < explore).tolist()
        for t in range(n):
            is_planted = t >= n - planted
            if is_planted:
                recent = set(history[-window:]) if window else set()
                open_ = [c for c in mine.tolist() if left[c] > 0]
                absent = [c for c in open_ if c not in recent]
                if absent:
                    cluster = int(rng.choice(absent))
                else:  # every interest visited recently: the least recently visited one
                    last = {c: max(i for i, h in enumerate(history) if h == c) for c in open_}
                    cluster = min(open_, key=last.get)
                pick, start = popular_unseen(cluster, seen), True
            elif t == 0 or new_session[t] or left[cluster] == 0:
                pool = others if wander[t] else mine[mine != cluster]
                pool = pool[left[pool] > 0]
                if len(pool) == 0:  # the drawn kind is exhausted: any cluster with unseen items
                    pool = np.flatnonzero(left > 0)
                cluster = int(rng.choice(pool))
                pick, start = popular_unseen(cluster, seen), True
            else:
                pick, start = catalogue.next_unseen(cur, seen), False  # one exists: left > 0
            cur = pick
            seen[pick] = True
            left[cluster_list[pick]] -= 1
            history.append(cluster_list[pick])
            items.append(pick)
            starts.append(start)
            planted_rows.append(is_planted)
        users.extend([u] * n)
    inter, u_dense, item_cluster, order = sequences_to_interactions(users, items, n_users, cluster_of,
                                                                    "synthetic-interests")
    user_interests = np.full((inter.n_users + 1, n_interests), -1, dtype=np.int64)
    user_interests[u_dense] = interests
    return InterestHistoryData(interactions=inter, user_interests=user_interests, item_cluster=item_cluster,
                               row_is_session_start=np.asarray(starts)[order],
                               row_is_planted=np.asarray(planted_rows)[order])
