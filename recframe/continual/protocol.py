"""The continual protocol: update at stage t, test on stage t + 1, mean over stages, backward transfer.

For ``t = 0 .. T - 2`` a learner (:mod:`recframe.continual.baselines`, :mod:`recframe.continual.vamirec`)
updates its model on stage ``t`` starting from its stage ``t - 1`` model, and every score function it reports
is evaluated on :meth:`StagedInteractions.test_set(t) <recframe.continual.stages.StagedInteractions.test_set>`
(the returning users of stage ``t + 1``; full ranking over the whole catalogue, known items masked) by the one
evaluator, :class:`recframe.metrics.FullRankingEvaluator`. ``R[j][i]`` is the metric of the model updated
through stage ``j`` on test set ``i`` (the users of stage ``i + 1``, their history through stage ``i``).

* **Mean over stages**: ``(1 / (T - 1)) * sum_t R[t][t]`` for NDCG@10 and Recall@10.
* **Backward transfer** (Lopez-Paz & Ranzato 2017) on the earlier users:
  ``BWT = (1 / (T - 2)) * sum_{i < T - 2} (R[T - 2][i] - R[i][i])``: how the final model does on each earlier
  test set compared with the model of that time. Test set ``i``'s targets are stage ``i + 1`` rows, which
  every later learner trains on at stage ``i + 1``; BWT therefore measures how much of what was learnt about
  earlier users survives the later updates (negative: forgetting), not generalisation to unseen rows.

Per-user values are kept (for the paired bootstrap of :mod:`benchmarks.continual_ml100k`): each user's metrics
come from the same evaluator run over that user's row alone, so their mean equals the evaluator's average.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from recframe.data.datamodule import EvalSet
from recframe.metrics import FullRankingEvaluator

__all__ = ["StageEval", "ProtocolResult", "evaluate_stage", "run_protocol", "METRICS"]

METRICS: tuple[str, ...] = ("ndcg@10", "recall@10")
ScoreFn = Callable[[dict[str, Tensor]], Tensor]


@dataclass
class StageEval:
    """One test set evaluated by one score function: means and per-user values (users in ``users`` order)."""

    means: dict[str, float]
    per_user: dict[str, np.ndarray]
    users: np.ndarray


def evaluate_stage(score_fn: ScoreFn, test: EvalSet, max_len: int, n_items: int,
                   ks: Sequence[int] = (10, 20), batch_size: int = 512) -> StageEval:
    """Full-ranking metrics of ``score_fn`` on ``test`` (known items masked), per user and averaged.

    Metrics are ``recall`` and ``ndcg`` at ``ks`` (:func:`recframe.metrics.ranking.standard_metrics`).
    """
    evaluator = FullRankingEvaluator(n_items, ks=ks, metrics=("recall", "ndcg"))
    names = [f"{m}@{k}" for m in ("recall", "ndcg") for k in evaluator.ks]
    per_user: dict[str, list[float]] = {n: [] for n in names}
    for start in range(0, len(test.users), batch_size):
        batch = test.batch(list(range(start, min(start + batch_size, len(test.users)))), max_len)
        scores = score_fn(batch)
        for row in range(scores.shape[0]):  # per-user values from the one evaluator
            evaluator.reset()
            evaluator.update(scores[row:row + 1], batch["targets"][row:row + 1], batch["labels"][row:row + 1],
                             batch["seen"][row:row + 1])
            values = evaluator.compute()
            for n in names:
                per_user[n].append(values[n])
    arrays = {n: np.asarray(v, dtype=np.float64) for n, v in per_user.items()}
    means = {n: float(np.mean(v)) if len(v) else float("nan") for n, v in arrays.items()}
    return StageEval(means=means, per_user=arrays, users=test.users.copy())


@dataclass
class ProtocolResult:
    """Everything one learner produced over the stages.

    ``stages[name][t]`` is ``R[t][t]`` for score function ``name``; ``backward[name][i]`` is ``R[T-2][i]``
    for the earlier test sets ``i < T - 2``.
    """

    stages: dict[str, list[StageEval]] = field(default_factory=dict)
    backward: dict[str, list[StageEval]] = field(default_factory=dict)
    seconds: float = 0.0

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per score function: mean over stages, per-stage values and BWT of every metric."""
        out: dict[str, dict[str, Any]] = {}
        for name, evals in self.stages.items():
            row: dict[str, Any] = {}
            for m in evals[0].means:
                per_stage = [e.means[m] for e in evals]
                row[m] = float(np.mean(per_stage))
                row[f"{m} per stage"] = per_stage
                back = self.backward.get(name, [])
                if back:
                    row[f"bwt {m}"] = float(np.mean([b.means[m] - e.means[m] for b, e in zip(back, evals)]))
            row["users per stage"] = [len(e.users) for e in evals]
            out[name] = row
        return out


def run_protocol(learner: Any, max_len: int | None = None, ks: Sequence[int] = (10, 20),
                 backward: bool = True) -> ProtocolResult:
    """Run ``learner`` through every stage of its data and evaluate each of its score functions.

    ``learner`` has ``data`` (:class:`~recframe.continual.stages.StagedInteractions`), ``settings.max_len``,
    ``fit_stage(t)`` and ``scorers() -> {name: score_fn}``.
    """
    data = learner.data
    max_len = learner.settings.max_len if max_len is None else max_len
    result = ProtocolResult()
    start = time.perf_counter()
    last = data.n_stages - 2
    tests = [data.test_set(t) for t in range(last + 1)]
    for t in range(last + 1):
        learner.fit_stage(t)
        with torch.no_grad():
            for name, fn in learner.scorers().items():
                result.stages.setdefault(name, []).append(
                    evaluate_stage(fn, tests[t], max_len, data.n_items, ks))
    if backward:
        with torch.no_grad():
            for name, fn in learner.scorers().items():
                result.backward[name] = [evaluate_stage(fn, tests[i], max_len, data.n_items, ks)
                                         for i in range(last)]
    result.seconds = time.perf_counter() - start
    return result
