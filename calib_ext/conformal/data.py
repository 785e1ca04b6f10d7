"""Two multi-label tasks for Conformal Severity Control: synthetic EHR medications and ML-100K genres.

Each builder trains a small predictor on a training part and returns its per-label probabilities on
a held-out **pool**, which the benchmark splits at random into calibration and test halves. The
predictor is never retrained by CSC.

**Synthetic EHR** (:func:`synthetic_ehr`). The label tree is a real-looking 7-character ATC tree
(:func:`synthetic_atc_codes`): anatomical groups drawn from real first letters, two-digit therapeutic
subgroups, letter pharmacological and chemical subgroups, two-digit substances (e.g. ``C07AB02``).
Visits are generated as

1. a latent patient state ``z ~ N(0, I_4)``;
2. diagnoses: ``1 + min(Poisson(1.2), 3)`` distinct codes drawn with probabilities
   ``softmax(b_d + w_d . z)``; every diagnosis ``d`` has a therapy node, a chemical subgroup ``g(d)``;
3. medications: for each diagnosis, one substance. The substance is chosen inside ``g(d)`` by
   ``softmax(a_s . z)`` (strength ``sibling_strength``); with probability ``p_cousin`` from the *other*
   chemical subgroup of the same pharmacological subgroup, and with probability ``p_random`` anywhere.
   Each visit also receives each of three chronic background drugs with probability
   ``sigmoid(-1.5 + c_k . z)``;
4. features the model sees: the diagnosis multi-hot with each code dropped with probability
   ``p_unrecorded`` (an unrecorded diagnosis whose drug the model can only guess) and one spurious code
   with probability ``p_spurious``; the state observed with noise, ``z + N(0, 0.7^2)``; and their products
   (diagnosis x state), so a linear read-out can express "diagnosis d and high z_k".

The substance depends on a noisily observed state, so the predictor knows the chemical subgroup far
better than the substance: its errors land on sibling codes more often than on distant ones -- the
hierarchy-correlated errors of real medication recommenders. The predictor is scikit-learn's
``MLPClassifier`` (one hidden layer of 64, sigmoid outputs per label, early stopping).

**ML-100K genres** (:func:`ml100k_genres`). An item's genre set (18 genres; the placeholder genre
"unknown" is dropped, and items left with no genre are skipped) is predicted from the item's
MiniLM embedding of its *title and year only* (the genre words that ``ItemFeatures.texts()`` appends
are left out, so labels do not leak into inputs) concatenated with a collaborative embedding: the
item factors of a 32-component truncated SVD of the binary user x item interaction matrix. Both
blocks are standardised; the predictor is one-vs-rest logistic regression (C = 0.5). Items are split
50/50 at random (by seed) into training and pool. The genre tree (:data:`GENRE_GROUPS`) has two
levels: six documented groups under the root, then genres; siblings are 2 apart, genres of different
groups 4.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from calib_ext.conformal.hierarchy import Hierarchy

ATC_FIRST_LETTERS = "ABCDGHJLMNPRSV"  # the 14 real anatomical main groups

# Two-level ML-100K genre tree: group -> genres. Groups follow common film-genre families: physical
# action and conflict; dark / suspense (crime, noir, mystery, thriller, horror); speculative worlds;
# family and light entertainment; character-driven drama; non-fiction.
GENRE_GROUPS: dict[str, tuple[str, ...]] = {
    "Action & adventure": ("Action", "Adventure", "War", "Western"),
    "Dark & suspense": ("Crime", "Film-Noir", "Mystery", "Thriller", "Horror"),
    "Speculative": ("Sci-Fi", "Fantasy"),
    "Family & light": ("Animation", "Children's", "Comedy", "Musical"),
    "Drama & romance": ("Drama", "Romance"),
    "Non-fiction": ("Documentary",),
}


@dataclass
class MultiLabelTask:
    """A fitted predictor's pool scores with true label sets, and the label tree.

    Attributes:
        name: task name.
        hierarchy: the label tree.
        labels: label names, one per score column.
        scores: ``[n_pool, L]`` predicted probabilities on the held-out pool.
        true: boolean ``[n_pool, L]`` true label sets of the pool.
        info: sizes, model and data facts (JSON-ready).
    """

    name: str
    hierarchy: Hierarchy
    labels: list[str]
    scores: np.ndarray
    true: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)


def synthetic_atc_codes(rng: np.random.Generator, n_anatomical: int = 6, n_therapeutic: int = 2,
                        n_pharmacological: int = 2, n_chemical: int = 2, n_substances: int = 2) -> list[str]:
    """Real-looking 7-character ATC codes: ``n_anatomical * ... * n_substances`` distinct substances."""
    if not 1 <= n_anatomical <= len(ATC_FIRST_LETTERS):
        raise ValueError(f"n_anatomical must be in 1..{len(ATC_FIRST_LETTERS)}; got {n_anatomical}.")
    for key, val, top in (("n_therapeutic", n_therapeutic, 99), ("n_pharmacological", n_pharmacological, 26),
                          ("n_chemical", n_chemical, 26), ("n_substances", n_substances, 99)):
        if not 1 <= val <= top:
            raise ValueError(f"{key} must be in 1..{top}; got {val}.")
    codes = []
    for a in sorted(rng.choice(list(ATC_FIRST_LETTERS), n_anatomical, replace=False)):
        for t in sorted(rng.choice(np.arange(1, 30), n_therapeutic, replace=False)):
            for p in string.ascii_uppercase[:n_pharmacological]:
                for c in string.ascii_uppercase[:n_chemical]:
                    for s in sorted(rng.choice(np.arange(1, 20), n_substances, replace=False)):
                        codes.append(f"{a}{t:02d}{p}{c}{s:02d}")
    return codes


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def simulate_visits(seed: int, n_visits: int, *, n_diagnoses: int = 24, sibling_strength: float = 1.5,
                    p_cousin: float = 0.2, p_random: float = 0.04, p_unrecorded: float = 0.15,
                    p_spurious: float = 0.1) -> tuple[np.ndarray, np.ndarray, list[str], Hierarchy]:
    """Features ``[n, d]``, true medication matrix ``[n, L]``, ATC labels and tree (module docstring)."""
    rng = np.random.default_rng(seed)
    labels = synthetic_atc_codes(rng)
    tree = Hierarchy.from_atc_codes(labels)
    col = {lab: j for j, lab in enumerate(labels)}
    chem = sorted({lab[:5] for lab in labels})
    if n_diagnoses > len(chem):
        raise ValueError(f"n_diagnoses={n_diagnoses} exceeds the {len(chem)} chemical subgroups of the tree.")
    therapy = rng.choice(len(chem), n_diagnoses, replace=False)  # diagnosis -> chemical subgroup
    members = {g: [col[lab] for lab in labels if lab[:5] == g] for g in chem}
    cousins = {g: [h for h in chem if h[:4] == g[:4] and h != g] for g in chem}
    n_state = 4
    b_diag, w_diag = rng.normal(0, 0.7, n_diagnoses), rng.normal(0, 0.8, (n_diagnoses, n_state))
    a_drug = rng.normal(0, sibling_strength, (len(labels), n_state))
    background = rng.choice(len(labels), 3, replace=False)
    c_back = rng.normal(0, 1.0, (3, n_state))

    z = rng.normal(size=(n_visits, n_state))
    diag = np.zeros((n_visits, n_diagnoses), dtype=bool)
    meds = np.zeros((n_visits, len(labels)), dtype=bool)
    for i in range(n_visits):
        k = 1 + min(rng.poisson(1.2), 3)
        probs = _softmax(b_diag + w_diag @ z[i])
        for d in rng.choice(n_diagnoses, k, replace=False, p=probs):
            diag[i, d] = True
            g = chem[therapy[d]]
            u = rng.random()
            if u < p_random:
                meds[i, rng.integers(len(labels))] = True
                continue
            if u < p_random + p_cousin and cousins[g]:
                g = cousins[g][rng.integers(len(cousins[g]))]
            cand = members[g]
            meds[i, cand[rng.choice(len(cand), p=_softmax(a_drug[cand] @ z[i]))]] = True
        back = rng.random(3) < 1.0 / (1.0 + np.exp(1.5 - c_back @ z[i]))
        meds[i, background[back]] = True
    seen = diag & (rng.random(diag.shape) >= p_unrecorded)
    spurious = rng.random(n_visits) < p_spurious
    seen[np.flatnonzero(spurious), rng.integers(n_diagnoses, size=int(spurious.sum()))] = True
    z_obs = z + rng.normal(0, 0.7, z.shape)
    cross = (seen[:, :, None] * z_obs[:, None, :]).reshape(n_visits, -1)
    x = np.concatenate([seen.astype(float), z_obs, cross], axis=1)
    return x, meds, labels, tree


def synthetic_ehr(seed: int = 0, n_train: int = 4000, n_pool: int = 3000, **kwargs: Any) -> MultiLabelTask:
    """The synthetic EHR task (module docstring): an MLP trained on ``n_train`` visits scores ``n_pool``."""
    from sklearn.neural_network import MLPClassifier

    x, meds, labels, tree = simulate_visits(seed, n_train + n_pool, **kwargs)
    model = MLPClassifier(hidden_layer_sizes=(64,), alpha=1e-3, max_iter=300, early_stopping=True,
                          random_state=seed)
    model.fit(x[:n_train], meds[:n_train].astype(int))
    scores = np.asarray(model.predict_proba(x[n_train:]))
    true = meds[n_train:]
    info = {"n_train": n_train, "n_pool": n_pool, "n_labels": len(labels), "features": x.shape[1],
            "mean_true_per_visit": float(true.sum(1).mean()), "model": "MLPClassifier(64), early stopping",
            **sibling_error_share(scores, true, tree, labels)}
    return MultiLabelTask("synthetic EHR (ATC)", tree, labels, np.clip(scores, 0.0, 1.0), true, info)


def sibling_error_share(scores: np.ndarray, true: np.ndarray, tree: Hierarchy, labels: list[str]
                        ) -> dict[str, float]:
    """How close the predictor's errors are: for each instance's top-scored *wrong* label, the share at
    the smallest nonzero tree distance from the nearest true label (a sibling), against the share a
    uniformly random wrong label would have."""
    dist = tree.distance_matrix(labels).astype(float)
    sib = np.unique(dist)[1]
    masked = np.where(true, -np.inf, scores)
    top = masked.argmax(1)
    has = true.any(1) & (~true).any(1)
    near = np.where(true, dist[top], np.inf).min(1)  # distance of the top wrong label to the nearest true one
    rand = np.where(true[:, None, :], dist[None, :, :], np.inf).min(2)  # [n, L] each label's nearest true
    chance = ((rand == sib) & ~true).sum(1) / np.maximum((~true).sum(1), 1)
    return {"top_error_sibling_share": float((near[has] == sib).mean()),
            "random_error_sibling_share": float(chance[has].mean())}


def genre_hierarchy() -> Hierarchy:
    """The two-level ML-100K genre tree of :data:`GENRE_GROUPS`."""
    parent: dict[str, str | None] = {}
    for group, genres in GENRE_GROUPS.items():
        for g in genres:
            parent[g] = group
    return Hierarchy.from_parent_map(parent)


def ml100k_genres(seed: int = 0, *, root: str | None = None, encoder: str = "all-MiniLM-L6-v2",
                  svd_dim: int = 32) -> MultiLabelTask:
    """The ML-100K genre task (module docstring). ``root``: dataset root (default: recframe's)."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.preprocessing import StandardScaler

    from recframe.data import catalog
    from recframe.features.text_encoder import text_embeddings

    inter = catalog.load("ml-100k", root)
    feats = inter.item_features
    if feats is None or feats.categories is None or feats.title is None:
        raise ValueError("ml-100k was loaded without item titles/genres; prepare it again with "
                         "`recframe data prepare ml-100k --force`.")
    labels = [g for genres in GENRE_GROUPS.values() for g in genres]
    tree = genre_hierarchy()
    col = {g: j for j, g in enumerate(labels)}
    n_items = inter.n_items
    true = np.zeros((n_items + 1, len(labels)), dtype=bool)
    for i, cats in enumerate(feats.categories):
        for c in cats or []:
            if c in col:
                true[i, col[c]] = True
    texts = [""] + [str(t) + (f" ({int(y)})" if feats.year is not None and y else "")
                    for t, y in zip(feats.title[1:], (feats.year[1:] if feats.year is not None
                                                      else [0] * n_items))]
    text = text_embeddings(texts, encoder=encoder)
    from scipy import sparse

    rows, cols = np.asarray(inter.item), np.asarray(inter.user)
    mat = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n_items + 1, inter.n_users + 1))
    mat.data[:] = 1.0
    collab = TruncatedSVD(svd_dim, random_state=seed).fit_transform(mat)
    items = np.flatnonzero(true.any(1))
    x = np.concatenate([StandardScaler().fit_transform(text[items]),
                        StandardScaler().fit_transform(collab[items])], axis=1)
    y = true[items]
    perm = np.random.default_rng(seed).permutation(len(items))
    tr, pool = perm[: len(items) // 2], perm[len(items) // 2:]
    model = OneVsRestClassifier(LogisticRegression(C=0.5, max_iter=2000))
    model.fit(x[tr], y[tr].astype(int))
    scores = np.clip(model.predict_proba(x[pool]), 0.0, 1.0)
    info = {"n_train": len(tr), "n_pool": len(pool), "n_labels": len(labels), "features": x.shape[1],
            "mean_true_per_item": float(y[pool].sum(1).mean()),
            "model": "one-vs-rest logistic regression (C=0.5) on MiniLM title+year and SVD-32 collaborative",
            **sibling_error_share(scores, y[pool], tree, labels)}
    return MultiLabelTask("ML-100K genres", tree, labels, scores, y[pool], info)
