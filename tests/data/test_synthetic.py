"""The synthetic generator: determinism, speed, and that the planted structure is measurable."""

from __future__ import annotations

import time
from collections import Counter, defaultdict

import numpy as np
import pytest

from recframe.data.synthetic import SyntheticData, make_synthetic


@pytest.fixture(scope="module")
def data() -> SyntheticData:
    return make_synthetic(n_users=400, n_items=200, n_clusters=5, mean_length=30, seed=3)


def test_deterministic_under_seed():
    a, b = make_synthetic(n_users=100, seed=7), make_synthetic(n_users=100, seed=7)
    assert a.interactions.fingerprint == b.interactions.fingerprint
    assert a.interactions.item_features.texts() == b.interactions.item_features.texts()
    for field in (
        "user_cluster",
        "user_cluster_late",
        "drift_step",
        "item_cluster",
        "successor",
        "row_in_cluster",
    ):
        assert np.array_equal(getattr(a, field), getattr(b, field)), field
    assert make_synthetic(n_users=100, seed=8).interactions.fingerprint != a.interactions.fingerprint


def test_fast_for_1k_users():
    start = time.perf_counter()
    d = make_synthetic(n_users=1000, n_items=500)
    assert time.perf_counter() - start < 1.0
    assert d.interactions.n_users == 1000 and 20_000 < len(d.interactions) < 40_000


def test_shapes_and_time_order(data):
    inter = data.interactions
    assert data.user_cluster.shape == (inter.n_users + 1,) and data.item_cluster.shape == (inter.n_items + 1,)
    assert data.row_in_cluster.shape == (len(inter),)
    same_user = np.diff(inter.user) == 0
    assert (np.diff(inter.timestamp)[same_user] > 0).all()  # strictly increasing per user
    assert inter.histories.lengths()[1:].min() >= 5
    assert abs(inter.histories.lengths()[1:].mean() - 30) < 3


def test_items_concentrate_in_the_users_cluster(data):
    inter = data.interactions
    hist = inter.histories
    shares = []
    for u in np.flatnonzero(data.drift_step < 0)[1:]:  # users without drift (skip padding)
        items = hist.of(u)
        shares.append(np.mean(data.item_cluster[items] == data.user_cluster[u]))
    assert np.mean(shares) > 0.7  # ~ 1 - dislike_rate
    # the per-row ground truth agrees with the clusters for those users
    rows = data.drift_step[inter.user] < 0
    in_cluster = data.item_cluster[inter.item] == data.user_cluster[inter.user]
    assert np.array_equal(in_cluster[rows], data.row_in_cluster[rows])


def test_feedback_liked_inside_disliked_outside(data):
    label, inside = data.interactions.label, data.row_in_cluster
    assert (label > 0).any() and (label < 0).any() and (label == 0).any()
    assert (label[inside] > 0).mean() > 0.75
    assert (label[~inside] < 0).mean() > 0.7
    assert (~inside[label < 0]).mean() > 0.7  # disliked items are mostly off-cluster
    assert set(np.unique(data.interactions.rating).tolist()) <= {1, 2, 3, 4, 5}


def test_drift_switches_the_preferred_cluster(data):
    inter, hist = data.interactions, data.interactions.histories
    drifting = np.flatnonzero(data.drift_step >= 0)
    assert 0.15 < len(drifting) / inter.n_users < 0.45  # drift=0.3
    late_share = []
    for u in drifting:
        after = hist.of(u)[data.drift_step[u] :]
        assert data.user_cluster_late[u] != data.user_cluster[u]
        late_share.append(np.mean(data.item_cluster[after] == data.user_cluster_late[u]))
    assert np.mean(late_share) > 0.7


def test_next_item_is_predictable_beyond_popularity(data):
    """Leave-last-out: 'most frequent successor of the previous item' vs. the most popular item."""
    hist = data.interactions.histories
    successors: dict[int, Counter] = defaultdict(Counter)
    popularity: Counter = Counter()
    for u in range(1, data.interactions.n_users + 1):
        seq = hist.of(u)[:-1]
        popularity.update(seq.tolist())
        for a, b in zip(seq[:-1], seq[1:]):
            successors[int(a)][int(b)] += 1
    top = popularity.most_common(1)[0][0]
    seq_hits = pop_hits = 0
    for u in range(1, data.interactions.n_users + 1):
        prev, target = hist.of(u)[-2:]
        guess = successors[int(prev)].most_common(1)[0][0] if successors[int(prev)] else top
        seq_hits += guess == target
        pop_hits += top == target
    n = data.interactions.n_users
    assert seq_hits / n > 0.35
    assert seq_hits > 5 * max(pop_hits, 1)


def test_planted_successor_is_followed(data):
    inter = data.interactions
    consecutive = (np.diff(inter.user) == 0) & data.row_in_cluster[:-1] & data.row_in_cluster[1:]
    follows = data.successor[inter.item[:-1]] == inter.item[1:]
    assert follows[consecutive].mean() > 0.6  # ~ seq_strength, diluted by cluster switches


def test_side_information_tied_to_clusters(data):
    feats = data.interactions.item_features
    assert len(data.category_names) == 5 and len(set(data.category_names)) == 5
    for i in range(1, data.interactions.n_items + 1):
        assert feats.categories[i] == [data.category_names[data.item_cluster[i]]]
        assert feats.title[i] and 1970 <= feats.year[i] < 2020
    # titles of one cluster share a vocabulary that other clusters do not use
    words = defaultdict(set)
    for i in range(1, data.interactions.n_items + 1):
        words[data.item_cluster[i]].update(feats.title[i].lower().split()[:2])
    for c in range(5):
        others = set().union(*(words[o] for o in range(5) if o != c))
        assert not words[c] & others


def test_invalid_arguments():
    with pytest.raises(ValueError, match="n_items"):
        make_synthetic(n_items=3, n_clusters=5)
    with pytest.raises(ValueError, match="dislike_rate"):
        make_synthetic(dislike_rate=1.0)
    with pytest.raises(ValueError, match="n_clusters >= 2"):
        make_synthetic(n_clusters=1)
    assert make_synthetic(n_users=20, n_clusters=1, dislike_rate=0, drift=0).interactions.n_users == 20
