"""Metric families: the one way to add metrics to :class:`~recframe.metrics.FullRankingEvaluator`.

A family is a small object holding settings only (like a Lightning ``Callback``); the evaluator owns the
running state and streams every family through the same chunked pass, so a family costs one call per chunk
and never sees a ``users x items`` matrix. A family declares:

* ``names``: its metric names, reported as ``"{name}@{K}"`` for every cut-off (``per_k = True``) or as
  ``"{name}"`` (``per_k = False``, e.g. a calibration error);
* ``needs``: what it reads from an :class:`EvalChunk`, a subset of :data:`NEEDS`: ``"ranks"`` (pessimistic
  ranks of the held-out items, computed once per chunk and shared), ``"labels"`` (the held-out labels) and
  ``"scores"`` (the score rows themselves, e.g. for softmax probabilities of the targets);
* ``disliked_ties``: which tie rule its ranks use (``"first"``, ``"last"`` or ``None`` = either; see
  :mod:`recframe.metrics.ranking`): the worst case for the family's own metrics;
* a per-user value function :meth:`MetricFamily.values` and a user mask :meth:`MetricFamily.user_mask`.

The default state is a float64 running sum of the per-user values over the masked users and a float64
user count per name, so the average is ``sum_u mask_u * value_u / sum_u mask_u`` and ``nan`` over zero
users. A corpus-level family (item coverage) overrides :meth:`~MetricFamily.init_state`,
:meth:`~MetricFamily.update_state` and :meth:`~MetricFamily.compute`; every state tensor must be reducible
with ``sum`` across processes (DDP), which is how :meth:`FullRankingEvaluator.state_tensors` works.

The standard metrics (:class:`StandardFamily`), item coverage (:class:`ItemCoverageFamily`) and the signed
metrics (:class:`SignedFamily`) are the built-in families; others (calibration, in ``calib_ext``) plug in
through ``FullRankingEvaluator(families=[...])`` or, in a config, ``data.metric_families``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from recframe.metrics.ranking import DISLIKED_TIES, STANDARD_METRICS, standard_metrics
from recframe.metrics.signed import SIGNED_METRICS, disliked_hits, signed_metrics, signed_user_masks
from recframe.metrics.topk import masked_top_k

NEEDS: tuple[str, ...] = ("ranks", "labels", "scores")
RELEVANCE_MODES: tuple[str, ...] = ("all", "liked")


@dataclass
class EvalChunk:
    """One chunk of users as the families see it (all tensors on the scores' device, read-only).

    ``scores`` ``[B, n_items + 1]`` (finite in columns ``1..n_items``, checked before any family runs),
    ``targets``/``labels``/``valid`` ``[B, T]`` (``valid``: real, first-occurrence held-out items),
    ``seen`` ``[B, S]`` or None, ``ks`` the evaluator's cut-offs. Ranks are read with :meth:`ranks`.
    """

    scores: Tensor
    targets: Tensor
    labels: Tensor
    seen: Tensor | None
    valid: Tensor
    ks: tuple[int, ...]
    n_items: int
    rank_tables: dict[str, Tensor] = field(default_factory=dict)

    def ranks(self, disliked_ties: str | None = None) -> Tensor:
        """int64 ``[B, T]`` pessimistic ranks under ``disliked_ties`` (``None``: whichever was computed,
        ``"first"`` if it was). A family passes its own ``disliked_ties``.

        Only the rules that the evaluator's families declared (``needs`` with ``"ranks"``) are computed.
        """
        if disliked_ties is None and self.rank_tables:
            return self.rank_tables.get("first", next(iter(self.rank_tables.values())))
        if disliked_ties not in self.rank_tables:
            raise RuntimeError(
                f"ranks with disliked_ties={disliked_ties!r} were not computed for this chunk; a family that "
                "reads ranks must list 'ranks' in its `needs` and name its rule in `disliked_ties`"
            )
        return self.rank_tables[disliked_ties]


class MetricFamily:
    """Base class of a metric family (see the module docstring for the contract).

    Subclasses set ``names`` (usually in ``__init__``), ``needs``, ``disliked_ties`` and ``per_k`` and
    implement :meth:`values`; :meth:`user_mask` defaults to "users with at least one held-out item".
    """

    names: tuple[str, ...] = ()
    needs: frozenset[str] = frozenset({"ranks"})
    disliked_ties: str | None = "first"
    per_k: bool = True

    # ------------------------------------------------------------ per user
    def values(self, chunk: EvalChunk) -> dict[str, Tensor]:
        """Per-user values ``{name: float64 [B, len(ks)]}`` (``[B]`` when ``per_k`` is False)."""
        raise NotImplementedError(f"{type(self).__name__} must implement values(chunk)")

    def user_mask(self, chunk: EvalChunk) -> dict[str, Tensor]:
        """Which users count in each metric's average: ``{name: bool [B]}`` (default: any held-out item)."""
        users = chunk.valid.any(dim=1)
        return dict.fromkeys(self.names, users)

    # ------------------------------------------------------------ streaming
    def init_state(self, n_ks: int, n_items: int, device: torch.device) -> dict[str, Tensor]:
        """Zeroed running state; every tensor must be reducible with ``sum`` across processes."""
        shape = (n_ks,) if self.per_k else ()
        state = {}
        for name in self.names:
            state[f"sum/{name}"] = torch.zeros(shape, dtype=torch.float64, device=device)
            state[f"count/{name}"] = torch.zeros((), dtype=torch.float64, device=device)
        return state

    def update_state(self, chunk: EvalChunk, state: dict[str, Tensor]) -> None:
        """Add one chunk: masked per-user values into ``sum/{name}``, masked users into ``count/{name}``."""
        values, masks = self.values(chunk), self.user_mask(chunk)
        for name in self.names:
            per_user, mask = values[name], masks[name]
            mask = mask[:, None] if per_user.dim() == 2 else mask
            state[f"sum/{name}"] += torch.where(mask, per_user.to(torch.float64), 0.0).sum(dim=0)
            state[f"count/{name}"] += masks[name].sum(dtype=torch.float64)

    def compute(self, state: dict[str, Tensor], ks: Sequence[int]) -> dict[str, float]:
        """Averages ``{"{name}@{K}": value}`` (or ``{name: value}``); ``nan`` over zero users."""
        out: dict[str, float] = {}
        for name in self.names:
            count = float(state[f"count/{name}"])
            sums = state[f"sum/{name}"].cpu()
            if not self.per_k:
                out[name] = float(sums) / count if count > 0 else float("nan")
                continue
            for k, total in zip(ks, sums.tolist()):
                out[f"{name}@{k}"] = total / count if count > 0 else float("nan")
        return out

    def user_counts(self, state: dict[str, Tensor]) -> dict[str, int]:
        """Users averaged so far per metric name (empty for corpus-level families)."""
        return {name: int(state[f"count/{name}"]) for name in self.names if f"count/{name}" in state}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(names={list(self.names)})"


class StandardFamily(MetricFamily):
    """Recall, HR, NDCG, MRR, precision and MAP at every K (formulas:
    :func:`recframe.metrics.ranking.standard_metrics`).

    ``relevance="all"``: every held-out item is relevant (leave-one-out, implicit feedback); ties put
    disliked held-out items last (they are relevant, so that is the worst case). ``relevance="liked"``:
    only held-out items labelled +1 are relevant; the tie rule does not change these metrics. Users with no
    relevant held-out item are left out of the averages.
    """

    def __init__(self, metrics: Sequence[str] = STANDARD_METRICS, relevance: str = "all") -> None:
        if isinstance(metrics, str):
            metrics = (metrics,)
        unknown = [m for m in metrics if m not in STANDARD_METRICS]
        if unknown:
            raise ValueError(f"unknown standard metric(s) {unknown}; valid: {list(STANDARD_METRICS)}")
        if not metrics:
            raise ValueError(f"StandardFamily needs at least one metric of {list(STANDARD_METRICS)}")
        if relevance not in RELEVANCE_MODES:
            raise ValueError(f"relevance must be one of {list(RELEVANCE_MODES)}, got {relevance!r}")
        self.names = tuple(dict.fromkeys(metrics))
        self.relevance = relevance
        self.needs = frozenset({"ranks", "labels"} if relevance == "liked" else {"ranks"})
        self.disliked_ties = "last" if relevance == "all" else None

    def _relevant(self, chunk: EvalChunk) -> Tensor:
        return chunk.valid if self.relevance == "all" else chunk.valid & (chunk.labels == 1)

    def values(self, chunk: EvalChunk) -> dict[str, Tensor]:
        return standard_metrics(chunk.ranks(self.disliked_ties), self._relevant(chunk), chunk.ks, self.names)

    def user_mask(self, chunk: EvalChunk) -> dict[str, Tensor]:
        return dict.fromkeys(self.names, self._relevant(chunk).any(dim=1))


class SignedFamily(MetricFamily):
    """Signed Recall, HR and NDCG at every K (formulas and user rules: :mod:`recframe.metrics.signed`).

    Ranks put held-out disliked items first among equal scores, so a tie never hides a disliked hit.
    """

    names = SIGNED_METRICS
    needs = frozenset({"ranks", "labels"})
    disliked_ties = "first"

    def __init__(self, signed_lambda: float = 1.0) -> None:
        signed_lambda = float(signed_lambda)
        if signed_lambda != signed_lambda or abs(signed_lambda) == float("inf"):
            raise ValueError(f"signed_lambda must be finite, got {signed_lambda}")
        self.signed_lambda = signed_lambda

    def values(self, chunk: EvalChunk) -> dict[str, Tensor]:
        ranks = chunk.ranks(self.disliked_ties)
        return signed_metrics(ranks, chunk.labels, chunk.valid, chunk.ks, self.signed_lambda)

    def user_mask(self, chunk: EvalChunk) -> dict[str, Tensor]:
        return signed_user_masks(chunk.labels, chunk.valid)


class DislikedHitsFamily(MetricFamily):
    """``disliked_hits@K``: held-out disliked items in a user's top ``K``, averaged over users.

    Per user ``#{t in D: r_t < K}`` (:func:`recframe.metrics.signed.disliked_hits`), ranks with disliked
    items first among equal scores (the signed metrics' worst case); averaged over users with at least one
    held-out item (Signed HR's users), so it reads "disliked items per top-K list". Not in the default
    evaluator; add it through ``data.metric_families`` (``benchmarks/ml100k_signed.py`` does).
    """

    names = ("disliked_hits",)
    needs = frozenset({"ranks", "labels"})
    disliked_ties = "first"

    def values(self, chunk: EvalChunk) -> dict[str, Tensor]:
        return {"disliked_hits": disliked_hits(chunk.ranks(self.disliked_ties), chunk.labels, chunk.valid,
                                               chunk.ks)}


class ItemCoverageFamily(MetricFamily):
    """``item_coverage@K = |union over users of top-K eligible items| / n_items``.

    Corpus-level: counted over every row with at least one held-out item; the top-K comes from
    :func:`torch.topk` (via :func:`~recframe.metrics.ranking.masked_topk`), so ties inside it follow topk's
    order. State: int64 ``coverage`` ``[len(ks), n_items + 1]``, how many users had each item in their top-K.
    """

    names = ("item_coverage",)
    needs = frozenset({"scores"})
    disliked_ties = None

    def init_state(self, n_ks: int, n_items: int, device: torch.device) -> dict[str, Tensor]:
        return {"coverage": torch.zeros(n_ks, n_items + 1, dtype=torch.long, device=device)}

    def update_state(self, chunk: EvalChunk, state: dict[str, Tensor]) -> None:
        # the evaluator checked the chunk's scores finite before any family runs: no second check here
        top = masked_top_k(chunk.scores, max(chunk.ks), exclude=chunk.seen, keep=chunk.targets,
                           check_finite=False)
        items, ok = top.items, top.valid
        ok &= chunk.valid.any(dim=1)[:, None]
        coverage = state["coverage"]
        for i, k in enumerate(chunk.ks):
            coverage[i].scatter_add_(0, items[:, :k].reshape(-1), ok[:, :k].reshape(-1).to(torch.long))

    def compute(self, state: dict[str, Tensor], ks: Sequence[int]) -> dict[str, float]:
        covered = (state["coverage"][:, 1:].cpu() > 0).sum(dim=1)
        n_items = state["coverage"].shape[1] - 1
        return {f"item_coverage@{k}": float(covered[i]) / n_items for i, k in enumerate(ks)}


def check_family(family: object) -> MetricFamily:
    """Validate one family's declarations; raises one clear error naming the family and the fix."""
    if not isinstance(family, MetricFamily):
        raise TypeError(f"metric family {family!r} must be an instance of recframe.metrics.MetricFamily "
                        "(in a config: {class_path: ..., init_args: {...}})")
    name = type(family).__name__
    if not family.names or not all(isinstance(n, str) and n for n in family.names):
        raise ValueError(f"metric family {name} must declare a non-empty tuple of metric `names`")
    unknown = set(family.needs) - set(NEEDS)
    if unknown:
        raise ValueError(f"metric family {name} needs {sorted(unknown)}; valid needs: {list(NEEDS)}")
    if family.disliked_ties is not None and family.disliked_ties not in DISLIKED_TIES:
        raise ValueError(f"metric family {name} has disliked_ties={family.disliked_ties!r}; "
                         f"use one of {list(DISLIKED_TIES)} or None")
    return family
