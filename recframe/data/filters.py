"""Row filters and label rules on :class:`~recframe.data.interactions.Interactions`.

* :func:`k_core` keeps the largest sub-table in which every user and every
  item has at least ``user_k`` / ``item_k`` interactions.
* :func:`signed_labels` derives the signed feedback label from ratings.
* :func:`drop_duplicates` keeps one row per (user, item) pair.
* :func:`drop_exact_duplicates` keeps one row per (user, item, timestamp)
  event: the data module's default duplicate policy (``data.duplicates``).

All return new tables; ids are re-compacted only where rows of whole users or
items can disappear (:func:`k_core`).
"""

from __future__ import annotations

import logging

import numpy as np

from recframe.data.interactions import DataError, Interactions, sort_order

logger = logging.getLogger("recframe.data")


def k_core(inter: Interactions, user_k: int = 5, item_k: int = 5) -> Interactions:
    """Iteratively drop users with < ``user_k`` rows and items with < ``item_k`` rows.

    Removing an item can push a user below the threshold and vice versa, so
    the two passes repeat until nothing changes; the result is the unique
    maximal sub-table where every user has >= ``user_k`` and every item >=
    ``item_k`` interactions (duplicate rows count separately). Ids are then
    re-compacted with :meth:`Interactions.compact`.

    Raises:
        DataError: a threshold is negative, or no rows survive.
    """
    if user_k < 0 or item_k < 0 or int(user_k) != user_k or int(item_k) != item_k:
        raise DataError(f"k_core thresholds must be integers >= 0, got user_k={user_k}, item_k={item_k}.")
    keep = np.ones(len(inter), dtype=bool)
    while True:
        users, items = inter.user[keep], inter.item[keep]
        u_count = np.bincount(users, minlength=inter.n_users + 1)
        i_count = np.bincount(items, minlength=inter.n_items + 1)
        ok = (u_count[users] >= user_k) & (i_count[items] >= item_k)
        if ok.all():
            break
        keep[np.flatnonzero(keep)[~ok]] = False
        if not keep.any():
            break
    if not keep.any():
        label = f"{user_k}-core" if user_k == item_k else f"(user_k={user_k}, item_k={item_k})-core"
        raise DataError(
            f"{inter.name}: empty after {label} filtering (user_k={user_k}, item_k={item_k}); "
            "lower user_k/item_k."
        )
    return inter.select(keep).compact()


def signed_labels(
    inter: Interactions, like_threshold: float = 4.0, dislike_threshold: float = 2.0
) -> Interactions:
    """Set the signed label from the rating.

    Rule: ``rating >= like_threshold`` -> +1 (liked); ``rating <=
    dislike_threshold`` -> -1 (disliked); anything in between, and a missing
    (NaN) rating, -> 0 (unknown). On a 1-5 scale the defaults make 4 and 5
    liked, 1 and 2 disliked, 3 neutral.

    Raises:
        DataError: ``dislike_threshold`` is not below ``like_threshold``.
    """
    if not dislike_threshold < like_threshold:
        raise DataError(
            f"signed_labels needs dislike_threshold < like_threshold, got dislike={dislike_threshold}, "
            f"like={like_threshold}."
        )
    rating = inter.rating
    labels = np.zeros(len(inter), dtype=np.int8)
    labels[rating >= like_threshold] = 1  # NaN compares False: stays 0
    labels[rating <= dislike_threshold] = -1
    return inter.with_labels(labels)


def drop_duplicates(inter: Interactions, keep: str = "last") -> Interactions:
    """Keep one row per (user, item): the latest (``keep="last"``) or earliest (``"first"``).

    "Latest" follows the table's (user, timestamp) order, ties in file order.
    Every user and item keeps at least one row, so ids are unchanged.
    """
    if keep not in ("first", "last"):
        raise DataError(f"drop_duplicates: keep must be 'first' or 'last', got {keep!r}.")
    pair = inter.user.astype(np.int64) * (inter.n_items + 1) + inter.item
    if keep == "first":
        _, index = np.unique(pair, return_index=True)
    else:
        _, rev_index = np.unique(pair[::-1], return_index=True)
        index = len(pair) - 1 - rev_index
    if len(index) == len(inter):
        return inter
    return inter.select(np.sort(index))


def exact_duplicates(inter: Interactions) -> np.ndarray:
    """Boolean mask of rows that repeat an earlier row's (user, item, timestamp), in file order.

    The first occurrence of each (user, item, timestamp) is not marked; every later copy is.
    A table in (user, timestamp) order (every table :meth:`Interactions.from_raw` builds) holds the
    copies of an event in one run of equal (user, timestamp), so only the rows of such runs are sorted;
    any other table gets the full sort.
    """
    n = len(inter)
    if sort_order(inter.user, inter.timestamp) is None:
        return _exact_duplicates_sorted(inter)
    order = np.lexsort((np.arange(n), inter.timestamp, inter.item, inter.user))  # stable: file order
    u, i, t = inter.user[order], inter.item[order], inter.timestamp[order]
    repeat = np.zeros(n, dtype=bool)
    repeat[1:] = (u[1:] == u[:-1]) & (i[1:] == i[:-1]) & (t[1:] == t[:-1])
    mask = np.zeros(n, dtype=bool)
    mask[order[repeat]] = True
    return mask


def _exact_duplicates_sorted(inter: Interactions) -> np.ndarray:
    """:func:`exact_duplicates` of a table in (user, timestamp) order: a sort of the tied rows only."""
    user, ts = inter.user, inter.timestamp
    mask = np.zeros(len(inter), dtype=bool)
    same = (user[1:] == user[:-1]) & (ts[1:] == ts[:-1])  # row k + 1 ties with row k
    if not same.any():
        return mask
    tied = np.zeros(len(inter), dtype=bool)
    tied[1:] = same
    tied[:-1] |= same
    rows = np.flatnonzero(tied)
    continues = np.zeros(len(rows), dtype=bool)  # the row ties with the row before it
    continues[rows > 0] = same[rows[rows > 0] - 1]
    group = np.cumsum(~continues)  # one id per run of equal (user, timestamp)
    items = inter.item[rows]
    order = np.lexsort((rows, items, group))  # within a tie run by item, copies in row order
    g, it = group[order], items[order]
    repeat = (g[1:] == g[:-1]) & (it[1:] == it[:-1])
    mask[rows[order[1:][repeat]]] = True
    return mask


def drop_exact_duplicates(inter: Interactions) -> Interactions:
    """Keep the first of every group of rows with the same (user, item, timestamp); warn how many went.

    An exact duplicate is the same event recorded twice. Kept, it can put a held-out
    interaction into the user's own training history (leave-one-out holds out one copy,
    the other stays in training), so this is the data module's default
    (``data.duplicates: drop``). The same item at a *different* time is a repeat
    consumption and stays. The first copy keeps its rating and label. Every user and
    item keeps at least one row, so ids are unchanged.
    """
    repeat = exact_duplicates(inter)
    n_dropped = int(repeat.sum())
    if n_dropped == 0:
        return inter
    logger.warning("%s: dropped %d exact duplicate (user, item, timestamp) rows of %d "
                   "(data.duplicates: drop; set data.duplicates: keep to keep them)",
                   inter.name, n_dropped, len(inter))
    return inter.select(~repeat)


__all__ = ["drop_duplicates", "drop_exact_duplicates", "exact_duplicates", "k_core", "signed_labels"]
