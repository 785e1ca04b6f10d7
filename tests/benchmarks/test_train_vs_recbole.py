"""Pure parts of benchmarks/train_vs_recbole.py: config translation, curve selection, summary."""

import pytest

from benchmarks.train_vs_recbole import load_config, patience_epochs, recbole_config, select, summarize


def _curve(seconds, valid, test):
    rows, cum = [], 0.0
    for e, (t, v, n) in enumerate(zip(seconds, valid, test), start=1):
        cum += t
        m = {"ndcg@10": n, "recall@10": 2 * n}
        rows.append({"epoch": e, "train_seconds": t, "cum_train_seconds": cum,
                     "valid": {"masked": {"ndcg@10": v}}, "test": {"masked": m, "unmasked": m}})
    return rows


def test_recbole_config_mirrors_the_yaml():
    cfg = load_config()
    rb = recbole_config(cfg)
    assert (rb["MAX_ITEM_LIST_LENGTH"], rb["hidden_size"], rb["inner_size"], rb["train_batch_size"]) == (
        50, 64, 256, 128)
    assert rb["loss_type"] == "CE" and rb["train_neg_sample_args"] is None
    assert rb["eval_args"]["split"] == {"LS": "valid_and_test"} and rb["eval_args"]["order"] == "TO"
    assert patience_epochs(cfg["trainer"], 200) == 20
    cfg["model"]["loss_type"] = "sampled"
    with pytest.raises(ValueError, match="loss_type"):
        recbole_config(cfg)


def test_select_uses_time_and_best_validation():
    curve = _curve([2] * 6, [.1, .3, .2, .3, .1, .5], [1, 2, 3, 4, 5, 6])
    sel = select(curve, seconds=9)
    assert sel["last"]["epoch"] == 4 and sel["best"]["epoch"] == 2  # earliest of the tied best
    assert select(curve, seconds=1) is None


def test_summary_speedup_and_equal_time_target():
    ours = _curve([2] * 10, [.1 * i for i in range(10)], [.01 * i for i in range(10)])
    theirs = _curve([30, 30], [.1, .2], [.05, .06])
    s = summarize({"recframe": {"epochs": ours}, "recbole": {"epochs": theirs}, "budget_seconds": 30})
    assert s["speedup"] == pytest.approx(15.0)
    assert s["equal_time"][0]["recframe"]["last"]["epoch"] == 10
    assert s["targets"]["ndcg_at_equal_time"]["recframe"] == pytest.approx(0.09)
    assert s["targets"]["ndcg_at_equal_time"]["met"] is True  # 0.09 vs RecBole's best 0.06 at 60 s
    assert s["end_of_budget"]["recbole"]["last"]["epoch"] == 1  # only its first epoch fits in 30 s
