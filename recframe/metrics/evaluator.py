"""Streaming full-ranking evaluator: feed score chunks with :meth:`FullRankingEvaluator.update`, read
averages with :meth:`FullRankingEvaluator.compute`.

Metrics come in families (:mod:`recframe.metrics.families`): the evaluator computes the pessimistic ranks
of each chunk once per tie rule its families need, hands every family the same :class:`EvalChunk`, and
keeps their running state. Only one ``[B, n_items + 1]`` chunk of scores exists at a time; the built-in
families keep float64 running sums per (metric, K), float64 user counts per metric and, for item coverage,
int64 per-item counts of top-K appearances. All of them are plain sums, so results do not depend on the
chunk size (up to float64 summation order, ~1e-15) and the state can be all-reduced with ``sum`` across
processes (:meth:`~FullRankingEvaluator.state_tensors` / :meth:`~FullRankingEvaluator.load_state_tensors`).

Ranking rules (masking, pessimistic ties, padding, duplicate targets) are those of
:mod:`recframe.metrics.ranking`; signed metrics are defined in :mod:`recframe.metrics.signed`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from recframe.metrics.families import (
    RELEVANCE_MODES,
    EvalChunk,
    ItemCoverageFamily,
    MetricFamily,
    SignedFamily,
    StandardFamily,
    check_family,
)
from recframe.metrics.ranking import STANDARD_METRICS, check_finite_scores, dedup_targets, target_ranks

#: names accepted by the ``metrics=`` shorthand (other metrics come from ``families=``)
SHORTHAND_METRICS: tuple[str, ...] = (*STANDARD_METRICS, "item_coverage")
__all__ = ["RELEVANCE_MODES", "SHORTHAND_METRICS", "FullRankingEvaluator", "evaluate"]


class FullRankingEvaluator:
    """Accumulates full-ranking metrics of several families over streamed chunks of users.

    Reported keys are ``"{metric}@{K}"`` for every metric of every family and ``K`` in ``ks`` (``"{metric}"``
    for a family with ``per_k = False``). The families are, in order:

    * the shorthand ``metrics=``: the standard metrics named there as one
      :class:`~recframe.metrics.families.StandardFamily` with ``relevance`` (``"all"``: every held-out item
      is relevant; ``"liked"``: only items labelled +1, disliked/unknown ones have utility 0; users with no
      relevant item are left out) and, if ``"item_coverage"`` is named, an
      :class:`~recframe.metrics.families.ItemCoverageFamily`
      (``item_coverage@K = |union over users of top-K eligible items| / n_items``);
    * with ``signed=True``, a :class:`~recframe.metrics.families.SignedFamily` (``signed_recall@K``,
      ``signed_hr@K``, ``signed_ndcg@K``, penalty ``signed_lambda``);
    * every family in ``families`` (any :class:`~recframe.metrics.families.MetricFamily`).

    Metric names must be unique across families. An average over zero users is reported as ``nan``.
    Ranks are computed once per chunk for each tie rule the families declare: the standard family under
    ``relevance="all"`` puts tied disliked held-out items last, the signed family puts them first (the
    worst case of each), so ``relevance="all"`` together with ``signed=True`` costs two rank passes.

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
        families: Sequence[MetricFamily] = (),
    ) -> None:
        if isinstance(metrics, str):
            metrics = (metrics,)
        if isinstance(ks, int):
            ks = (ks,)
        unknown = [m for m in metrics if m not in SHORTHAND_METRICS]
        if unknown:
            raise ValueError(f"unknown metric name(s) {unknown}; valid names for metrics=: "
                             f"{list(SHORTHAND_METRICS)} (other metrics come from families=)")
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

        built: list[MetricFamily] = []
        standard = [m for m in self.metrics if m in STANDARD_METRICS]
        if standard:
            built.append(StandardFamily(standard, relevance))
        if "item_coverage" in self.metrics:
            built.append(ItemCoverageFamily())
        if self.signed:
            built.append(SignedFamily(signed_lambda))
        if isinstance(families, MetricFamily):
            families = (families,)
        built.extend(check_family(f) for f in families)
        if not built:
            raise ValueError(f"nothing to compute: pass metrics from {list(SHORTHAND_METRICS)}, signed=True "
                             "or families=[...]")
        names = [name for family in built for name in family.names]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"metric name(s) {repeated} are reported by more than one family; rename them "
                             "in one family (families: " + ", ".join(map(repr, built)) + ")")
        self.families: tuple[MetricFamily, ...] = tuple(built)
        rules = {f.disliked_ties for f in self.families if "ranks" in f.needs}
        if None in rules:  # a family that reads ranks but accepts either rule takes one already computed
            rules.discard(None)
            rules = rules or {"first"}
        self._rank_rules: tuple[str, ...] = tuple(sorted(rules))
        self.reset()

    @property
    def names(self) -> tuple[str, ...]:
        """The metric names of every family, in report order (the valid metric names of this evaluator)."""
        return tuple(name for family in self.families for name in family.names)

    # ------------------------------------------------------------------ state
    def reset(self, device: torch.device | str | None = None) -> None:
        """Zero every family's running state (optionally placing it on ``device``)."""
        device = torch.device(device) if device is not None else torch.device("cpu")
        self._device = device
        self._state: dict[str, Tensor] = {}
        for family in self.families:
            part = family.init_state(len(self.ks), self.n_items, device)
            clash = set(part) & set(self._state)
            if clash:
                raise ValueError(f"metric family {type(family).__name__} reuses state key(s) {sorted(clash)} "
                                 "of another family; give its state keys a unique prefix")
            self._state.update(part)

    @property
    def device(self) -> torch.device:
        """Device holding the running state (follows the device of the scores passed to :meth:`update`)."""
        return self._device

    def state_tensors(self) -> dict[str, Tensor]:
        """Copies of the running state for a distributed ``all_reduce(sum)``.

        Keys of the built-in families: ``sum/{metric}`` (float64 ``[len(ks)]``), ``count/{metric}``
        (float64 scalar) and, with ``item_coverage``, ``coverage`` (int64 ``[len(ks), n_items + 1]``: how
        many users had each item in their top-K). Reduce every tensor with ``sum`` and pass the dict to
        :meth:`load_state_tensors`.
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
        chunk = self._chunk(scores, targets, labels, seen, model_name)
        for family in self.families:
            family.update_state(chunk, self._state)

    @torch.no_grad()
    def per_user(
        self,
        scores: Tensor,
        targets: Tensor,
        labels: Tensor,
        seen: Tensor | None = None,
        model_name: str = "model",
    ) -> dict[str, tuple[Tensor, Tensor]]:
        """Each user's value of every per-user metric for one chunk, without touching the running state.

        Returns ``{"{name}@{K}": (float64 [B], bool [B])}`` (``"{name}"`` for a family with ``per_k`` False):
        the value and whether the user counts in that metric's average, exactly the terms whose masked mean
        :meth:`compute` reports, so a paired per-user comparison (e.g. a bootstrap over users) uses the same
        definitions as the table. Corpus-level families (those overriding ``update_state``, e.g. item
        coverage) have no per-user value and are left out. Inputs as in :meth:`update`.
        """
        scores, targets, labels, seen = self._check_inputs(scores, targets, labels, seen)
        chunk = self._chunk(scores, targets, labels, seen, model_name)
        out: dict[str, tuple[Tensor, Tensor]] = {}
        for family in self.families:
            if type(family).update_state is not MetricFamily.update_state:
                continue
            values, masks = family.values(chunk), family.user_mask(chunk)
            for name in family.names:
                per_user = values[name].to(torch.float64)
                if per_user.dim() == 1:
                    out[name] = (per_user, masks[name])
                    continue
                for j, k in enumerate(self.ks):
                    out[f"{name}@{k}"] = (per_user[:, j], masks[name])
        return out

    def _chunk(self, scores: Tensor, targets: Tensor, labels: Tensor, seen: Tensor | None,
               model_name: str) -> EvalChunk:
        """The families' :class:`EvalChunk`: ranks under each declared tie rule, deduplicated targets."""
        rank_tables = {
            rule: target_ranks(scores, targets, labels, seen, model_name=model_name, disliked_ties=rule)[0]
            for rule in self._rank_rules
        }
        if not rank_tables:  # the rank pass runs the finite check; without it, run it here
            check_finite_scores(scores, model_name)
        valid, _ = dedup_targets(targets)
        return EvalChunk(scores, targets, labels, seen, valid, self.ks, self.n_items, rank_tables)

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
        out: dict[str, int] = {}
        for family in self.families:
            out.update(family.user_counts(self._state))
        return out

    def compute(self) -> dict[str, float]:
        """Averages ``{"{metric}@{K}": value}`` of every family; ``nan`` for an average over zero users."""
        out: dict[str, float] = {}
        for family in self.families:
            out.update(family.compute(self._state, self.ks))
        return out


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
