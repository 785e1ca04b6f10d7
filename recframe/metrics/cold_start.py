"""Cold-start evaluation: rank the held-out cold items for each cold case (:mod:`recframe.data.cold_start`).

For case ``n`` the model scores the full catalogue from the user's warm history (``score`` of a batch with
``history`` and ``users``, as in evaluation); the ranking keeps the cold items only, minus the user's other
cold items (``masked``). Ranks are the evaluator's pessimistic ranks (:func:`target_ranks`: an item tied with
the target counts as ranked above it, so a model that scores every cold item alike gets the worst rank, not
a lucky one) and the metrics its per-user definitions (:func:`standard_metrics`), averaged over cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from recframe.data.batches import pad_rows
from recframe.data.cold_start import ColdEvalSet
from recframe.metrics.ranking import standard_metrics, target_ranks

__all__ = ["cold_start_ranks", "cold_start_metrics"]


@torch.no_grad()
def cold_start_ranks(model: Any, cases: ColdEvalSet, max_len: int, batch_size: int = 256) -> np.ndarray:
    """0-based pessimistic rank of each case's target among the eligible cold items, ``[n_cases]``."""
    cold = torch.as_tensor(cases.cold_items, dtype=torch.long)
    column = torch.full((int(cold.max()) + 1,), -1, dtype=torch.long)
    column[cold] = torch.arange(1, len(cold) + 1)  # cold item -> its column in the cold-only score matrix
    lengths = np.array([len(h) for h in cases.histories], dtype=np.int64)
    indptr = np.concatenate([[0], np.cumsum(lengths)])
    values = np.concatenate(cases.histories) if len(cases) else np.zeros(0, np.int64)
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    out = []
    for start in range(0, len(cases), batch_size):
        rows = np.arange(start, min(start + batch_size, len(cases)))
        history = torch.as_tensor(pad_rows(indptr, values, rows, max_len=max_len), device=device)
        users = torch.as_tensor(cases.users[rows], device=device)
        scores = model.score({"history": history, "users": users}).float().cpu()
        sub = torch.cat([torch.full((len(rows), 1), float("-inf")), scores[:, cold]], dim=1)
        targets = column[torch.as_tensor(cases.targets[rows])][:, None]
        width = max((len(cases.masked[r]) for r in rows), default=0)
        seen = torch.zeros(len(rows), max(width, 1), dtype=torch.long)  # column 0 = padding, never eligible
        for i, r in enumerate(rows):
            if len(cases.masked[r]):
                seen[i, : len(cases.masked[r])] = column[torch.as_tensor(cases.masked[r])]
        ranks, _ = target_ranks(sub, targets, torch.zeros_like(targets, dtype=torch.int8), seen=seen,
                                model_name=type(model).__name__)
        out.append(ranks[:, 0])
    return torch.cat(out).numpy() if out else np.zeros(0, dtype=np.int64)


def cold_start_metrics(ranks: np.ndarray, ks: Sequence[int] = (10, 20)) -> dict[str, float]:
    """Mean NDCG/Recall/HR@K over the cases from their ranks (one held-out item per case)."""
    r = torch.as_tensor(ranks, dtype=torch.long)[:, None]
    per_user = standard_metrics(r, torch.ones_like(r, dtype=torch.bool), list(ks), metrics=("ndcg", "recall"))
    return {f"{name}@{k}": float(values[:, j].mean()) for name, values in per_user.items()
            for j, k in enumerate(ks)}
