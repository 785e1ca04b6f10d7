"""Streaming full-ranking evaluator: feed score chunks with :meth:`FullRankingEvaluator.update`, read
averages with :meth:`FullRankingEvaluator.compute`.

Only one ``[B, n_items + 1]`` chunk of scores exists at a time; the evaluator keeps float64 running sums per
(metric, K), float64 user counts per metric and, for item coverage, int64 per-item counts of top-K
appearances. All of them are plain sums, so results do not depend on the chunk size (up to float64
summation order, ~1e-15) and the state can be all-reduced with ``sum`` across processes
(:meth:`~FullRankingEvaluator.state_tensors` / :meth:`~FullRankingEvaluator.load_state_tensors`).

Ranking rules (masking, pessimistic ties, padding, duplicate targets) are those of
:mod:`recframe.metrics.ranking`; signed metrics are defined in :mod:`recframe.metrics.signed`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from recframe.metrics.ranking import (
    STANDARD_METRICS,
    masked_topk,
    standard_metrics,
    target_ranks,
)
from recframe.metrics.signed import SIGNED_METRICS, signed_metrics, signed_user_masks

VALID_METRICS: tuple[str, ...] = (*STANDARD_METRICS, "item_coverage")
RELEVANCE_MODES: tuple[str, ...] = ("all", "liked")


class FullRankingEvaluator:
    """Accumulates full-ranking metrics at several cut-offs over streamed chunks of users.

    Reported keys are ``"{metric}@{K}"`` for every requested metric and ``K`` in ``ks`` and, when
    ``signed=True``, also ``signed_recall@K``, ``signed_hr@K`` and ``signed_ndcg@K``.

    * ``relevance="all"``: every held-out item is relevant (leave-one-out, implicit feedback);
      ``relevance="liked"``: only held-out items labelled +1 are relevant, disliked/unknown ones have
      utility 0.
    * Standard metrics average over users with at least one relevant held-out item; signed metrics follow the
      user rules of :mod:`recframe.metrics.signed`. An average over zero users is reported as ``nan``.
    * ``item_coverage@K = |union over users of top-K eligible items| / n_items``, over every row that has at
      least one held-out item; the top-K comes from :func:`torch.topk` (via
      :func:`~recframe.metrics.ranking.masked_topk`), so ties inside it follow topk's order.

    Formulas are in :func:`recframe.metrics.ranking.standard_metrics` (``map`` uses ranx's denominator
    ``|R|``) and :func:`recframe.metrics.signed.signed_metrics`.
    """

    def __init__(
        self,
        n_items: int,
        ks: Sequence[int] = (10, 20),
        metrics: Sequence[str] = ("recall", "hr", "ndcg", "mrr", "precision", "map", "item_coverage"),
        signed: bool = False,
        signed_lambda: float = 1.0,
        relevance: str = "all",
    ) -> None:
        if isinstance(metrics, str):
            metrics = (metrics,)
        if isinstance(ks, int):
            ks = (ks,)
        unknown = [m for m in metrics if m not in VALID_METRICS]
        if unknown:
            raise ValueError(f"unknown metric name(s) {unknown}; valid names: {list(VALID_METRICS)}")
        if not metrics and not signed:
            raise ValueError(f"nothing to compute: pass metrics from {list(VALID_METRICS)} or signed=True")
        if relevance not in RELEVANCE_MODES:
            raise ValueError(f"relevance must be one of {list(RELEVANCE_MODES)}, got {relevance!r}")
        if not ks or any(isinstance(k, bool) or int(k) != k or k < 1 for k in ks):
            raise ValueError(f"ks must be a non-empty list of positive integers, got {list(ks)}")
        if int(n_items) < 1:
            raise ValueError(f"n_items must be >= 1, got {n_items}")
        if not math.isfinite(signed_lambda):
            raise ValueError(f"signed_lambda must be finite, got {signed_lambda}")
        self.n_items = int(n_items)
        self.ks: tuple[int, ...] = tuple(dict.fromkeys(int(k) for k in ks))
        self.metrics: tuple[str, ...] = tuple(dict.fromkeys(metrics))
        self.signed = bool(signed)
        self.signed_lambda = float(signed_lambda)
        self.relevance = relevance
        self._per_user = tuple(m for m in self.metrics if m in STANDARD_METRICS)
        self._averaged = self._per_user + (SIGNED_METRICS if self.signed else ())
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self, device: torch.device | str | None = None) -> None:
        """Zero all running sums, counts and coverage counts (optionally placing them on ``device``)."""
        device = torch.device(device) if device is not None else torch.device("cpu")
        self._device = device
        n_k = len(self.ks)
        self._state: dict[str, Tensor] = {}
        for name in self._averaged:
            self._state[f"sum/{name}"] = torch.zeros(n_k, dtype=torch.float64, device=device)
            self._state[f"count/{name}"] = torch.zeros((), dtype=torch.float64, device=device)
        if "item_coverage" in self.metrics:
            self._state["coverage"] = torch.zeros(n_k, self.n_items + 1, dtype=torch.long, device=device)

    @property
    def device(self) -> torch.device:
        """Device holding the running state (follows the device of the scores passed to :meth:`update`)."""
        return self._device

    def state_tensors(self) -> dict[str, Tensor]:
        """Copies of the running state for a distributed ``all_reduce(sum)``.

        Keys: ``sum/{metric}`` (float64 ``[len(ks)]``), ``count/{metric}`` (float64 scalar) and, with
        ``item_coverage``, ``coverage`` (int64 ``[len(ks), n_items + 1]``: how many users had each item in
        their top-K). Reduce every tensor with ``sum`` and pass the dict to :meth:`load_state_tensors`.
        """
        return {key: value.clone() for key, value in self._state.items()}

    def load_state_tensors(self, state: dict[str, Tensor]) -> None:
        """Replace the running state by ``state`` (e.g. :meth:`state_tensors` after an all-reduce)."""
        if set(state) != set(self._state):
            raise ValueError(f"state keys {sorted(state)} do not match the evaluator's {sorted(self._state)}")
        for key, current in self._state.items():
            value = torch.as_tensor(state[key])
            if value.shape != current.shape:
                raise ValueError(
                    f"state {key!r} has shape {tuple(value.shape)}, expected {tuple(current.shape)}"
                )
            self._state[key] = value.to(device=current.device, dtype=current.dtype).clone()

    # ----------------------------------------------------------------- update
    @torch.no_grad()
    def update(
        self,
        scores: Tensor,
        targets: Tensor,
        labels: Tensor,
        seen: Tensor | None = None,
        model_name: str = "model",
    ) -> None:
        """Add one chunk of users.

        ``scores`` ``[B, n_items + 1]`` (any float dtype, any device); ``targets`` ``[B, T]`` held-out ids
        (0 = pad); ``labels`` ``[B, T]`` in {-1, 0, +1}; ``seen`` ``[B, S]`` ids to mask (0 = pad), never
        masking a held-out item. Raises :class:`~recframe.metrics.ranking.NonFiniteScoresError` naming
        ``model_name`` if ``scores`` has NaN/inf in columns ``1..n_items``.
        """
        scores, targets, labels, seen = self._check_inputs(scores, targets, labels, seen)
        if scores.device != self.device:
            self._state = {key: value.to(scores.device) for key, value in self._state.items()}
            self._device = scores.device
        ranks, valid = target_ranks(scores, targets, labels, seen, model_name=model_name)
        ks = self.ks

        if self._per_user:
            relevant = valid if self.relevance == "all" else valid & (labels == 1)
            user_ok = relevant.any(dim=1)
            values = standard_metrics(ranks, relevant, ks, self._per_user)
            self._accumulate(values, dict.fromkeys(values, user_ok))
        if self.signed:
            values = signed_metrics(ranks, labels, valid, ks, self.signed_lambda)
            self._accumulate(values, signed_user_masks(labels, valid))
        if "item_coverage" in self.metrics:
            self._update_coverage(scores, targets, seen, valid.any(dim=1))

    def _accumulate(self, values: dict[str, Tensor], user_masks: dict[str, Tensor]) -> None:
        for name, per_user in values.items():
            mask = user_masks[name]
            self._state[f"sum/{name}"] += torch.where(mask[:, None], per_user, 0.0).sum(dim=0)
            self._state[f"count/{name}"] += mask.sum(dtype=torch.float64)

    def _update_coverage(self, scores: Tensor, targets: Tensor, seen: Tensor | None, rows: Tensor) -> None:
        items, ok = masked_topk(scores, targets, seen, max(self.ks))
        ok &= rows[:, None]
        coverage = self._state["coverage"]
        for i, k in enumerate(self.ks):
            kept = ok[:, :k]
            coverage[i].scatter_add_(0, items[:, :k].reshape(-1), kept.reshape(-1).to(torch.long))

    def _check_inputs(
        self, scores: Tensor, targets: Tensor, labels: Tensor, seen: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        n_cols = self.n_items + 1
        if scores.dim() != 2 or scores.shape[1] != n_cols:
            raise ValueError(f"scores must be [B, n_items + 1] = [B, {n_cols}], got {tuple(scores.shape)}")
        batch = scores.shape[0]
        if targets.dim() != 2 or targets.shape[0] != batch:
            raise ValueError(f"targets must be [B={batch}, T], got {tuple(targets.shape)}")
        if labels.shape != targets.shape:
            raise ValueError(
                f"labels shape {tuple(labels.shape)} must equal targets shape {tuple(targets.shape)}"
            )
        if seen is not None and (seen.dim() != 2 or seen.shape[0] != batch):
            raise ValueError(f"seen must be [B={batch}, S], got {tuple(seen.shape)}")
        device = scores.device
        scores = scores.detach()
        if not scores.is_floating_point():
            scores = scores.to(torch.float32)
        targets = targets.to(device=device, dtype=torch.long)
        labels = labels.to(device)
        if seen is not None:
            seen = seen.to(device=device, dtype=torch.long)
        checks = [((targets < 0) | (targets > self.n_items)).any(), ((labels < -1) | (labels > 1)).any()]
        if seen is not None:
            checks.append(((seen < 0) | (seen > self.n_items)).any())
        bad_targets, bad_labels, *bad_seen = torch.stack(checks).tolist()
        if bad_targets or any(bad_seen):
            raise ValueError(f"targets/seen item ids must lie in 0..n_items=0..{self.n_items} (0 = padding)")
        if bad_labels:
            raise ValueError("labels must be -1 (disliked), 0 (unknown) or +1 (liked)")
        return scores, targets, labels, seen

    # ---------------------------------------------------------------- compute
    def user_counts(self) -> dict[str, int]:
        """Number of users averaged so far for each averaged metric."""
        return {name: int(self._state[f"count/{name}"]) for name in self._averaged}

    def compute(self) -> dict[str, float]:
        """Averages ``{"{metric}@{K}": value}``; ``nan`` for a metric averaged over zero users."""
        out: dict[str, float] = {}
        state = {key: value.cpu() for key, value in self._state.items()}
        for name in self.metrics:
            if name == "item_coverage":
                covered = (state["coverage"][:, 1:] > 0).sum(dim=1)
                for i, k in enumerate(self.ks):
                    out[f"item_coverage@{k}"] = float(covered[i]) / self.n_items
                continue
            self._report(name, state, out)
        if self.signed:
            for name in SIGNED_METRICS:
                self._report(name, state, out)
        return out

    def _report(self, name: str, state: dict[str, Tensor], out: dict[str, float]) -> None:
        count = float(state[f"count/{name}"])
        sums = state[f"sum/{name}"].tolist()
        for k, total in zip(self.ks, sums):
            out[f"{name}@{k}"] = total / count if count > 0 else float("nan")


def evaluate(
    score_fn: Callable[[Tensor], Tensor],
    users: Tensor,
    targets: Tensor,
    labels: Tensor,
    seen: Tensor | None,
    evaluator: FullRankingEvaluator,
    chunk_size: int = 1024,
    model_name: str = "model",
    reset: bool = True,
) -> dict[str, float]:
    """Score ``users`` chunk by chunk with ``score_fn(user_chunk) -> [b, n_items + 1]`` and evaluate.

    ``targets``/``labels``/``seen`` are padded row-aligned with ``users`` (``seen`` may be None); each chunk's
    rows are moved to the device of its scores. Only one chunk of scores exists at a time. With
    ``reset=True`` the evaluator is reset first. Returns :meth:`FullRankingEvaluator.compute`.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if reset:
        evaluator.reset()
    with torch.no_grad():
        for start in range(0, users.shape[0], chunk_size):
            stop = start + chunk_size
            scores = score_fn(users[start:stop])
            chunk_seen = None if seen is None else seen[start:stop]
            chunk_targets, chunk_labels = targets[start:stop], labels[start:stop]
            evaluator.update(scores, chunk_targets, chunk_labels, chunk_seen, model_name=model_name)
    return evaluator.compute()
