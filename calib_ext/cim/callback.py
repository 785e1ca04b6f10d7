"""CIM error detection on a trained recommender's test users, as a Lightning callback.

At ``on_test_end`` :class:`CIMCallback` reads the test users from the datamodule's read-only
:class:`~recframe.data.eval_view.EvaluationView` (``eval_view("test")``: histories, seen items and held-out
items, batched exactly as ``model.score`` takes them), wraps the model in a
:class:`~calib_ext.cim.adapters.RecommenderAdapter`, and scores every user with
:class:`~calib_ext.cim.detector.CIMDetector`: Semantic Divergence, EED (and EED on Semantic Divergence's
views) and the max-probability and entropy baselines. The report holds each score's AUROC for predicting a
wrong top-1 and a miss@K, the error rates, milliseconds per user of each pipeline and the settings; it is
published by :class:`~recframe.callbacks.ReportCallback` (``report_``, JSON file written atomically when
``output`` is set, checkpointed as a JSON string) and logged as ``cim/auroc_<error>_<score>``.

YAML (under ``trainer.callbacks``)::

    - class_path: calib_ext.cim.callback.CIMCallback
      init_args: {output: runs/cim.json, keep_fractions: [0.5], n_clusters: 32}
"""

from __future__ import annotations

from collections.abc import Iterator

import lightning as L
import torch

from calib_ext.cim.adapters import Batch, RecommenderAdapter, take
from calib_ext.cim.detector import CIMDetector, summary
from recframe.callbacks import ReportCallback
from recframe.data.eval_view import EvaluationView


def view_batches(view: EvaluationView, size: int, max_users: int | None,
                 device: torch.device | str | None = None) -> Iterator[Batch]:
    """The view's batches, cut after the first ``max_users`` users (all when None)."""
    left = len(view) if max_users is None else min(int(max_users), len(view))
    for batch in view.batches(size=size, device=device):
        if left <= 0:
            return
        n = len(batch["users"])
        if n > left:
            batch = take(batch, torch.arange(left, device=batch["users"].device))
        left -= min(n, left)
        yield batch


class CIMCallback(ReportCallback):
    """Causal-invariant masking uncertainty (seed ¶16) as error detectors after test (module docstring).

    Args:
        output: JSON file for the report (None: in memory and checkpoints only).
        keep_fractions: budgets of the focused views (:class:`~calib_ext.cim.detector.CIMDetector`).
        n_clusters: semantic classes of the items for Semantic Divergence.
        miss_k: the ``K`` of the ``miss@K`` error.
        max_users: score only the first this many test users (None: all).
        batch_size: users per batch (each is expanded to one masked copy per history item).
        seed: k-means seed.
    """

    log_prefix = "cim"

    def __init__(self, output: str | None = None, keep_fractions: list[float] | tuple[float, ...] = (0.5,),
                 n_clusters: int = 32, miss_k: int = 10, max_users: int | None = None, batch_size: int = 64,
                 seed: int = 0) -> None:
        super().__init__(output)
        self.detector = CIMDetector(keep_fractions=tuple(keep_fractions), n_clusters=n_clusters, seed=seed,
                                    progress=False)
        if max_users is not None and int(max_users) < 1:
            raise ValueError(f"max_users={max_users}; give a positive number of test users or None for all.")
        if int(batch_size) < 1:
            raise ValueError(f"batch_size={batch_size}; it must be >= 1.")
        self.miss_k, self.max_users, self.batch_size = int(miss_k), max_users, int(batch_size)

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        view = self.eval_view(trainer, "test")
        adapter = RecommenderAdapter(pl_module, miss_k=self.miss_k)
        was_training = pl_module.training
        pl_module.eval()
        try:
            self.detector.fit(adapter)
            result = self.detector.score(adapter, view_batches(view, self.batch_size, self.max_users,
                                                               pl_module.device))
        finally:
            pl_module.train(was_training)
        report = {**summary(result), "settings": {
            "keep_fractions": list(self.detector.keep_fractions), "n_clusters": self.detector.n_clusters,
            "miss_k": self.miss_k, "max_users": self.max_users}}
        metrics = {f"auroc_{err}_{score}": value for err, row in report["auroc"].items()
                   for score, value in row.items() if value == value}
        self.publish(trainer, report, metrics)
