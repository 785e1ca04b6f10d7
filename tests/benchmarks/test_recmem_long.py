"""benchmarks.recmem_long: the full-prefix baseline's trimming is exact; the paired interval is right."""

from __future__ import annotations

import numpy as np
import torch

from benchmarks.recmem_long import FullSASRec, paired
from recframe.models.sasrec import SASRec


def test_trimming_padding_columns_leaves_the_sasrec_loss_unchanged() -> None:
    kw = {"n_items": 30, "max_len": 40, "hidden": 16, "n_layers": 2, "n_heads": 2, "inner": 32,
          "dropout": 0.0, "attn_dropout": 0.0}
    torch.manual_seed(0)
    full = FullSASRec(**kw)
    plain = SASRec(**kw)
    plain.load_state_dict(full.state_dict())
    inp = torch.zeros(3, 40, dtype=torch.long)
    for r, n in enumerate((5, 12, 3)):
        inp[r, -n:] = torch.randint(1, 31, (n,))
    tgt = torch.where(inp > 0, torch.randint(1, 31, inp.shape), 0)
    batch = {"input": inp, "target": tgt}
    torch.testing.assert_close(full.loss(batch), plain.loss(batch))


def test_paired_difference_hand_example() -> None:
    # user "a": ranks 3 / 20 -> hits@10 1 and 0; user "b": 50 / 5 -> 0 and 1; user "c": both hit
    a = {"a": [3], "b": [50], "c": [0]}
    b = {"a": [20], "b": [5], "c": [1]}
    res = paired(a, b, k=10)
    assert res["users"] == 3
    assert np.isclose(res["mean"], 0.0)  # (+1 - 1 + 0) / 3
    assert res["ci95"][0] < 0 < res["ci95"][1]
    seeds = paired({"a": [3, 30]}, {"a": [30, 30]}, k=10)  # hits averaged over seeds: 0.5 - 0
    assert np.isclose(seeds["mean"], 0.5)


def test_early_stopping_waits_patience_epochs_after_the_best(monkeypatch) -> None:
    from types import SimpleNamespace

    import benchmarks.recmem_long as bench

    scripted = iter([0.10, 0.20, 0.15, 0.19, 0.18, 0.30])
    monkeypatch.setattr(bench, "evaluate", lambda *a: ({"recall@50": next(scripted)}, {}))
    published = []
    cb = bench.BestOnValidation(None, None, lambda module, cb, s: published.append(cb.best[1]), patience=3)
    trainer = SimpleNamespace(current_epoch=0, should_stop=False)
    for epoch in range(5):
        trainer.current_epoch = epoch
        cb.on_train_epoch_end(trainer, None)
        assert trainer.should_stop == (epoch == 4), epoch  # best at epoch 1; 3 epochs without a new one
    assert published == [0, 1] and cb.best == (0.20, 1)


def test_grid_point_is_chosen_on_seed_zero_validation_only() -> None:
    from benchmarks.recmem_long import chosen_point

    def run(seed: int, valid: float, test: float) -> dict:
        return {"seed": seed, "selection_metric": "recall@10", "valid_recall@10": valid,
                "test": {"recall@10": test}}

    grid = {"base": [run(0, 0.30, 0.9), run(1, 0.99, 0.9)], "lr5e-3": [run(0, 0.40, 0.1)],
            "drop0": [run(0, 0.40, 0.5)]}
    assert chosen_point(grid) == "lr5e-3"  # best seed-0 validation; the tie goes to the earlier GRID point
    assert chosen_point({"lr1e-3": [run(1, 0.2, 0.2)]}) == "lr1e-3"  # one point only: kept
    # runs stored before the selection metric was recorded select on validation Recall@50
    assert chosen_point({"base": [{"seed": 0, "valid_recall@50": 0.2}],
                         "lr1e-3": [{"seed": 0, "valid_recall@50": 0.3}]}) == "lr1e-3"


def test_planted_datamodule_serves_the_key_recall_split() -> None:
    from benchmarks.recmem_long import KeyRecallDataModule
    from recframe.data.synthetic_long import make_key_recall

    kw = {"n_users": 8, "n_keys": 4, "n_fillers": 300, "n_cues": 3, "n_recalls": 3, "n_intro": 4,
          "min_gap": 49, "max_gap": 52, "max_lead": 4, "seed": 2}
    dm = KeyRecallDataModule(dataset="synthetic-key-recall", synthetic=kw, split="loo", max_len=200,
                             eval_ks=[10])
    data = make_key_recall(**kw)
    assert dm.n_users == 8 and dm.n_items == data.interactions.n_items
    test = dm.eval_set("test")
    last = [data.interactions.histories.of(u)[-1] for u in test.users]
    assert [test.heldout.of(u)[0] for u in test.users] == last  # the final key item is the test item
