"""IndRM as a Lightning callback: which item side features directly drive a trained model's scores.

:class:`IndRMFeatureReport` listens to the test loop. For every test batch it
asks the model for its full-catalogue scores (``pl_module.score(batch)``,
``[B, n_items + 1]``, under ``torch.no_grad``) and keeps a running sum per
item; at ``on_test_end`` the target is each item's mean score over the test
users seen, the candidate causes are the item side features of the
datamodule (:func:`item_feature_matrix`), and :class:`~causal_ext.parents.IndRM`
selects the features the score depends on directly, i.e. the smallest set
that leaves a residual independent of it. The report (selected features,
identification flag, passing sets) is kept in ``report_``, written as JSON
(atomically) when ``output`` is set, logged to the trainer's logger as
``indrm/n_parents`` and ``indrm/identified``, and saved in the callback's
``state_dict`` (a JSON string, so checkpoints still load with
``weights_only=True``).

What the features mean causally: the score is a deterministic function of the
model's parameters, so "parents" here are the features the *learned* scoring
function varies with once the others are accounted for -- a model-
introspection question, not a claim about users. Features are correlated
through the data, so the additive-noise assumption on the score is what makes
the answer interpretable; ``identified_ = False`` flags the cases where it is not.

YAML (under ``trainer.callbacks``)::

    - class_path: causal_ext.parents.callback.IndRMFeatureReport
      init_args: {output: runs/indrm_features.json, max_categories: 8}
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch

from causal_ext.parents.indrm import IndRM
from recframe.checkpoint_io import atomic_write


def item_feature_matrix(features: Any, n_items: int, *, max_categories: int = 8,
                        max_vector_dims: int = 4) -> tuple[np.ndarray, list[str]]:
    """Numeric candidate features of items ``1..n_items`` from their ``ItemFeatures``.

    Columns, in order (each kept only if it varies across items):
    ``year``; one 0/1 indicator ``cat=NAME`` for each of the ``max_categories``
    most frequent categories; the first ``max_vector_dims`` columns of
    ``vectors`` as ``vec[k]``; every 1-D numeric array of ``extra`` by its key.

    Returns:
        (X [n_items, p], names).

    Raises:
        ValueError: no features, or none that varies.
    """
    if features is None:
        raise ValueError("the datamodule's items have no side features (Interactions.item_features is None); "
                         "IndRMFeatureReport needs year, categories, vectors or extra item columns.")
    rows = slice(1, n_items + 1)
    cols: list[np.ndarray] = []
    names: list[str] = []
    if features.year is not None:
        cols.append(np.asarray(features.year, dtype=float)[rows])
        names.append("year")
    if features.categories is not None and max_categories > 0:
        cats = features.categories[1:n_items + 1]
        top = [c for c, _ in Counter(c for cs in cats for c in cs).most_common(max_categories)]
        for c in top:
            cols.append(np.array([float(c in cs) for cs in cats]))
            names.append(f"cat={c}")
    if features.vectors is not None and max_vector_dims > 0:
        vec = np.asarray(features.vectors, dtype=float)[rows]
        for k in range(min(max_vector_dims, vec.shape[1])):
            cols.append(vec[:, k])
            names.append(f"vec[{k}]")
    for key, arr in sorted((features.extra or {}).items()):
        arr = np.asarray(arr)
        if arr.ndim == 1 and np.issubdtype(arr.dtype, np.number):
            cols.append(arr.astype(float)[rows])
            names.append(str(key))
    keep = [i for i, c in enumerate(cols) if len(c) == n_items and np.ptp(c) > 0]
    if not keep:
        raise ValueError("no item side feature varies across items; nothing for IndRM to select from.")
    return np.column_stack([cols[i] for i in keep]), [names[i] for i in keep]


class IndRMFeatureReport(L.Callback):
    """At the end of testing, IndRM of the model's mean item score on item side features (module docstring).

    Args:
        output: JSON file for the report (None: keep it in memory and the checkpoint only).
        max_categories: most frequent categories turned into indicators.
        max_vector_dims: leading dimensions of item vectors used as features.
        max_batches: test batches whose scores are averaged (None: all).
        indrm: keyword arguments for :class:`~causal_ext.parents.IndRM` (default: its defaults).
    """

    def __init__(self, output: str | None = None, max_categories: int = 8, max_vector_dims: int = 4,
                 max_batches: int | None = None, indrm: dict[str, Any] | None = None) -> None:
        self.output = output
        self.max_categories = max_categories
        self.max_vector_dims = max_vector_dims
        self.max_batches = max_batches
        self.indrm = dict(indrm or {})
        self.report_: dict[str, Any] | None = None
        self._sum: torch.Tensor | None = None
        self._count = 0
        self._batches = 0

    def on_test_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._sum, self._count, self._batches = None, 0, 0

    @torch.no_grad()
    def on_test_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any,
                          batch: dict[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        if self.max_batches is not None and self._batches >= self.max_batches:
            return
        scores = pl_module.score(batch).detach().to("cpu", torch.float64)
        self._sum = scores.sum(0) if self._sum is None else self._sum + scores.sum(0)
        self._count += scores.shape[0]
        self._batches += 1

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._sum is None or self._count == 0:
            return
        dm = trainer.datamodule
        n_items = int(dm.n_items)
        x, names = item_feature_matrix(dm.split.train.item_features, n_items,
                                       max_categories=self.max_categories,
                                       max_vector_dims=self.max_vector_dims)
        y = (self._sum / self._count).numpy()[1:n_items + 1]
        model = IndRM(**self.indrm).fit(x, y, feature_names=names)
        self.report_ = {"target": "mean test score per item", "n_items": n_items, "n_users": self._count,
                        "model": type(pl_module).__name__, "features": names, **model.report()}
        if self.output:
            text = json.dumps(self.report_, indent=2, default=float).encode()
            atomic_write(Path(self.output), lambda fh: fh.write(text))
        for logger in trainer.loggers:
            logger.log_metrics({"indrm/n_parents": float(len(model.parents_)),
                                "indrm/identified": float(model.identified_)})

    def state_dict(self) -> dict[str, Any]:
        """The last report as a JSON string (plain data, safe for ``weights_only`` loading)."""
        return {"report": json.dumps(self.report_, default=float) if self.report_ is not None else ""}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore the last report."""
        text = state_dict.get("report", "")
        self.report_ = json.loads(text) if text else None


__all__ = ["IndRMFeatureReport", "item_feature_matrix"]
