"""FullRankingEvaluator: agreement with ranx, chunk invariance, masking, coverage, state, errors."""

from __future__ import annotations

import math
import warnings

import pytest
import ranx  # a declared dev dependency: a missing ranx fails the suite instead of skipping
import torch

from recframe.metrics import FullRankingEvaluator, NonFiniteScoresError, evaluate
from recframe.metrics.ranking import standard_metrics, target_ranks

L2 = math.log2
RANX_NAMES = {"recall": "recall", "hr": "hit_rate", "ndcg": "ndcg", "mrr": "mrr", "precision": "precision"}
RANX_NAMES["map"] = "map"


def _random_data(n_users=50, n_items=40, n_targets=6, n_seen=8, seed=0, ties=False):
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(n_users, n_items + 1, generator=g, dtype=torch.float64)
    if ties:
        scores = (scores * 4).floor()
    targets = torch.randint(0, n_items + 1, (n_users, n_targets), generator=g)
    labels = torch.randint(-1, 2, (n_users, n_targets), generator=g).to(torch.int8)
    seen = torch.randint(0, n_items + 1, (n_users, n_seen), generator=g)
    return scores, targets, labels, seen


def _run(evaluator, scores, targets, labels, seen, chunk):
    evaluator.reset()
    for s in range(0, scores.shape[0], chunk):
        evaluator.update(
            scores[s : s + chunk], targets[s : s + chunk], labels[s : s + chunk], seen[s : s + chunk]
        )
    return evaluator.compute()


# --------------------------------------------------------------------------------------------- ranx agreement
RANX_KS = (1, 2, 3, 5, 10, 50)  # 50 is above every catalogue below: K larger than the eligible items


def _ranx_batch(seed: int, n_users: int = 300, n_items: int = 30):
    """Distinct scores (a random permutation per user) on per-user catalogues of 2..n_items items.

    A user's catalogue size ``m`` is drawn per user; items above ``m`` are masked through ``seen``, on top of
    up to 8 random seen items (which may hit held-out items: those stay unmasked). 1..6 distinct held-out
    items per user with random labels, so some users have no liked item (left out under ``"liked"``).
    """
    g = torch.Generator().manual_seed(seed)
    scores = torch.zeros(n_users, n_items + 1, dtype=torch.float64)
    targets = torch.zeros(n_users, 6, dtype=torch.long)
    labels = torch.zeros(n_users, 6, dtype=torch.int8)
    seen = torch.zeros(n_users, 8 + n_items, dtype=torch.long)
    for u in range(n_users):
        m = int(torch.randint(2, n_items + 1, (1,), generator=g))
        scores[u, 1:] = (torch.randperm(n_items, generator=g) + 1).double() / n_items
        n_t = int(torch.randint(1, min(6, m) + 1, (1,), generator=g))
        targets[u, :n_t] = torch.randperm(m, generator=g)[:n_t] + 1
        labels[u, :n_t] = torch.randint(-1, 2, (n_t,), generator=g).to(torch.int8)
        n_s = int(torch.randint(0, 9, (1,), generator=g))
        seen[u, :n_s] = torch.randint(0, m + 1, (n_s,), generator=g)
        seen[u, 8 : 8 + n_items - m] = torch.arange(m + 1, n_items + 1)
    return scores, targets, labels, seen


def _ranx_per_user(ranx, scores, targets, labels, seen, relevance):
    """ranx's per-query values ``{name@k: {user: value}}`` for the users with a relevant held-out item."""
    qrels, run = {}, {}
    for u, (row, tgt, lab, sn) in enumerate(zip(scores.tolist(), targets.tolist(), labels.tolist(),
                                              seen.tolist())):
        rel = {t for t, lb in zip(tgt, lab) if t and (relevance == "all" or lb == 1)}
        if not rel:
            continue
        masked = set(sn) - set(tgt)
        qrels[f"u{u}"] = {f"i{t}": 1 for t in rel}
        run[f"u{u}"] = {f"i{j}": row[j] for j in range(1, len(row)) if j not in masked}
    names = [f"{RANX_NAMES[m]}@{k}" for m in RANX_NAMES for k in RANX_KS]
    ranx_run = ranx.Run(run)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranx.evaluate(ranx.Qrels(qrels), ranx_run, names, threads=1)
    return {name: {int(q[1:]): float(v) for q, v in ranx_run.scores[name].items()} for name in names}


@pytest.mark.parametrize("relevance", ["all", "liked"])
def test_standard_metrics_agree_with_ranx(relevance):
    """Every standard metric at six cut-offs, per user and averaged, against ranx on 300 varied users.

    One ranx call per relevance mode on one shared Qrels/Run (ranx costs seconds per call, not per user).
    """
    scores, targets, labels, seen = _ranx_batch(seed=7)
    theirs = _ranx_per_user(ranx, scores, targets, labels, seen, relevance)
    users = sorted(next(iter(theirs.values())))
    assert 100 < len(users) <= scores.shape[0]  # under "liked" some users have no relevant item

    metrics = list(RANX_NAMES)
    ev = FullRankingEvaluator(scores.shape[1] - 1, ks=RANX_KS, metrics=metrics, relevance=relevance)
    for start in range(0, scores.shape[0], 64):  # chunked, as in training
        part = slice(start, start + 64)
        ev.update(scores[part], targets[part], labels[part], seen[part])
    ours = ev.compute()

    ranks, valid = target_ranks(scores, targets, labels, seen, disliked_ties="last")
    relevant = valid if relevance == "all" else valid & (labels == 1)
    per_user = standard_metrics(ranks, relevant, RANX_KS, metrics)
    assert relevant.any(dim=1).nonzero().flatten().tolist() == users
    for m in metrics:
        for i, k in enumerate(RANX_KS):
            name = f"{RANX_NAMES[m]}@{k}"
            expected = torch.tensor([theirs[name][u] for u in users], dtype=torch.float64)
            torch.testing.assert_close(per_user[m][users, i], expected, atol=1e-9, rtol=0, msg=(m, k))
            assert ours[f"{m}@{k}"] == pytest.approx(float(expected.mean()), abs=1e-9), (m, k)


# ---------------------------------------------------------------------------------------- hand-computed cases
def test_evaluator_hand_computed_average_over_users():
    scores = torch.tensor([[0.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4]] * 3)
    targets = torch.tensor([[2, 5], [1, 0], [0, 0]])  # the third user has no held-out item
    labels = torch.ones(3, 2, dtype=torch.int8)
    ev = FullRankingEvaluator(6, ks=[3])
    ev.update(scores, targets, labels)
    out = ev.compute()
    idcg2 = 1 + 1 / L2(3)
    assert out["recall@3"] == pytest.approx((1 / 2 + 1) / 2)
    assert out["hr@3"] == pytest.approx(1.0)
    assert out["precision@3"] == pytest.approx((1 / 3 + 1 / 3) / 2)
    assert out["ndcg@3"] == pytest.approx((1 / L2(3) / idcg2 + 1) / 2)
    assert out["mrr@3"] == pytest.approx((1 / 2 + 1) / 2)
    assert out["map@3"] == pytest.approx((1 / 4 + 1) / 2)
    assert out["item_coverage@3"] == pytest.approx(3 / 6)  # items 1, 2, 3 for every counted user
    assert ev.user_counts()["recall"] == 2


def test_relevance_liked_ignores_disliked_and_unknown_held_out_items():
    scores = torch.tensor([[0.0, 0.9, 0.8, 0.7, 0.6]])
    targets = torch.tensor([[1, 2, 3]])
    labels = torch.tensor([[-1, 0, 1]], dtype=torch.int8)
    ev = FullRankingEvaluator(4, ks=[1, 3], metrics=["recall", "hr", "ndcg", "precision"], relevance="liked")
    ev.update(scores, targets, labels)
    out = ev.compute()
    assert out["recall@1"] == 0.0 and out["hr@1"] == 0.0
    assert out["recall@3"] == 1.0 and out["precision@3"] == pytest.approx(1 / 3)
    assert out["ndcg@3"] == pytest.approx(1 / L2(4))  # liked item at rank 2, IDCG = 1


def test_signed_metrics_through_evaluator_lambda_half():
    scores = torch.tensor([[0.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4]] * 3)
    targets = torch.tensor([[1, 2, 4, 6], [1, 3, 0, 0], [1, 6, 0, 0]])
    labels = torch.tensor([[-1, 1, 1, 0], [-1, -1, 0, 0], [-1, 1, 0, 0]], dtype=torch.int8)
    ev = FullRankingEvaluator(6, ks=[2], metrics=["recall"], signed=True, signed_lambda=0.5)
    ev.update(scores, targets, labels)
    out = ev.compute()
    idcg2 = 1 + 1 / L2(3)
    # user 2 has no liked item: excluded from signed recall/ndcg, kept in signed HR.
    assert out["signed_recall@2"] == pytest.approx(((1 - 0.5) / 2 + (-0.5)) / 2)
    assert out["signed_hr@2"] == pytest.approx((0.5 - 0.5 - 0.5) / 3)
    assert out["signed_ndcg@2"] == pytest.approx(((-0.5 + 1 / L2(3)) / idcg2 - 0.5) / 2)
    assert out["signed_ndcg@2"] < 0
    assert set(out) == {"recall@2", "signed_recall@2", "signed_hr@2", "signed_ndcg@2"}


def test_all_equal_scores_rank_held_out_item_last():
    ev = FullRankingEvaluator(10, ks=[9, 10], metrics=["hr", "mrr"])
    ev.update(torch.ones(1, 11), torch.tensor([[4]]), torch.ones(1, 1), seen=torch.tensor([[1]]))
    out = ev.compute()
    # 9 eligible items; the held-out one ranks last (rank 8): a hit at K=9 with RR 1/9.
    assert out["hr@9"] == 1.0 and out["mrr@9"] == pytest.approx(1 / 9)


def test_masked_top_item_and_padding_never_count():
    scores = torch.tensor([[1e9, 0.1, 0.99, 0.5, 0.4]])  # column 0 and seen item 2 score highest
    ev = FullRankingEvaluator(4, ks=[1], metrics=["hr", "item_coverage"])
    ev.update(scores, torch.tensor([[2]]), torch.ones(1, 1), seen=torch.tensor([[2]]))
    assert ev.compute()["hr@1"] == 1.0  # a held-out item is never masked, even if seen
    ev.reset()
    ev.update(scores, torch.tensor([[3]]), torch.ones(1, 1), seen=torch.tensor([[2, 0]]))
    out = ev.compute()
    assert out["hr@1"] == 1.0  # seen item 2 is gone, held-out 3 is first
    assert ev.state_tensors()["coverage"][0].tolist() == [0, 0, 0, 1, 0]


def test_item_coverage_union_and_short_rows():
    scores = torch.tensor([[0.0, 0.9, 0.8, 0.1, 0.2], [0.0, 0.1, 0.9, 0.8, 0.2]])
    seen = torch.tensor([[1, 2, 3], [0, 0, 0]])
    ev = FullRankingEvaluator(4, ks=[1, 2], metrics=["item_coverage"])
    ev.update(scores, torch.tensor([[4], [1]]), torch.ones(2, 1), seen)
    out = ev.compute()
    assert out["item_coverage@1"] == pytest.approx(2 / 4)  # {4} u {2}
    assert out["item_coverage@2"] == pytest.approx(3 / 4)  # {4} (only 1 eligible) u {2, 3}
    ev.update(torch.tensor([[0.0, 0.1, 0.2, 0.3, 0.9]]), torch.tensor([[0]]), torch.ones(1, 1))
    assert ev.compute()["item_coverage@2"] == pytest.approx(3 / 4)  # rows without held-out items: ignored


def test_no_users_gives_nan_and_unknown_names_raise():
    ev = FullRankingEvaluator(3, ks=[1], metrics=["recall", "item_coverage"], signed=True)
    out = ev.compute()
    assert math.isnan(out["recall@1"]) and math.isnan(out["signed_hr@1"])
    assert out["item_coverage@1"] == 0.0
    with pytest.raises(ValueError, match=r"valid names.*item_coverage"):
        FullRankingEvaluator(3, metrics=["recall", "auc"])
    with pytest.raises(ValueError, match="relevance"):
        FullRankingEvaluator(3, relevance="positive")
    with pytest.raises(ValueError, match="ks"):
        FullRankingEvaluator(3, ks=[0])


def test_input_validation():
    ev = FullRankingEvaluator(3, ks=[1])
    with pytest.raises(ValueError, match="n_items"):
        ev.update(torch.zeros(1, 3), torch.tensor([[1]]), torch.ones(1, 1))
    with pytest.raises(ValueError, match="0..3"):
        ev.update(torch.zeros(1, 4), torch.tensor([[4]]), torch.ones(1, 1))
    with pytest.raises(ValueError, match="labels"):
        ev.update(torch.zeros(1, 4), torch.tensor([[1]]), torch.full((1, 1), 2))


def test_non_finite_scores_raise_naming_the_model():
    ev = FullRankingEvaluator(5, ks=[2])
    scores = torch.rand(4, 6)
    scores[2, 3] = float("nan")
    with pytest.raises(NonFiniteScoresError, match=r"'BPR-MF'.*1 entries.*1 of 4 user"):
        ev.update(scores, torch.ones(4, 1, dtype=torch.long), torch.ones(4, 1), model_name="BPR-MF")
    assert ev.user_counts()["recall"] == 0  # nothing was accumulated
    with pytest.raises(NonFiniteScoresError, match="SASRec"):
        evaluate(
            lambda u: torch.full((len(u), 6), float("inf")),
            torch.arange(3),
            torch.ones(3, 1, dtype=torch.long),
            torch.ones(3, 1),
            None,
            ev,
            chunk_size=2,
            model_name="SASRec",
        )


# ------------------------------------------------------------------------------------ streaming invariances
@pytest.mark.parametrize("ties", [False, True])
def test_chunk_size_invariance(ties):
    scores, targets, labels, seen = _random_data(ties=ties)
    metrics = ["recall", "hr", "ndcg", "mrr", "precision", "map"] + ([] if ties else ["item_coverage"])
    ev = FullRankingEvaluator(40, ks=[1, 5, 10, 20], metrics=metrics, signed=True, signed_lambda=0.7)
    results = [_run(ev, scores, targets, labels, seen, chunk) for chunk in (1, 7, scores.shape[0])]
    assert results[0].keys() == results[1].keys() == results[2].keys()
    for key in results[0]:
        assert results[0][key] == pytest.approx(results[2][key], abs=1e-12, rel=0), key
        assert results[1][key] == pytest.approx(results[2][key], abs=1e-12, rel=0), key


def test_evaluate_helper_matches_manual_updates():
    scores, targets, labels, seen = _random_data(n_users=23, seed=3)
    ev = FullRankingEvaluator(40, ks=[5, 10], signed=True)
    manual = _run(ev, scores, targets, labels, seen, scores.shape[0])
    looped = evaluate(lambda users: scores[users], torch.arange(23), targets, labels, seen, ev, chunk_size=4)
    assert looped == pytest.approx(manual, abs=1e-12)


def test_state_tensors_sum_reduce_like_distributed():
    scores, targets, labels, seen = _random_data(n_users=30, seed=5)
    kwargs = dict(n_items=40, ks=[3, 10], signed=True)
    full = FullRankingEvaluator(**kwargs)
    full.update(scores, targets, labels, seen)
    parts = [FullRankingEvaluator(**kwargs) for _ in range(2)]
    parts[0].update(scores[:11], targets[:11], labels[:11], seen[:11])
    parts[1].update(scores[11:], targets[11:], labels[11:], seen[11:])
    states = [p.state_tensors() for p in parts]
    assert all(v.dtype in (torch.float64, torch.long) for v in states[0].values())
    reduced = {key: states[0][key] + states[1][key] for key in states[0]}
    parts[0].load_state_tensors(reduced)
    assert parts[0].compute() == pytest.approx(full.compute(), abs=1e-12)
    with pytest.raises(ValueError, match="keys"):
        parts[0].load_state_tensors({"sum/recall": torch.zeros(2)})


def test_low_precision_scores_and_grad_are_accepted():
    scores, targets, labels, seen = _random_data(n_users=8, seed=7)
    ev = FullRankingEvaluator(40, ks=[5])
    ev.update(scores.to(torch.bfloat16).requires_grad_(), targets, labels, seen)
    assert 0.0 <= ev.compute()["recall@5"] <= 1.0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    scores, targets, labels, seen = _random_data(n_users=64, n_items=500, n_targets=20, seed=11, ties=True)
    kwargs = dict(n_items=500, ks=[1, 10, 50], metrics=["recall", "hr", "ndcg", "mrr", "precision", "map"])
    cpu = FullRankingEvaluator(**kwargs, signed=True)
    gpu = FullRankingEvaluator(**kwargs, signed=True)
    cpu.update(scores, targets, labels, seen)
    gpu.update(scores.cuda(), targets.cuda(), labels.cuda(), seen.cuda())
    assert gpu.device.type == "cuda"
    assert gpu.compute() == pytest.approx(cpu.compute(), abs=1e-12)


def test_per_user_values_average_to_the_reported_metrics_and_leave_the_state_alone() -> None:
    """``per_user``'s masked mean is ``compute()``'s value for every per-user metric (standard, signed and
    disliked hits, ties included); corpus-level item coverage has no per-user value; the state stays."""
    from recframe.metrics import DislikedHitsFamily

    scores, targets, labels, seen = _random_data(n_users=40, ties=True, seed=3)
    ev = FullRankingEvaluator(40, ks=[3, 10], signed=True, relevance="liked", families=[DislikedHitsFamily()])
    expected = _run(ev, scores, targets, labels, seen, chunk=40)
    per_user = ev.per_user(scores, targets, labels, seen)
    assert ev.compute() == expected  # per_user added nothing to the running state
    assert "item_coverage@10" in expected and "item_coverage@10" not in per_user
    assert {"ndcg@10", "signed_ndcg@10", "disliked_hits@3"} <= set(per_user)
    for name, (values, mask) in per_user.items():
        assert values.shape == mask.shape == (40,)
        mean = float(values[mask].mean()) if mask.any() else float("nan")
        assert mean == pytest.approx(expected[name], nan_ok=True), name
    assert per_user["disliked_hits@3"][0].max() >= 1  # the ties put some disliked items in the top 3
