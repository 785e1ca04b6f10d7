"""The interest-revisit generator: its planted structure holds, and it carries a long-range signal."""

from __future__ import annotations

import numpy as np
import pytest

from recframe.data.synthetic_interests import make_interest_revisits

SMALL = {"n_users": 60, "n_clusters": 32, "items_per_cluster": 80, "n_interests": 6, "min_events": 400,
         "max_events": 420, "session_len": 10.0, "explore": 0.3, "window": 16, "seed": 1}


@pytest.fixture(scope="module")
def data():
    return make_interest_revisits(**SMALL)


def _per_user(data):
    inter = data.interactions
    order = np.lexsort((inter.timestamp, inter.user))
    users, items = inter.user[order], inter.item[order]
    bounds = np.flatnonzero(np.diff(users)) + 1
    return np.split(users, bounds), np.split(items, bounds), np.split(np.arange(len(users)), bounds)


def test_deterministic_and_no_repeats(data):
    again = make_interest_revisits(**SMALL)
    assert np.array_equal(again.interactions.item, data.interactions.item)
    _, items, _ = _per_user(data)
    assert all(len(np.unique(seq)) == len(seq) for seq in items)


def test_planted_revisits_go_to_an_interest_absent_from_the_window(data):
    users, items, rows = _per_user(data)
    for u, seq, idx in zip(users, items, rows):
        planted = data.row_is_planted[idx]
        assert planted[-2:].all() and not planted[:-2].any()
        mine = set(data.user_interests[u[0]].tolist())
        clusters = data.item_cluster[seq]
        for pos in (len(seq) - 2, len(seq) - 1):
            assert clusters[pos] in mine
            # absent from the preceding window unless every interest with unseen items was there
            recent = set(clusters[pos - SMALL["window"]:pos].tolist())
            used = np.bincount(clusters[:pos], minlength=SMALL["n_clusters"])
            open_ = {c for c in mine if used[c] < SMALL["items_per_cluster"]}
            assert clusters[pos] not in recent or open_ <= recent


def test_sessions_have_the_planned_length_and_mostly_go_to_interests(data):
    starts = data.row_is_session_start & ~data.row_is_planted
    assert abs(starts.mean() - 1 / SMALL["session_len"]) < 0.02
    users, items, rows = _per_user(data)
    in_interest = [np.isin(data.item_cluster[seq], data.user_interests[u[0]]) for u, seq in zip(users, items)]
    share = np.concatenate(in_interest).mean()
    assert abs(share - (1 - SMALL["explore"])) < 0.08


def test_the_whole_history_reveals_what_the_window_hides(data):
    """Known answer: counting clusters over the whole history ranks the planted item far above popularity.

    Score = popularity + a bonus for the 6 most frequent clusters of the history that are absent from the
    last 16 events; the planted (last) item's rank among the unseen items gives Recall@200. Popularity alone
    is the window-blind reference.
    """
    users, items, _ = _per_user(data)
    n = data.interactions.n_items
    pop = np.bincount(np.concatenate([seq[:-2] for seq in items]), minlength=n + 1).astype(float)
    pop /= pop.max()
    hits_count, hits_pop = [], []
    for seq in items:
        hist, target = seq[:-1], seq[-1]
        clusters = data.item_cluster[hist]
        top = [c for c in np.argsort(-np.bincount(clusters, minlength=SMALL["n_clusters"]))[:6]
               if c not in set(clusters[-16:].tolist())]
        for bonus, hits in ((10.0, hits_count), (0.0, hits_pop)):
            score = pop + bonus * np.isin(data.item_cluster, top)
            score[0] = -np.inf
            score[hist] = -np.inf
            hits.append(int((score > score[target]).sum()) < 200)
    assert np.mean(hits_count) > 0.6 and np.mean(hits_pop) < 0.25, (np.mean(hits_count), np.mean(hits_pop))


def test_invalid_arguments():
    with pytest.raises(ValueError, match="n_interests"):
        make_interest_revisits(n_interests=1)
    with pytest.raises(ValueError, match="too small"):
        make_interest_revisits(items_per_cluster=50)
    with pytest.raises(ValueError, match="explore"):
        make_interest_revisits(explore=1.5)
