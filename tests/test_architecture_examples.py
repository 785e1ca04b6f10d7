"""The examples of docs/architecture.md run: each code block is executed and exercised on synthetic data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml

from recframe.data.datamodule import RecDataModule

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"
SYNTHETIC = {"n_users": 120, "n_items": 60, "n_clusters": 3, "mean_length": 12, "seed": 0}


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def examples() -> dict:
    """The page's Python blocks run in one namespace (not the head-probe block: it needs a model)."""
    ns: dict = {}
    for code in _blocks("python"):
        if "read_heads" not in code:
            exec(compile(code, str(DOC), "exec"), ns)  # noqa: S102 - our own documentation
    return ns


def _trainer(**kw) -> L.Trainer:
    return L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                     enable_model_summary=False, num_sanity_val_steps=0, **kw)


def _dm(**kw) -> RecDataModule:
    return RecDataModule(dataset="synthetic", synthetic=SYNTHETIC, split="loo", max_len=10, batch_size=128,
                         **kw)


def test_yaml_blocks_parse():
    for text in _blocks("yaml"):
        assert isinstance(yaml.safe_load(text), dict)


def test_model_family_and_report_callback_examples(examples, tmp_path):
    L.seed_everything(0)
    dm = _dm(metric_families=[examples["TargetProbability"]()])
    model = examples["TinyMF"](n_items=dm.n_items, n_users=dm.n_users, lr=1e-2)
    report = examples["MeanTopScore"](output=str(tmp_path / "top.json"))
    trainer = _trainer(callbacks=[report])
    trainer.fit(model, dm)
    test = trainer.test(model, dm, verbose=False)[0]
    assert 0 < test["test/target_prob"] <= 1 and test["test/ndcg@10"] > 0
    written = json.loads((tmp_path / "top.json").read_text())
    assert written == report.report_ and written["users"] == dm.n_users


def test_addon_example(examples):
    from recframe.models.generative import TIGER, TrieRec
    from recframe.tokenizers import RQKMeansTokenizer

    L.seed_everything(0)
    dm = _dm()
    addon = examples["LevelPrior"](weight=1e-3)
    tokenizer = RQKMeansTokenizer(n_levels=2, codebook_size=8)
    model = TIGER(n_items=dm.n_items, n_users=dm.n_users, tokenizer=tokenizer, features="none", max_len=10,
                  dim=16, n_layers=1, n_heads=2, inner=32, addons=[TrieRec(), addon])
    trainer = _trainer()
    trainer.fit(model, dm)
    assert "train/aux_level_prior_l2" in trainer.callback_metrics
    assert any(b.abs().sum() > 0 for b in addon.bias)  # the logit bias was trained


def test_embedding_addon_example(examples):
    from recframe.models import BPRMF

    L.seed_everything(0)
    dm = _dm()
    addon = examples["ItemNormPenalty"](weight=0.1)
    model = BPRMF(n_items=dm.n_items, n_users=dm.n_users, dim=8, addons=[addon])
    trainer = _trainer(limit_val_batches=0)
    trainer.fit(model, dm)
    assert "train/aux_item_norm" in trainer.callback_metrics
    assert model.hparams["addons"][0]["init_args"] == {"weight": 0.1}


def test_head_probe_example():
    from recframe.models.sasrec import SASRec

    code = next(c for c in _blocks("python") if "read_heads" in c)
    dm = _dm()
    dm.setup("test")
    batches = list(dm.eval_view("test").batches(size=16))
    model = SASRec(n_items=dm.n_items, max_len=10).eval()
    ns = {"model": model, "batch": batches[0], "other_batch": batches[1]}
    with torch.no_grad():
        exec(compile(code, str(DOC), "exec"), ns)  # noqa: S102
    assert ns["z"].shape[0] == 16 and not torch.equal(ns["clean"], ns["ablated"])
