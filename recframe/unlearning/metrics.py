"""The unlearning report's metrics, on a model's exact full-catalogue scores of the test users.

Every metric reads the same top-10 lists and ranks the common evaluator uses (seen items masked, held-out
items kept; pessimistic ties, :mod:`recframe.metrics.ranking`), so a method's numbers are comparable with the
model's ordinary test metrics. With ``F`` the forget items (the concept) and ``R`` the retain items:

* **concept exposure** ``= (1 / (U K)) sum_u #{j < K : top_u[j] in F}``: the share of the top-``K`` slots of
  all test users that hold forget items (``K = 10``);
* **forget Recall@K**: Recall@K over the test cases whose held-out item is in ``F`` (the concept is still
  retrieved when it should not be; lower is better);
* **retain NDCG@K**: NDCG@K over the test cases whose held-out item is in ``R`` (utility that must survive),
  reported against the original model as ``retain NDCG@K (method) / retain NDCG@K (original)``;
* **distance to retrain** ``= 1 - (1 / U) sum_u |top_u(method) ∩ top_u(retrain)| / K`` (``1 - overlap@K``,
  in ``[0, 1]``; 0 = the method recommends exactly what the model retrained without the concept does).
  Set overlap rather than a KL of score distributions because the methods' score scales differ (suppression
  puts finite ``-1e9`` scores on masked items), while top-``K`` lists are what users see.

Each model also keeps its **per-user** retain NDCG@K (:attr:`UnlearningMetrics.retain_per_user`, in the order
of the test users, with their ids): which users are retain cases depends only on the data and the concept, so
two models scored on the same batches hold aligned vectors, and a paired interval of their difference is over
the same users (``benchmarks/unlearning_intervals.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from recframe.metrics.ranking import masked_topk, standard_metrics, target_ranks

__all__ = [
    "UnlearningMetrics",
    "concept_exposure",
    "evaluate_unlearning",
    "split_case_metrics",
    "topk_distance",
]


def concept_exposure(top_items: Tensor, ok: Tensor, forget: Tensor) -> float:
    """Share of the valid top-``K`` slots that hold forget items (``forget``: bool ``[n_items + 1]``)."""
    hits = forget[top_items] & ok
    return float(hits.sum()) / max(int(ok.sum()), 1)


def topk_distance(a: Tensor, b: Tensor) -> Tensor:
    """Per row, ``1 - |a_u ∩ b_u| / K`` for two ``[U, K]`` top-``K`` lists (item 0 never counts)."""
    same = (a[:, :, None] == b[:, None, :]) & (a[:, :, None] > 0)
    return 1.0 - same.any(dim=2).sum(dim=1).to(torch.float64) / a.shape[1]


def split_case_metrics(
    scores: Tensor, targets: Tensor, labels: Tensor, seen: Tensor | None, forget: Tensor, k: int = 10
) -> dict[str, Tensor]:
    """Per-user Recall@k on forget targets and NDCG@k on retain targets.

    Returns ``{"forget_recall": [B], "forget_users": [B] bool, "retain_ndcg": [B], "retain_users": [B]}``:
    a user counts in a group when at least one of its held-out items is in it (leave-one-out: its one
    target). Ranks are the evaluator's (``disliked_ties="last"``: every held-out item is relevant).
    """
    ranks, valid = target_ranks(scores, targets, labels, seen, disliked_ties="last")
    is_forget = forget[targets] & valid
    is_retain = ~forget[targets] & valid
    rec = standard_metrics(ranks, is_forget, [k], ("recall",))["recall"][:, 0]
    ndcg = standard_metrics(ranks, is_retain, [k], ("ndcg",))["ndcg"][:, 0]
    return {
        "forget_recall": rec,
        "forget_users": is_forget.any(1),
        "retain_ndcg": ndcg,
        "retain_users": is_retain.any(1),
    }


@dataclass
class UnlearningMetrics:
    """One model's report (see the module docstring); ``top`` holds its test users' top-``K`` lists,
    ``retain_per_user`` the NDCG@K of each retain case (``[n_retain_cases]``, float64) and ``retain_users``
    those cases' user indices (the batches' ``users``, or their positions when a batch has none)."""

    exposure: float
    forget_recall: float
    retain_ndcg: float
    n_forget_cases: int
    n_retain_cases: int
    top: Tensor = field(repr=False)
    retain_per_user: Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.float64), repr=False)
    retain_users: Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long), repr=False)

    def row(
        self, original: UnlearningMetrics | None = None, retrain: UnlearningMetrics | None = None
    ) -> dict[str, float]:
        """The report row: the metrics, retain NDCG relative to ``original`` and distance to ``retrain``."""
        out = {
            "exposure@10": self.exposure,
            "forget_recall@10": self.forget_recall,
            "retain_ndcg@10": self.retain_ndcg,
        }
        if original is not None:
            out["retain_ndcg@10_rel"] = (
                self.retain_ndcg / original.retain_ndcg if original.retain_ndcg else float("nan")
            )
        if retrain is not None:
            out["distance_to_retrain@10"] = float(topk_distance(self.top, retrain.top).mean())
        return out


@torch.no_grad()
def evaluate_unlearning(
    score: Callable[[dict[str, Tensor]], Tensor],
    batches: Iterable[dict[str, Tensor]],
    forget: np.ndarray | Tensor,
    k: int = 10,
) -> UnlearningMetrics:
    """Stream test ``batches`` (``history``, ``seen``, ``targets``, ``labels``) through ``score`` and
    compute :class:`UnlearningMetrics` (averages over users of each group; module docstring)."""
    forget_t = torch.as_tensor(np.asarray(forget), dtype=torch.bool)
    tops, rec, ndcg, users = [], [], [], []
    slots = hits = seen_rows = 0
    for batch in batches:
        scores = score(batch).float().cpu()
        items, ok = masked_topk(scores, batch["targets"], batch.get("seen"), k)
        tops.append(items.masked_fill(~ok, 0))
        hits += int((forget_t[items] & ok).sum())
        slots += int(ok.sum())
        per = split_case_metrics(scores, batch["targets"], batch["labels"], batch.get("seen"), forget_t, k)
        rec.append(per["forget_recall"][per["forget_users"]])
        ndcg.append(per["retain_ndcg"][per["retain_users"]])
        ids = batch.get("users")
        ids = torch.arange(seen_rows, seen_rows + len(scores)) if ids is None else torch.as_tensor(ids)
        users.append(ids.long().cpu()[per["retain_users"]])
        seen_rows += len(scores)
    rec_t, ndcg_t = torch.cat(rec), torch.cat(ndcg)
    return UnlearningMetrics(
        exposure=hits / max(slots, 1),
        forget_recall=float(rec_t.mean()) if len(rec_t) else float("nan"),
        retain_ndcg=float(ndcg_t.mean()) if len(ndcg_t) else float("nan"),
        n_forget_cases=len(rec_t),
        n_retain_cases=len(ndcg_t),
        top=torch.cat(tops),
        retain_per_user=ndcg_t.to(torch.float64),
        retain_users=torch.cat(users),
    )
