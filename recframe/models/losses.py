"""Loss pieces shared by several models."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def bpr_loss(pos_scores: Tensor, neg_scores: Tensor) -> Tensor:
    """Bayesian personalised ranking: ``mean(-log sigmoid(s_pos - s_neg))``."""
    return -F.logsigmoid(pos_scores - neg_scores).mean()


def embedding_l2(*embeddings: Tensor) -> Tensor:
    """``sum_e ||e||^2 / (2 B)``: the per-batch L2 penalty of BPR-MF and LightGCN."""
    batch = embeddings[0].shape[0]
    return sum(e.pow(2).sum() for e in embeddings) / (2 * batch)
