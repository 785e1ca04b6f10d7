"""Signed full-ranking metrics that explicitly penalise recommending disliked content.

Gain of an item: ``g = +1`` for a held-out liked item (label +1), ``g = -lambda`` for a held-out disliked item
(label -1), and ``0`` for unobserved items and for held-out items with unknown rating (label 0). ``L`` /
``D`` are the liked / disliked held-out items of a user, ``r_t`` the 0-based pessimistic rank from
:func:`recframe.metrics.ranking.target_ranks` with ``disliked_ties="first"`` (a disliked item ranks before
every item it ties with, a liked one after; what :class:`~recframe.metrics.families.SignedFamily` uses) and
``hit_t = [r_t < K]``.

User rules: users with ``|L| = 0`` are excluded from Signed Recall and Signed NDCG (their denominator is 0)
but are kept in Signed HR as long as they have at least one held-out item (of any label).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from recframe.metrics.ranking import ideal_dcg_table

SIGNED_METRICS: tuple[str, ...] = ("signed_recall", "signed_hr", "signed_ndcg")


def signed_user_masks(labels: Tensor, valid: Tensor) -> dict[str, Tensor]:
    """Which users count in each signed metric: ``{name: bool [B]}``.

    ``signed_recall`` / ``signed_ndcg``: ``|L| > 0``; ``signed_hr``: at least one valid held-out item.
    """
    has_liked = (valid & (labels == 1)).any(dim=1)
    return {"signed_recall": has_liked, "signed_ndcg": has_liked, "signed_hr": valid.any(dim=1)}


def signed_metrics(
    ranks: Tensor, labels: Tensor, valid: Tensor, ks: Sequence[int], signed_lambda: float = 1.0
) -> dict[str, Tensor]:
    """Per-user signed metrics at every ``K`` in ``ks``: ``{name: float64 [B, len(ks)]}``.

    * ``signed_recall``: ``(#{t in L: hit_t} - lambda * #{t in D: hit_t}) / |L|``
    * ``signed_hr``:     ``1[exists t in L: hit_t] - lambda * 1[exists t in D: hit_t]``
    * ``signed_ndcg``:   ``sum_{t in L u D, hit_t} g_t / log2(r_t + 2) / IDCG_L`` with
      ``IDCG_L = sum_{i < min(|L|, K)} 1/log2(i + 2)``; can be negative.

    Users excluded by :func:`signed_user_masks` get 0 and must be left out of averages by the caller.
    """
    kt = torch.as_tensor(list(ks), dtype=torch.long, device=ranks.device)
    liked = valid & (labels == 1)
    disliked = valid & (labels == -1)
    hit = (ranks[:, :, None] < kt) & valid[:, :, None]  # [B, T, nK]
    liked_hits = (hit & liked[:, :, None]).sum(dim=1, dtype=torch.float64)
    disliked_hits = (hit & disliked[:, :, None]).sum(dim=1, dtype=torch.float64)
    n_liked = liked.sum(dim=1)

    gain = liked.to(torch.float64) - signed_lambda * disliked.to(torch.float64)  # [B, T]
    discounted = gain / torch.log2(ranks.to(torch.float64) + 2.0)
    dcg = (hit * discounted[:, :, None]).sum(dim=1)
    idcg = ideal_dcg_table(int(max(ks)), ranks.device)[torch.minimum(n_liked[:, None], kt)]
    return {
        "signed_recall": (liked_hits - signed_lambda * disliked_hits) / n_liked.clamp(min=1)[:, None],
        "signed_hr": (liked_hits > 0).double() - signed_lambda * (disliked_hits > 0).double(),
        "signed_ndcg": torch.where(idcg > 0, dcg / idcg.clamp(min=1e-300), torch.zeros_like(dcg)),
    }


def disliked_hits(ranks: Tensor, labels: Tensor, valid: Tensor, ks: Sequence[int]) -> Tensor:
    """Held-out disliked items in each user's top ``K``: ``#{t in D: hit_t}``, float64 ``[B, len(ks)]``.

    With ``disliked_ties="first"`` ranks (a disliked item ranks before every item it ties with), so a tie
    never hides a disliked hit. What Signed Recall subtracts before dividing by ``|L|``, as a count.
    """
    kt = torch.as_tensor(list(ks), dtype=torch.long, device=ranks.device)
    disliked = valid & (labels == -1)
    hit = (ranks[:, :, None] < kt) & disliked[:, :, None]
    return hit.sum(dim=1, dtype=torch.float64)
