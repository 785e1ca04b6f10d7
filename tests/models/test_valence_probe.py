"""The valence probe: planted linear valence is decoded, random labels are not."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recframe.data.datamodule import RecDataModule
from recframe.models import BPRMF, SASRec
from recframe.models.signed import ValenceProbe, valence_probe


def _planted(n: int, d: int, seed: int, readout: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """Paired embeddings; labels ``sign(w . (q ⊙ e))`` for a fixed direction ``w`` (or random labels)."""
    rng = np.random.default_rng(seed)
    q, e = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    if readout is None:
        labels = rng.choice([-1, 1], size=n)
    else:
        labels = np.where((q * e) @ readout > 0, 1, -1)
    return q, e, labels


def test_probe_decodes_planted_valence_and_not_noise() -> None:
    w = np.random.default_rng(9).normal(size=16)
    probe = ValenceProbe().fit(*_planted(2000, 16, 0, w))
    assert probe.auroc(*_planted(800, 16, 1, w)) > 0.97
    noise = ValenceProbe().fit(*_planted(2000, 16, 2, None))
    assert abs(noise.auroc(*_planted(800, 16, 3, None)) - 0.5) < 0.06
    # the inner product (all-ones read-out) does not see a direction orthogonal to it
    q, e, y = _planted(1000, 16, 4, w - w.mean())
    from sklearn.metrics import roc_auc_score

    assert abs(roc_auc_score(y > 0, (q * e).sum(1)) - 0.5) < 0.1


def test_probe_refuses_one_class_and_bad_features() -> None:
    with pytest.raises(ValueError, match="needs liked \\(\\+1\\) and disliked \\(-1\\) pairs"):
        ValenceProbe().fit(np.ones((4, 2)), np.ones((4, 2)), np.ones(4))
    with pytest.raises(ValueError, match="features='dot'"):
        ValenceProbe(features="dot")  # type: ignore[arg-type]


@pytest.mark.parametrize("cls, kwargs", [(BPRMF, {"dim": 8}),
                                         (SASRec, {"max_len": 10, "hidden": 8, "n_layers": 1, "n_heads": 1,
                                                   "inner": 16})])
def test_valence_probe_runs_on_any_embedding_model(cls, kwargs: dict) -> None:
    dm = RecDataModule(dataset="synthetic", split="ratio", max_len=10,
                       synthetic={"n_users": 60, "n_items": 40, "n_clusters": 3, "seed": 0})
    torch.manual_seed(0)
    model = cls(n_items=dm.n_items, n_users=dm.n_users, **kwargs)
    out = valence_probe(model, dm.split, max_len=10, probe=ValenceProbe(features="both"))
    assert out["n_train_pairs"] > 0 and out["n_test_pairs"] > 0 and out["features"] == "both"
    for key in ("probe_auroc", "probe_train_auroc", "score_auroc"):
        assert 0.0 <= out[key] <= 1.0
    assert model.training  # the probe leaves the model's mode as it found it
