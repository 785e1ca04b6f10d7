"""IndRM as a Lightning callback: which item side features directly drive a trained model's scores.

:class:`IndRMFeatureReport` runs at ``on_test_end``. It reads the test users
from the datamodule's read-only evaluation view and asks the model for their
full-catalogue scores (``pl_module.score(batch)`` on the view's batches, the
test loader's, ``[B, n_items + 1]``, under ``torch.no_grad``); the target is
each item's mean score over those users, the candidate causes are the item
side features of the view (:func:`item_feature_matrix`), and
:class:`~causal_ext.parents.IndRM` selects the features the score depends on
directly, i.e. the smallest set that leaves a residual independent of it. The
report (selected features, identification flag, passing sets) is published by
:class:`~recframe.callbacks.ReportCallback`: kept in ``report_``, written as
JSON (atomically) when ``output`` is set, logged as ``indrm/n_parents`` and
``indrm/identified``, and saved in the checkpoint as a JSON string.

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

from collections import Counter
from typing import Any

import lightning as L
import numpy as np
import torch

from causal_ext.parents.indrm import IndRM
from recframe.callbacks import ReportCallback
from recframe.data.eval_view import EvaluationView


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


class IndRMFeatureReport(ReportCallback):
    """At the end of testing, IndRM of the model's mean item score on item side features (module docstring).

    Args:
        output: JSON file for the report (None: keep it in memory and the checkpoint only).
        max_categories: most frequent categories turned into indicators.
        max_vector_dims: leading dimensions of item vectors used as features.
        max_batches: test batches (of the datamodule's evaluation batch size) whose scores are
            averaged (None: all).
        indrm: keyword arguments for :class:`~causal_ext.parents.IndRM` (default: its defaults).
    """

    log_prefix = "indrm"

    def __init__(self, output: str | None = None, max_categories: int = 8, max_vector_dims: int = 4,
                 max_batches: int | None = None, indrm: dict[str, Any] | None = None) -> None:
        super().__init__(output)
        self.max_categories = max_categories
        self.max_vector_dims = max_vector_dims
        self.max_batches = max_batches
        self.indrm = dict(indrm or {})

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        view = self.eval_view(trainer, "test")
        total, count = mean_scores(pl_module, view, self.max_batches)
        if count == 0:
            return
        n_items = view.n_items
        x, names = item_feature_matrix(view.item_features, n_items, max_categories=self.max_categories,
                                       max_vector_dims=self.max_vector_dims)
        y = (total / count).numpy()[1:n_items + 1]
        model = IndRM(**self.indrm).fit(x, y, feature_names=names)
        self.publish(trainer, {"target": "mean test score per item", "n_items": n_items, "n_users": count,
                               "model": type(pl_module).__name__, "features": names, **model.report()},
                     {"n_parents": len(model.parents_), "identified": float(model.identified_)})


@torch.no_grad()
def mean_scores(pl_module: L.LightningModule, view: EvaluationView,
                max_batches: int | None = None) -> tuple[torch.Tensor, int]:
    """Sum over the view's users of ``pl_module.score`` rows (float64, CPU) and how many users were summed.

    Batches come from ``view.batches()`` (the test loader's batches), the model in eval mode;
    only the first ``max_batches`` batches when given.
    """
    device = next((p.device for p in pl_module.parameters()), None)
    if device is None:
        device = next((b.device for b in pl_module.buffers()), torch.device("cpu"))
    total: torch.Tensor | None = None
    count = 0
    was_training = pl_module.training
    pl_module.eval()
    try:
        for i, batch in enumerate(view.batches(device=device)):
            if max_batches is not None and i >= max_batches:
                break
            scores = pl_module.score(batch).detach().to("cpu", torch.float64)
            total = scores.sum(0) if total is None else total + scores.sum(0)
            count += scores.shape[0]
    finally:
        pl_module.train(was_training)
    return (torch.zeros(view.n_items + 1, dtype=torch.float64) if total is None else total), count


__all__ = ["IndRMFeatureReport", "item_feature_matrix", "mean_scores"]
