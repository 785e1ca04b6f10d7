"""Semantic Divergence, CIM's core score (seed ¶16): a divergence of predictive distributions in meaning
space.

CIM compares the predictive distribution ``p = p(· | x)`` on the original input with ``q = p(· | x ⊙ m)`` on
a causally-focused view. Two predictions that move mass between near-synonymous outcomes (two sequels, two
items the model embeds alike) have not changed their meaning, so the comparison is made over *semantic
classes* of outcomes rather than over the outcomes themselves, as semantic entropy does (Kuhn et al., ICLR
2023: cluster sampled answers by meaning, then measure over clusters). Here the outcomes are items (or
answer options) with embeddings, so the classes are fixed once, by k-means on the normalised outcome
embeddings (spherical k-means-like: Euclidean k-means on unit vectors, ``n_clusters`` classes, fixed seed):

    P_c = Σ_{i : c(i) = c} p_i,     Q_c = Σ_{i : c(i) = c} q_i,

    SD(x) = JS(P, Q) = ½ KL(P ‖ M) + ½ KL(Q ‖ M),   M = ½ (P + Q),   in nats, 0 ≤ SD ≤ ln 2.

Choice, stated: Jensen–Shannon rather than KL because it is symmetric, bounded and finite when a focused view
puts mass where the original puts none; clusters rather than an optimal-transport cost because OT over
``n_items`` outcomes per example is far slower (EED is meant to be the fast score, not SD) and the paper's
divergence is over semantic-equivalence classes. ``n_clusters = 1`` makes SD identically 0; ``n_clusters =
number of outcomes`` (each its own class) gives the plain JS of the two distributions.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor


def js_divergence(p: Tensor, q: Tensor, eps: float = 1e-12) -> Tensor:
    """Jensen–Shannon divergence ``[N]`` (nats) between rows of probability tensors ``p, q [N, K]``."""
    if p.shape != q.shape:
        raise ValueError(f"js_divergence needs equal shapes, got {tuple(p.shape)} and {tuple(q.shape)}.")
    p, q = p.double(), q.double()
    m = 0.5 * (p + q)

    def kl(a: Tensor) -> Tensor:
        terms = a * (torch.log(a.clamp_min(eps)) - torch.log(m.clamp_min(eps)))
        return torch.where(a > 0, terms, 0.0).sum(-1)

    return (0.5 * kl(p) + 0.5 * kl(q)).clamp_min(0.0)


class SemanticClusters:
    """Semantic classes of outcomes: k-means on unit-normalised outcome embeddings (module docstring).

    Args:
        n_clusters: number of classes (capped at the number of eligible outcomes).
        seed: k-means seed.
        skip_first: outcome 0 is padding (recframe item ids): it gets its own class and never takes part in
            the k-means.

    Attributes:
        labels_: ``int64 [C]`` class of every outcome (after :meth:`fit`).
        n_classes_: number of classes (including the padding class when ``skip_first``).
    """

    def __init__(self, n_clusters: int = 32, seed: int = 0, skip_first: bool = True) -> None:
        if int(n_clusters) < 1:
            raise ValueError(f"n_clusters={n_clusters}; it must be >= 1 (1 makes Semantic Divergence 0).")
        self.n_clusters = int(n_clusters)
        self.seed = int(seed)
        self.skip_first = bool(skip_first)

    def fit(self, embeddings: Tensor | np.ndarray) -> SemanticClusters:
        """Cluster the outcome embeddings ``[C, d]``."""
        from sklearn.cluster import KMeans

        emb = torch.as_tensor(np.asarray(embeddings.detach().cpu() if isinstance(embeddings, Tensor)
                                         else embeddings), dtype=torch.float64)
        first = 1 if self.skip_first else 0
        real = torch.nn.functional.normalize(emb[first:], dim=1).numpy()
        if len(real) == 0:
            raise ValueError("SemanticClusters.fit got no outcome embeddings to cluster.")
        k = min(self.n_clusters, len(real))
        if k == len(real):
            labels = np.arange(len(real))
        elif k == 1:
            labels = np.zeros(len(real), dtype=np.int64)
        else:
            labels = KMeans(n_clusters=k, n_init=4, random_state=self.seed).fit_predict(real)
        labels = np.asarray(labels, dtype=np.int64) + first
        self.labels_ = torch.from_numpy(np.concatenate([np.zeros(first, dtype=np.int64), labels]))
        self.n_classes_ = k + first
        return self

    def aggregate(self, probs: Tensor) -> Tensor:
        """Class probabilities ``[N, n_classes_]`` from outcome probabilities ``[N, C]``."""
        if not hasattr(self, "labels_"):
            raise RuntimeError("SemanticClusters is not fitted; call fit(outcome_embeddings) first.")
        if probs.shape[-1] != len(self.labels_):
            raise ValueError(f"probabilities have {probs.shape[-1]} outcomes but the clusters were fitted on "
                             f"{len(self.labels_)}; fit on the same model's outcome embeddings.")
        out = torch.zeros(probs.shape[0], self.n_classes_, dtype=probs.dtype, device=probs.device)
        return out.index_add_(1, self.labels_.to(probs.device), probs)


def semantic_divergence(log_p: Tensor, log_q: Tensor, clusters: SemanticClusters) -> Tensor:
    """``SD [N]``: JS divergence of the class distributions of ``exp(log_p)`` and ``exp(log_q)`` [N, C]."""
    return js_divergence(clusters.aggregate(log_p.exp()), clusters.aggregate(log_q.exp()))
