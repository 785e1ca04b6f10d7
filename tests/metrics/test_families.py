"""Metric families: a toy family streams with the built-in ones, reaches the logs and the benchmark JSON,
keeps the DDP state contract; the cross-sign tie rule is the worst case for every metric at once."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L
import pytest
import torch

from recframe.metrics import EvalChunk, FullRankingEvaluator, MetricFamily, NonFiniteScoresError
from recframe.metrics.ranking import target_ranks

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "smoke"
TOY = "tests.metrics.test_families.TargetReciprocalRank"


class TargetReciprocalRank(MetricFamily):
    """Toy family: per user, the mean over held-out items of ``1 / (r_t + 1)`` (no cut-off)."""

    names = ("target_rr",)
    needs = frozenset({"ranks"})
    disliked_ties = None
    per_k = False

    def values(self, chunk: EvalChunk) -> dict[str, torch.Tensor]:
        reciprocal = torch.where(chunk.valid, 1.0 / (chunk.ranks().double() + 1.0), 0.0)
        return {"target_rr": reciprocal.sum(dim=1) / chunk.valid.sum(dim=1).clamp(min=1)}


class TargetProbability(MetricFamily):
    """Toy family reading only the score rows: softmax probability mass of the held-out items."""

    names = ("target_prob",)
    needs = frozenset({"scores"})
    disliked_ties = None
    per_k = False

    def values(self, chunk: EvalChunk) -> dict[str, torch.Tensor]:
        probs = torch.softmax(chunk.scores[:, 1:].double(), dim=1)
        picked = probs.gather(1, (chunk.targets - 1).clamp(min=0))
        return {"target_prob": torch.where(chunk.valid, picked, 0.0).sum(dim=1)}


class ReadsRanksUndeclared(TargetReciprocalRank):
    names = ("sneaky",)
    needs = frozenset({"scores"})

    def values(self, chunk: EvalChunk) -> dict[str, torch.Tensor]:
        return {"sneaky": super().values(chunk)["target_rr"]}


def _data(n_users: int = 37, n_items: int = 25, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 5, (n_users, n_items + 1), generator=g).float()  # many ties
    targets = torch.randint(0, n_items + 1, (n_users, 4), generator=g)
    labels = torch.randint(-1, 2, (n_users, 4), generator=g)
    seen = torch.randint(0, n_items + 1, (n_users, 6), generator=g)
    return scores, targets, labels, seen


def _stream(ev: FullRankingEvaluator, scores, targets, labels, seen, chunk: int) -> dict[str, float]:
    ev.reset()
    for s in range(0, scores.shape[0], chunk):
        ev.update(scores[s : s + chunk], targets[s : s + chunk], labels[s : s + chunk], seen[s : s + chunk])
    return ev.compute()


# ------------------------------------------------------------------------------------------- the family API
def test_toy_family_streams_next_to_the_builtin_ones():
    scores, targets, labels, seen = _data()
    ev = FullRankingEvaluator(25, ks=[5], signed=True, relevance="liked",
                              families=[TargetReciprocalRank(), TargetProbability()])
    out = _stream(ev, scores, targets, labels, seen, chunk=8)
    assert {"ndcg@5", "item_coverage@5", "signed_ndcg@5", "target_rr", "target_prob"} <= set(out)
    assert ev.names[-2:] == ("target_rr", "target_prob")

    ranks, valid = target_ranks(scores, targets, labels, seen)  # brute force the toy averages
    per_user = [sum(1 / (r + 1) for r, v in zip(row, ok) if v) / sum(ok) for row, ok in
                zip(ranks.tolist(), valid.tolist()) if any(ok)]
    assert out["target_rr"] == pytest.approx(sum(per_user) / len(per_user), abs=1e-12)
    assert ev.user_counts()["target_rr"] == len(per_user)
    # chunking does not change any family's result
    again = _stream(ev, scores, targets, labels, seen, chunk=37)
    assert again == pytest.approx(out, abs=1e-12, nan_ok=True)


def test_family_state_reduces_by_sum_like_ddp():
    scores, targets, labels, seen = _data(seed=3)
    kwargs = {"n_items": 25, "ks": [3, 10], "signed": True, "families": [TargetReciprocalRank()]}
    whole = _stream(FullRankingEvaluator(**kwargs), scores, targets, labels, seen, chunk=10)
    parts = [FullRankingEvaluator(**kwargs) for _ in range(2)]
    for i, part in enumerate(parts):
        rows = slice(i, None, 2)
        part.update(scores[rows], targets[rows], labels[rows], seen[rows])
    states = [p.state_tensors() for p in parts]
    assert "sum/target_rr" in states[0] and states[0]["sum/target_rr"].shape == ()
    merged = FullRankingEvaluator(**kwargs)
    merged.load_state_tensors({key: states[0][key] + states[1][key] for key in states[0]})
    assert merged.compute() == pytest.approx(whole, abs=1e-12)


def test_scores_only_family_still_checks_finite_scores():
    scores, targets, labels, seen = _data()
    ev = FullRankingEvaluator(25, metrics=(), families=[TargetProbability()])
    out = _stream(ev, scores, targets, labels, seen, chunk=16)
    assert set(out) == {"target_prob"} and 0 < out["target_prob"] <= 1
    scores[3, 7] = float("nan")
    with pytest.raises(NonFiniteScoresError, match="'toy'"):
        ev.update(scores, targets, labels, seen, model_name="toy")


def test_bad_families_get_one_clear_error():
    with pytest.raises(TypeError, match="MetricFamily"):
        FullRankingEvaluator(5, families=[object()])
    with pytest.raises(ValueError, match="target_rr"):
        FullRankingEvaluator(5, families=[TargetReciprocalRank(), TargetReciprocalRank()])

    class Bad(TargetReciprocalRank):
        needs = frozenset({"ranks", "gradients"})

    with pytest.raises(ValueError, match="Bad needs \\['gradients'\\]"):
        FullRankingEvaluator(5, families=[Bad()])
    scores, targets, labels, seen = _data(n_items=5)
    ev = FullRankingEvaluator(5, metrics=(), families=[ReadsRanksUndeclared()])
    with pytest.raises(RuntimeError, match="must list 'ranks' in its `needs`"):
        ev.update(scores, targets, labels, seen)
    with pytest.raises(ValueError, match="unknown metric name"):
        FullRankingEvaluator(5, metrics=["target_rr"])


# --------------------------------------------------------------------------- through Lightning and the runs
def test_toy_family_reaches_validation_and_test_logs_of_a_real_fit():
    from recframe.data.datamodule import RecDataModule
    from recframe.models import BPRMF

    L.seed_everything(0)
    synthetic = {"n_users": 120, "n_items": 60, "n_clusters": 3, "mean_length": 12, "seed": 0}
    dm = RecDataModule(dataset="synthetic", synthetic=synthetic, split="loo", max_len=20, batch_size=256,
                       metric_families=[TargetReciprocalRank()])
    model = BPRMF(n_items=dm.n_items, n_users=dm.n_users, dim=8, lr=1e-2)
    trainer = L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(model, dm)
    val = float(trainer.callback_metrics["val/target_rr"])
    test = trainer.test(model, dm, verbose=False)[0]
    assert 0 < val <= 1 and 0 < test["test/target_rr"] <= 1
    assert "test/ndcg@10" in test  # the protocol's own metrics are still there


def test_toy_family_from_the_config_reaches_the_benchmark_json(tmp_path, monkeypatch):
    import benchmarks.common as common
    from recframe.runs import fit_and_test

    monkeypatch.chdir(tmp_path)
    families = json.dumps([{"class_path": TOY}])
    extra = ["--trainer.max_epochs", "1", "--data.metric_families", families]
    res = fit_and_test(SMOKE / "bprmf.yaml", extra)
    assert 0 < res["valid"]["target_rr"] <= 1 and 0 < res["test"]["target_rr"] <= 1
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    written, _ = common.write_results("toy", {"runs": {"BPR-MF": res}}, "| toy |\n")
    assert json.loads(written.read_text())["runs"]["BPR-MF"]["test"]["target_rr"] == res["test"]["target_rr"]


# ------------------------------------------------------------------------------- ties across signs (14.6)
@pytest.mark.parametrize("numba", ["1", "0"])  # the compiled kernel and the torch counting path
def test_constant_scores_are_no_better_than_random_on_signed_metrics(numba, monkeypatch):
    """A constant-score model used to get signed metrics of 0, above a random ranking's expectation."""
    monkeypatch.setenv("RECFRAME_NUMBA", numba)
    n_users, n_items, lam = 200, 50, 1.0
    g = torch.Generator().manual_seed(0)
    targets = torch.stack([torch.randperm(n_items, generator=g)[:4] + 1 for _ in range(n_users)])
    labels = torch.tensor([[1, -1, -1, 0]]).expand(n_users, -1)  # one liked, two disliked, one unknown
    kwargs = {"n_items": n_items, "ks": [1, 5, 10], "signed": True, "signed_lambda": lam}

    constant = FullRankingEvaluator(**kwargs, relevance="all")
    constant.update(torch.zeros(n_users, n_items + 1), targets, labels)
    worst = constant.compute()
    randoms = []
    for seed in range(20):  # expectation of a uniformly random ranking, by Monte Carlo over 4,000 users
        ev = FullRankingEvaluator(**kwargs)
        random_scores = torch.rand(n_users, n_items + 1, generator=torch.Generator().manual_seed(seed))
        ev.update(random_scores, targets, labels)
        randoms.append(ev.compute())
    for k in kwargs["ks"]:
        for name in ("signed_recall", "signed_hr", "signed_ndcg"):
            expected = sum(r[f"{name}@{k}"] for r in randoms) / len(randoms)
            assert expected < -0.005  # more disliked than liked: a random ranking scores below 0
            assert worst[f"{name}@{k}"] < expected - 0.05, (name, k)
        # both disliked items lead every tie: hit at K >= 2, the liked one never
        assert worst[f"signed_recall@{k}"] == -lam * min(k, 2)
        # and at the same time the standard metrics (every held-out item relevant) see no hit at all
        assert worst[f"recall@{k}"] == 0.0 and worst[f"ndcg@{k}"] == 0.0


def test_relevance_all_with_signed_uses_each_family_worst_case():
    """One tied disliked item: standard metrics put it after the ties, signed metrics before them."""
    scores = torch.tensor([[0.0, 0.5, 0.5, 0.5, 0.5]])
    targets, labels = torch.tensor([[2]]), torch.tensor([[-1]])
    ev = FullRankingEvaluator(4, ks=[1], metrics=["hr"], signed=True)  # relevance="all"
    ev.update(scores, targets, labels)
    out = ev.compute()
    assert out["hr@1"] == 0.0 and out["signed_hr@1"] == -1.0
    assert ev.user_counts()["signed_recall"] == 0  # no liked item: left out of Signed Recall / NDCG
