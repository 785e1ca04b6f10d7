"""Valence probe: is "liked vs disliked" linearly decodable from a model's frozen embeddings?

Seed ¶4 asks two questions of an embedding model, and this module answers both on the same pairs:

* **probe AUROC**: a logistic-regression probe (scikit-learn) on features of the frozen query and item
  embeddings, trained on the *training* split's labelled pairs and scored (AUROC, liked = positive class)
  on the *test* split's labelled pairs. High: the valence is in the embeddings;
* **score AUROC**: the AUROC of the model's own inner-product score ``<q_u, e_i>`` on the same test pairs.
  High: the valence reaches the ranking. A model with a high probe AUROC and a score AUROC near 0.5 is
  what the seed calls *valence-blind*.

Features (``features``): ``"product"`` (default) is ``q_u ⊙ e_i``; the inner product is the sum of its
coordinates, one fixed linear read-out of exactly these features, so the probe measures what *some* linear
read-out of the score's own terms could achieve. ``"concat"`` is ``[q_u; e_i]`` and ``"both"`` stacks the
two. Features are standardised before the probe (the scales of embedding coordinates differ by model).

Queries: for a model that scores by user id, ``q_u`` is the same for training and test pairs; for one that
reads histories (``uses_history``, SASRec), the training pairs use the query from the training history
(what validation ranks with) and the test pairs the query from the training + validation history (what the
test ranks with), as the evaluator does. Pairs and labels come from :func:`~recframe.models.signed.pairs.
signed_pairs` (each pair's latest label; label-0 pairs are left out).

The home of this module: next to the sign-aware models and the valence add-on, the other pieces of the
seed's method; it depends only on :class:`~recframe.models.base.EmbeddingModel`'s two embedding methods.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import torch

from recframe.data.batches import pad_rows
from recframe.models.signed.pairs import signed_pairs

Features = Literal["product", "concat", "both"]


class ValenceProbe:
    """Logistic-regression probe of liked (+1) vs disliked (-1) on query/item embedding pairs.

    Estimator-style: the constructor stores settings, :meth:`fit` learns ``pipeline_`` (standardisation +
    ``LogisticRegression``).

    Args:
        features: ``product``, ``concat`` or ``both`` (module docstring).
        C: inverse L2 strength of the logistic regression (1.0, scikit-learn's default: the probe should
            find a direction if one exists, not be tuned).
        max_iter: L-BFGS iterations (2000: standardised 64-128 features converge well within it).
        seed: random state of the solver.
    """

    def __init__(self, features: Features = "product", C: float = 1.0, max_iter: int = 2000,
                 seed: int = 0) -> None:
        if features not in ("product", "concat", "both"):
            raise ValueError(f"ValenceProbe: features={features!r}; use 'product', 'concat' or 'both'.")
        self.features, self.C, self.max_iter, self.seed = features, C, max_iter, seed

    def transform(self, queries: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Probe features ``[N, F]`` of paired rows ``queries [N, d]`` and ``items [N, d]``."""
        if self.features == "product":
            return queries * items
        if self.features == "concat":
            return np.concatenate([queries, items], axis=1)
        return np.concatenate([queries * items, queries, items], axis=1)

    def fit(self, queries: np.ndarray, items: np.ndarray, labels: np.ndarray) -> ValenceProbe:
        """Fit on paired embeddings and labels (+1 / -1); both classes must occur."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        y = _binary(labels)
        self.pipeline_ = make_pipeline(
            StandardScaler(), LogisticRegression(C=self.C, max_iter=self.max_iter, random_state=self.seed))
        self.pipeline_.fit(self.transform(queries, items), y)
        return self

    def decision_function(self, queries: np.ndarray, items: np.ndarray) -> np.ndarray:
        """The probe's logit for "liked" per pair."""
        return self.pipeline_.decision_function(self.transform(queries, items))

    def auroc(self, queries: np.ndarray, items: np.ndarray, labels: np.ndarray) -> float:
        """AUROC of the probe on paired embeddings (liked = positive class)."""
        from sklearn.metrics import roc_auc_score

        return float(roc_auc_score(_binary(labels), self.decision_function(queries, items)))


def _binary(labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels)
    y = (labels > 0).astype(np.int64)
    if not ((labels > 0).any() and (labels < 0).any()):
        raise ValueError("the valence probe needs liked (+1) and disliked (-1) pairs; these labels hold "
                         f"{int((labels > 0).sum())} liked and {int((labels < 0).sum())} disliked.")
    return y


@torch.no_grad()
def user_queries(model: Any, users: np.ndarray, histories: Any, max_len: int,
                 batch_size: int = 1024) -> np.ndarray:
    """The model's query embeddings ``[len(users), d]`` (float64) for ``users`` with CSR ``histories``."""
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(users), batch_size):
        rows = np.asarray(users[start:start + batch_size], dtype=np.int64)
        history = pad_rows(histories.indptr, histories.items, rows, max_len)
        batch = {"users": torch.from_numpy(rows).to(device), "history": torch.from_numpy(history).to(device)}
        out.append(model.query_embedding(batch).double().cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, 0))


@torch.no_grad()
def valence_probe(model: Any, split: Any, max_len: int = 50,
                  probe: ValenceProbe | None = None) -> dict[str, Any]:
    """Probe AUROC and score AUROC of an embedding ``model`` on a :class:`~recframe.data.splits.Split`.

    Train pairs: the training split's labelled pairs (queries from the training history); test pairs: the
    test split's labelled pairs (queries from the training + validation history). ``max_len`` is the
    history length a sequential model reads (``data.max_len``). Returns ``probe_auroc`` (test),
    ``probe_train_auroc``, ``score_auroc`` (the model's inner product on the test pairs), the pair counts
    and the feature kind.
    """
    from sklearn.metrics import roc_auc_score

    probe = probe or ValenceProbe()
    was_training = model.training
    model.eval()
    try:
        items_emb = model.item_embeddings().double().cpu().numpy()
        train_known = split.train.histories
        test_known = split.train.concat(split.valid).histories
        parts = {}
        for name, inter, known in (("train", split.train, train_known), ("test", split.test, test_known)):
            users, items, labels = signed_pairs(inter)
            keep = labels != 0
            users, items, labels = users[keep], items[keep], labels[keep]
            uniq, inverse = np.unique(users, return_inverse=True)
            queries = user_queries(model, uniq, known, max_len)[inverse]
            parts[name] = (queries, items_emb[items], labels)
    finally:
        model.train(was_training)
    probe.fit(*parts["train"])
    q_test, e_test, y_test = parts["test"]
    return {
        "probe_auroc": probe.auroc(*parts["test"]),
        "probe_train_auroc": probe.auroc(*parts["train"]),
        "score_auroc": float(roc_auc_score(_binary(y_test), (q_test * e_test).sum(1))),
        "n_train_pairs": int(len(parts["train"][2])),
        "n_test_pairs": int(len(y_test)),
        "features": probe.features,
    }


__all__ = ["ValenceProbe", "user_queries", "valence_probe"]
