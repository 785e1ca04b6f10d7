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


def next_item_loss(hidden: Tensor, target: Tensor, item_weight: Tensor, loss_type: str = "ce",
                   n_negatives: int = 256) -> Tensor:
    """Next-item cross-entropy of hidden states ``[N, d]`` against tied item embeddings ``[n_items + 1, d]``.

    ``ce``: softmax over the full catalogue (padding column excluded),
    ``-log softmax(h W^T)[target]``. ``sampled``: softmax over the target and ``n_negatives``
    uniform negatives shared by the batch, accidental hits masked (uniform proposal, so no log-Q
    correction). The same objective as SASRec's.
    """
    import torch

    if loss_type == "ce":
        logits = hidden @ item_weight.T
        logits[:, 0] = float("-inf")
        return F.cross_entropy(logits, target)
    n_items = item_weight.shape[0] - 1
    neg = torch.randint(1, n_items + 1, (n_negatives,), device=hidden.device)
    pos_logit = (hidden * item_weight[target]).sum(-1, keepdim=True)
    neg_logit = hidden @ item_weight[neg].T
    neg_logit = neg_logit.masked_fill(neg[None, :] == target[:, None], float("-inf"))
    logits = torch.cat([pos_logit, neg_logit], dim=1)
    return F.cross_entropy(logits, torch.zeros(len(target), dtype=torch.long, device=hidden.device))
