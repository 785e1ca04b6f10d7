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

:func:`make_key_recall` plants a sharper long-range dependence (issue 31): at the held-out positions the
next item belongs to a key cluster shown only in recall triples more than ``min_gap`` events back, so a
model reading the whole history can name it and one reading a shorter window cannot
(:func:`key_recall_oracle` is the rule that reads it).
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


@dataclass(frozen=True)
class KeyRecallData:
    """Histories with planted key recalls (:func:`make_key_recall`), with the ground truth (dense ids).

    Attributes:
        interactions: the table (all ratings 5, so every event is liked).
        user_keys: ``[n_users + 1, 2]`` the two key clusters of each dense user (row 0 = padding, -1).
        item_key: key cluster of each dense item; -1 for cue and filler items and padding.
        item_kind: kind of each dense item: 0 filler, 1 cue, 2 key item (padding -1).
        row_role: per row of ``interactions`` (time-sorted per user): 0 filler, 1 cue, 2 first key
            recall (from the user's key 0), 3 second key recall (key 1).
    """

    interactions: Interactions
    user_keys: np.ndarray
    item_key: np.ndarray
    item_kind: np.ndarray
    row_role: np.ndarray


FILLER, CUE, KEY = 0, 1, 2
ROLE_FILLER, ROLE_CUE, ROLE_FIRST, ROLE_SECOND = 0, 1, 2, 3


def make_key_recall(n_users: int = 400, n_keys: int = 16, items_per_key: int = 24, n_fillers: int = 1200,
                    n_cues: int = 64, n_recalls: int = 4, n_intro: int = 6, min_gap: int = 56,
                    max_gap: int = 88, max_lead: int = 32, seed: int = 0) -> KeyRecallData:
    """Histories whose next item, at planted positions, is decided by items far outside a short window.

    Each user owns two distinct key clusters ``(k0, k1)`` out of ``n_keys`` clusters of ``items_per_key``
    key items. The history is ``lead`` filler events (``0 .. max_lead``), an introduction of ``n_intro``
    pairs ``[item of k0, item of k1]`` (inside it the next item is predictable from the last ones, so a
    model learns which items share a cluster), then ``n_recalls`` recall triples
    ``[cue, item of k0, item of k1]`` separated by ``min_gap .. max_gap`` filler events (the first run of
    fillers follows the introduction), and it
    ends with a triple, so under leave-one-out the validation item is the last triple's ``k0`` item and
    the test item its ``k1`` item. Fillers are uniform among the user's unseen filler items, cues
    among its unseen cue items, key items among the unseen items of their cluster: no item repeats
    within a user.

    What the planted positions need:

    * **After a cue** (the validation position), the next item is one of ``k0``'s items. The cue is in
      any window, but ``k0`` shows only in the earlier triples, at least ``min_gap + 1`` events back.
    * **After a cue and a ``k0`` item** (the test position), the next item is one of ``k1``'s items.
      The window shows ``k0`` (independent of ``k1``), and ``k1`` only the earlier triples.

    With ``min_gap`` above a truncation window, a model that reads only the window can at best spread
    its guess over the other key clusters (chance), while one that reads the whole history can name
    the cluster; ``tests/models/test_recmem.py`` checks both with oracles (:func:`key_recall_oracle`).
    Deterministic under ``seed``.

    Args:
        n_users: users.
        n_keys: key clusters (>= 2).
        items_per_key: key items per cluster (> ``n_intro + n_recalls``, so a user never exhausts a key).
        n_fillers: filler items (at least the longest filler run a user can need).
        n_cues: cue items (>= ``n_recalls``).
        n_recalls: recall triples per user (>= 1; the last one holds the validation and test items).
        n_intro: introduction pairs per user (>= 0).
        min_gap: shortest filler run between two triples (>= 1).
        max_gap: longest filler run between two triples.
        max_lead: longest filler run before the first triple (>= 0).
        seed: random seed.
    """
    if n_keys < 2 or n_recalls < 1 or not 1 <= min_gap <= max_gap or max_lead < 0:
        raise ValueError(f"need n_keys >= 2, n_recalls >= 1, 1 <= min_gap <= max_gap and max_lead >= 0, got "
                         f"{n_keys}, {n_recalls}, {min_gap}, {max_gap}, {max_lead}")
    if items_per_key <= n_intro + n_recalls or n_cues < n_recalls or n_intro < 0:
        raise ValueError(f"need items_per_key ({items_per_key}) > n_intro + n_recalls ({n_intro} + "
                         f"{n_recalls}), n_cues ({n_cues}) >= n_recalls and n_intro >= 0: no item repeats "
                         "within a user.")
    need = max_lead + (n_recalls - (0 if n_intro else 1)) * max_gap
    if n_fillers < need:
        raise ValueError(f"n_fillers={n_fillers} is below the longest filler need {need}; raise it or "
                         "shorten the gaps.")
    rng = np.random.default_rng(seed)
    n_key_items = n_keys * items_per_key
    cue0, filler0 = n_key_items, n_key_items + n_cues  # raw ids: key items, then cues, then fillers
    cluster_of = np.concatenate([np.repeat(np.arange(n_keys), items_per_key),
                                 np.full(n_cues + n_fillers, -1)])
    kind_of = np.concatenate([np.full(n_key_items, KEY), np.full(n_cues, CUE), np.full(n_fillers, FILLER)])
    users: list[int] = []
    items: list[int] = []
    roles: list[int] = []
    keys = np.empty((n_users, 2), dtype=np.int64)
    for u in range(n_users):
        keys[u] = rng.choice(n_keys, size=2, replace=False)
        key_draws = [(keys[u, j] * items_per_key
                      + rng.permutation(items_per_key)[:n_intro + n_recalls]).tolist() for j in (0, 1)]
        cues = (cue0 + rng.permutation(n_cues)[:n_recalls]).tolist()
        runs = [int(rng.integers(0, max_lead + 1)),
                *rng.integers(min_gap, max_gap + 1, size=n_recalls - (0 if n_intro else 1)).tolist()]
        fillers = (filler0 + rng.permutation(n_fillers)[:sum(runs)]).tolist()
        seq: list[int] = fillers[:runs[0]]
        role = [ROLE_FILLER] * runs[0]
        for i in range(n_intro):  # the introduction: key pairs, after the lead
            seq += [key_draws[0][n_recalls + i], key_draws[1][n_recalls + i]]
            role += [ROLE_FIRST, ROLE_SECOND]
        used = runs[0]
        gap_runs = runs[1:] if n_intro else [0, *runs[1:]]  # fillers before each triple
        for r in range(n_recalls):
            seq += fillers[used:used + gap_runs[r]]
            role += [ROLE_FILLER] * gap_runs[r]
            used += gap_runs[r]
            seq += [cues[r], key_draws[0][r], key_draws[1][r]]
            role += [ROLE_CUE, ROLE_FIRST, ROLE_SECOND]
        users.extend([u] * len(seq))
        items.extend(seq)
        roles.extend(role)
    inter, u_dense, item_key, order = sequences_to_interactions(users, items, n_users, cluster_of,
                                                                "synthetic-key-recall")
    item_kind = np.full(inter.n_items + 1, -1, dtype=np.int64)
    for dense, raw in enumerate(inter.item_ids[1:], start=1):
        item_kind[dense] = kind_of[int(raw[1:])]
    user_keys = np.full((inter.n_users + 1, 2), -1, dtype=np.int64)
    user_keys[u_dense] = keys
    return KeyRecallData(interactions=inter, user_keys=user_keys, item_key=item_key, item_kind=item_kind,
                         row_role=np.asarray(roles)[order])


def key_recall_oracle(data: KeyRecallData, history: np.ndarray, window: int | None = None) -> np.ndarray:
    """Scores ``[n_items + 1]`` of a rule that reads the planted structure in the last ``window`` items.

    The rule knows the generator: the next item is a key item; after a cue it is the user's first key,
    after a cue and a key item the second. It finds, in the items it reads (the whole ``history``, or its
    last ``window``), the clusters that earlier triples used in that role and scores their key items 1,
    every other key item 0.5 (so among key items it is otherwise at chance), and fillers and cues 0.
    A key cluster just seen in the window (the first key, at the test position) scores 0.25: it is not
    the answer. Seen items are the caller's to mask.
    """
    seen = np.asarray(history if window is None else history[-window:])
    kinds = data.item_kind[seen]
    after_first = len(seen) >= 2 and kinds[-1] == KEY and kinds[-2] == CUE
    role = 1 if after_first else 0  # which key of the open triple comes next
    closed = seen[:len(seen) - (2 if after_first else 1)]  # the earlier triples, without the open one
    votes = {int(data.item_key[closed[t + 1 + role]]) for t in np.flatnonzero(data.item_kind[closed] == CUE)
             if t + 1 + role < len(closed) and data.item_kind[closed[t + 1 + role]] == KEY}
    scores = np.where(data.item_kind == KEY, 0.5, 0.0)
    scores[0] = 0.0
    if after_first:
        scores[data.item_key == data.item_key[seen[-1]]] = 0.25
    for key in votes:
        scores[data.item_key == key] = 1.0
    return scores


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


__all__ = ["ClusterCatalogue", "KeyRecallData", "LongHistoryData", "key_recall_oracle", "make_key_recall",
           "make_long_history", "sequences_to_interactions"]
