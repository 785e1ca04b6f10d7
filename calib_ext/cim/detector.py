"""CIM as an error detector: Semantic Divergence and EED against max-probability and entropy, with wall time.

:class:`CIMDetector` is an estimator (constructor stores settings; :meth:`CIMDetector.fit` learns the semantic
classes of the outcomes; :meth:`CIMDetector.score` scores inputs). For each input it runs three pipelines,
each timed on its own from the input batch to its score, so the times compare what each score really costs:

* **baselines** (one forward pass): ``max_prob`` uncertainty ``1 − max_i p_i`` and predictive ``entropy``
  ``−Σ_i p_i log p_i`` over the eligible outcomes;
* **Semantic Divergence** (:mod:`~calib_ext.cim.divergence`): predictive distribution, distribution effects of
  every part (:func:`~calib_ext.cim.focus.intervention_effects`, one catalogue-wide softmax per masked
  variant), the focused views, their distributions, and the mean over views of the class-level JS divergence;
* **EED** (:mod:`~calib_ext.cim.drift`): output embedding, embedding effects of every part (no softmax, no
  catalogue), the focused views, their embeddings and the mean geodesic drift.

``eed_same_view`` is also reported: EED measured on Semantic Divergence's focused views (same views, other
score), which separates the choice of score from the choice of focus; it is computed outside the timed
pipelines and has no time of its own. With several budgets, each budget's own score is reported too
(``semantic_divergence@0.5``, ``eed@0.5``, ...), so a budget can be chosen on validation data; they come
from the same pipelines (one extra forward pass per budget, against one per history item for the effects).

Each score is read as "higher = more likely an error", and :func:`auroc` gives its AUROC for each error type
of the adapter (``wrong_top1``, ``miss@10`` for a recommender).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from calib_ext.cim.adapters import Batch, FocusAdapter
from calib_ext.cim.divergence import SemanticClusters, semantic_divergence
from calib_ext.cim.drift import expected_embedding_drift
from calib_ext.cim.focus import focused_views, intervention_effects

#: the scores, in table order, and the pipeline whose time each one costs
SCORES = ("semantic_divergence", "eed", "eed_same_view", "max_prob", "entropy")
PIPELINE = {"semantic_divergence": "semantic_divergence", "eed": "eed", "max_prob": "baseline",
            "entropy": "baseline"}


@dataclass
class CIMScores:
    """Per-input scores and error labels of :meth:`CIMDetector.score`.

    Attributes:
        scores: ``{score name: float [N]}`` (higher = more uncertain).
        errors: ``{error name: bool [N]}``.
        seconds: wall seconds of each pipeline (``baseline``, ``semantic_divergence``, ``eed``) over all
            inputs, and of the intervention effects inside the two CIM pipelines (``*_effects``).
        n: number of inputs.
    """

    scores: dict[str, np.ndarray] = field(default_factory=dict)
    errors: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    n: int = 0

    def ms_per_example(self) -> dict[str, float]:
        """Milliseconds per input of each score (of its pipeline); scores without a pipeline are left out."""
        return {s: 1e3 * self.seconds[p] / max(self.n, 1) for s, p in PIPELINE.items() if p in self.seconds}


def auroc(score: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve of ``score`` for the ``positive`` labels (ties count ½; Mann–Whitney U).

    NaN when only one class is present.
    """
    score, positive = np.asarray(score, dtype=float), np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    from scipy.stats import rankdata

    ranks = rankdata(score)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


class CIMDetector:
    """Causal-invariant masking uncertainty scores for any :class:`~calib_ext.cim.adapters.FocusAdapter`.

    Args:
        keep_fractions: budgets ``ρ`` of the focused views; both CIM scores average over them (one view per
            budget, so "expected" in EED is the mean over these views).
        n_clusters: semantic classes of the outcomes (:class:`~calib_ext.cim.divergence.SemanticClusters`).
        min_keep: parts every focused view keeps at least.
        chunk_size: masked variants per forward pass.
        seed: k-means seed.
        progress: show a tqdm bar over batches.

    Attributes:
        clusters_: the fitted :class:`~calib_ext.cim.divergence.SemanticClusters`.
    """

    def __init__(self, keep_fractions: Sequence[float] = (0.5,), n_clusters: int = 32, min_keep: int = 1,
                 chunk_size: int = 4096, seed: int = 0, progress: bool = True) -> None:
        self.keep_fractions = tuple(float(r) for r in keep_fractions)
        if not self.keep_fractions or not all(0.0 < r <= 1.0 for r in self.keep_fractions):
            raise ValueError(f"keep_fractions={keep_fractions}; give one or more budgets in (0, 1], "
                             "e.g. (0.5,).")
        self.n_clusters = int(n_clusters)
        self.min_keep = int(min_keep)
        self.chunk_size = int(chunk_size)
        self.seed = int(seed)
        self.progress = bool(progress)

    def fit(self, adapter: FocusAdapter, skip_first: bool = True) -> CIMDetector:
        """Fit the semantic classes on the adapter's outcome embeddings (``skip_first``: outcome 0 is
        padding)."""
        with torch.inference_mode():
            support = adapter.support_embeddings().detach().float().cpu()
        self.clusters_ = SemanticClusters(self.n_clusters, self.seed, skip_first).fit(support)
        return self

    def score(self, adapter: FocusAdapter, batches: Iterable[Batch], total: int | None = None) -> CIMScores:
        """Scores, error labels and pipeline times for every input of ``batches`` (module docstring)."""
        if not hasattr(self, "clusters_"):
            raise RuntimeError("CIMDetector is not fitted; call fit(adapter) before score(...).")
        out: dict[str, list[Tensor]] = {}
        errs: dict[str, list[Tensor]] = {}
        secs = {"baseline": 0.0, "semantic_divergence": 0.0, "eed": 0.0, "semantic_divergence_effects": 0.0,
                "eed_effects": 0.0}
        n = 0
        with torch.inference_mode():
            for batch in tqdm(batches, total=total, desc="CIM", disable=not self.progress, leave=False):
                n += len(next(iter(batch.values())))
                for name, values in self._score_batch(adapter, batch, secs).items():
                    if name.startswith("error:"):
                        errs.setdefault(name[len("error:"):], []).append(values)
                    else:
                        out.setdefault(name, []).append(values)
        return CIMScores(scores={k: torch.cat(v).double().cpu().numpy() for k, v in out.items() if v},
                         errors={k: torch.cat(v).cpu().numpy().astype(bool) for k, v in errs.items()},
                         seconds=secs, n=n)

    def _score_batch(self, adapter: FocusAdapter, batch: Batch, secs: dict[str, float]) -> dict[str, Tensor]:
        res: dict[str, Tensor] = {}
        t = time.perf_counter()
        emb = adapter.embed(batch)
        lp = adapter.log_probs(batch, emb)
        p = lp.exp()
        res["max_prob"] = 1.0 - p.max(dim=1).values
        res["entropy"] = -torch.where(p > 0, p * lp, torch.zeros_like(p)).sum(dim=1)
        secs["baseline"] += time.perf_counter() - t

        t = time.perf_counter()
        emb = adapter.embed(batch)
        lp = adapter.log_probs(batch, emb)
        parts = adapter.parts(batch)
        t_eff = time.perf_counter()
        eff = intervention_effects(adapter, batch, "distribution", base_embedding=emb, base_log_probs=lp,
                                   chunk_size=self.chunk_size)
        secs["semantic_divergence_effects"] += time.perf_counter() - t_eff
        views = [adapter.embed(batch, keep) for keep in focused_views(eff, parts, self.keep_fractions,
                                                                      self.min_keep)]
        sd = torch.stack([semantic_divergence(lp, adapter.log_probs(batch, v), self.clusters_)
                          for v in views])
        res["semantic_divergence"] = sd.mean(dim=0)
        secs["semantic_divergence"] += time.perf_counter() - t
        res["eed_same_view"] = expected_embedding_drift(emb, views)
        if len(views) > 1:
            for rho, sd_v in zip(self.keep_fractions, sd, strict=True):
                res[f"semantic_divergence@{rho:g}"] = sd_v

        t = time.perf_counter()
        emb = adapter.embed(batch)
        parts = adapter.parts(batch)
        t_eff = time.perf_counter()
        eff = intervention_effects(adapter, batch, "embedding", base_embedding=emb,
                                   chunk_size=self.chunk_size)
        secs["eed_effects"] += time.perf_counter() - t_eff
        views = [adapter.embed(batch, keep) for keep in focused_views(eff, parts, self.keep_fractions,
                                                                      self.min_keep)]
        res["eed"] = expected_embedding_drift(emb, views)
        secs["eed"] += time.perf_counter() - t
        if len(views) > 1:
            for rho, v in zip(self.keep_fractions, views, strict=True):
                res[f"eed@{rho:g}"] = expected_embedding_drift(emb, [v])

        for name, flag in adapter.errors(batch, lp).items():
            res[f"error:{name}"] = flag
        return res


def auroc_table(result: CIMScores) -> dict[str, dict[str, float]]:
    """``{error: {score: AUROC}}`` of every score of ``result`` for every error type."""
    return {err: {s: auroc(v, lab) for s, v in result.scores.items()} for err, lab in result.errors.items()}


def summary(result: CIMScores) -> dict[str, Any]:
    """JSON-ready summary: AUROCs, error rates, ms per example, and the number of inputs."""
    return {"auroc": auroc_table(result),
            "error_rate": {k: float(v.mean()) for k, v in result.errors.items()},
            "ms_per_example": result.ms_per_example(), "seconds": dict(result.seconds), "n": result.n}
