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


def test_per_user_ranks_pack_and_paired_difference_known_answer():
    import math

    from benchmarks.per_user import pack_ranks, paired_difference, per_user_ndcg

    users = ["1", "10", "2"]
    ours = [{"test_rank_per_user": {"1": 0, "10": 3, "2": 10}}]
    theirs = [{"test_rank_per_user": {"1": 1, "10": 3, "2": 12}}]
    pack_ranks(ours, users)
    pack_ranks(theirs, users)
    assert ours[0]["test_top10_ranks"] == "03-" and theirs[0]["test_top10_ranks"] == "13-"
    assert per_user_ndcg(ours[0]).tolist() == [1.0, 1 / math.log2(5), 0.0]
    d = paired_difference(ours[0], theirs[0])
    assert d["mean"] == pytest.approx((1.0 - 1 / math.log2(3)) / 3)
    low, high = d["ci95"]
    assert 0.0 <= low <= d["mean"] <= high  # only one user differs, and in our favour
    with pytest.raises(ValueError, match="miss 1 users"):
        pack_ranks([{"test_rank_per_user": {"1": 0}}], ["1", "2"])


def test_every_equal_time_target_names_where_recframe_is_behind():
    ours = _curve([2] * 10, [.1 * i for i in range(10)], [.01 * i for i in range(10)])
    theirs = _curve([4, 30], [.1, .2], [.05, .06])  # at 4 s recframe's best-validation test is 0.01
    s = summarize({"recframe": {"epochs": ours}, "recbole": {"epochs": theirs}, "budget_seconds": 34})
    every = s["targets"]["ndcg_at_every_equal_time"]
    assert every["behind_at_seconds"] == [4] and every["met"] is False
    assert s["targets"]["ndcg_at_equal_time"]["met"] is True  # the end point alone would hide it


def test_paired_difference_over_seeds_averages_seeds_per_user_first():
    import math

    from benchmarks.per_user import bootstrap_difference, paired_over_seeds, rank_string

    assert rank_string({"2": 12, "1": 0, "10": 3}) == "03-"  # sorted raw ids: "1", "10", "2"
    a = [{"test_top10_ranks": "00"}, {"test_top10_ranks": "0-"}]  # user 2: hit in one seed of two
    b = [{"test_top10_ranks": "--"}, {"test_top10_ranks": "--"}]
    d = paired_over_seeds(a, b)
    assert d["mean"] == pytest.approx((1.0 + 0.5) / 2) and d["significant"]
    same = bootstrap_difference([0.0] * 50)
    assert same["ci95"] == [0.0, 0.0] and not same["significant"]
    noisy = bootstrap_difference([1.0, -1.0] * 50)
    assert noisy["ci95"][0] < 0 < noisy["ci95"][1] and not noisy["significant"]
    assert math.isclose(noisy["mean"], 0.0)
