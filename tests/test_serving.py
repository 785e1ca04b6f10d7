"""``Recommender``: restores a checkpoint, ranks like the evaluator, filters seen items, is thread-safe."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from recframe import Recommender, UnknownIdError
from tests.cli_support import fit_smoke


def _train(tmp: Path, config: str, name: str) -> tuple[Path, object]:
    cli = fit_smoke(config, tmp / "runs", 2, "--trainer.logger.init_args.name", name)
    last = next((tmp / "runs" / name).glob("version_*/checkpoints/last.ckpt"))
    return last, cli.datamodule


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, object]]:
    tmp = tmp_path_factory.mktemp("serving")
    return {name: _train(tmp, f"{name}.yaml", name) for name in ("sasrec", "bprmf", "popularity")}


def _evaluator_top(model, batch: dict[str, torch.Tensor], seen: list[np.ndarray], k: int):
    """Top-k exactly as the full-ranking evaluator ranks: ``score``, padding and seen items masked."""
    with torch.inference_mode():
        scores = model.score(batch).float()
    scores = scores.clone()  # a normal tensor, writable outside inference mode
    scores[:, 0] = -torch.inf
    for r, items in enumerate(seen):
        scores[r, torch.from_numpy(items)] = -torch.inf
    top = torch.topk(scores, k, dim=1)
    return top.indices.numpy(), top.values.numpy()


def test_history_scores_equal_the_evaluators(trained) -> None:
    ckpt, dm = trained["sasrec"]
    rec = Recommender.from_checkpoint(ckpt)
    assert ckpt.with_suffix(".faiss").exists()  # the index was saved next to the checkpoint
    es = dm.eval_set("test")
    batch = es.batch(list(range(16)), max_len=dm.max_len)
    users = es.users[:16]
    seen = [es.known.of(u) for u in users]
    items, scores = _evaluator_top(rec.model, batch, seen, 10)
    histories = [[rec.item_ids[i] for i in h] for h in seen]
    out = rec.recommend(histories=histories, k=10)
    for r in range(16):
        assert out.items[r] == [rec.item_ids[i] for i in items[r]]
        np.testing.assert_allclose(out.scores[r], scores[r], rtol=1e-5, atol=1e-5)


def test_user_scores_equal_the_model_and_never_return_seen_items(trained) -> None:
    ckpt, _ = trained["bprmf"]
    rec = Recommender.from_checkpoint(ckpt)
    dense = np.arange(1, len(rec.user_ids))
    seen = [rec.seen_items[rec.seen_indptr[u]:rec.seen_indptr[u + 1]] for u in dense]
    items, scores = _evaluator_top(rec.model, {"users": torch.from_numpy(dense)}, seen, 10)
    out = rec.recommend(users=[rec.user_ids[u] for u in dense], k=10)
    for r in range(len(dense)):
        assert out.items[r] == [rec.item_ids[i] for i in items[r]]
        np.testing.assert_allclose(out.scores[r], scores[r], rtol=1e-5, atol=1e-5)
        assert not set(out.items[r]) & {rec.item_ids[i] for i in seen[r]}
        assert "[PAD]" not in out.items[r]


def test_exclude_seen_false_can_return_seen_items(trained) -> None:
    rec = Recommender.from_checkpoint(trained["bprmf"][0])
    users = rec.user_ids[1:]
    out = rec.recommend(users=users, k=20, exclude_seen=False)
    hits = sum(bool(set(out.items[r]) & {rec.item_ids[i] for i in rec.seen_items[
        rec.seen_indptr[r + 1]:rec.seen_indptr[r + 2]]}) for r in range(len(users)))
    assert hits > 0  # a trained model ranks its training items high; only exclude_seen removes them


def test_full_catalogue_scoring_for_models_without_embeddings(trained) -> None:
    rec = Recommender.from_checkpoint(trained["popularity"][0])
    assert rec.index is None
    out = rec.recommend(users=[rec.user_ids[1]], k=5)
    seen = set(rec.seen_items[rec.seen_indptr[1]:rec.seen_indptr[2]])
    counts = rec.model.counts.numpy()
    eligible = [i for i in range(1, len(counts)) if i not in seen]
    assert out.scores[0] == sorted(counts[eligible], reverse=True)[:5]  # tie-safe: the top-5 counts
    assert {rec.item_ids.index(i) for i in out.items[0]} <= set(eligible)


def test_unknown_ids_error_or_fall_back_to_popularity(trained) -> None:
    rec = Recommender.from_checkpoint(trained["sasrec"][0])
    with pytest.raises(UnknownIdError, match="unknown user 'nobody'"):
        rec.recommend(users=["nobody"])
    with pytest.raises(UnknownIdError, match="unknown item 'no-such-item' in histories\\[0\\]"):
        rec.recommend(histories=[[rec.item_ids[1], "no-such-item"]])
    out = rec.recommend(users=["nobody", rec.user_ids[1]], k=5, cold_start="popularity")
    assert out.fallback == [True, False]
    top = np.argsort(-rec.popularity[1:], kind="stable")[:5] + 1
    assert out.items[0] == [rec.item_ids[i] for i in top]
    bpr = Recommender.from_checkpoint(trained["bprmf"][0])
    with pytest.raises(ValueError, match="BPRMF scores by user id"):
        bpr.recommend(histories=[[bpr.item_ids[1]]])


def test_concurrent_calls_give_the_sequential_answers(trained) -> None:
    rec = Recommender.from_checkpoint(trained["sasrec"][0])
    rng = np.random.default_rng(0)
    requests = [list(rng.choice(rec.user_ids[1:], size=7)) for _ in range(40)]
    expected = [rec.recommend(users=r, k=10).items for r in requests]
    results: dict[int, list[list[str]]] = {}
    errors: list[BaseException] = []

    def worker(ids: range) -> None:
        try:
            for i in ids:
                results[i] = rec.recommend(users=requests[i], k=10).items
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(range(t, 40, 8),)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [results[i] for i in range(40)] == expected


def test_titles_and_frame(trained) -> None:
    rec = Recommender.from_checkpoint(trained["sasrec"][0])
    frame = rec.recommend(users=rec.user_ids[1:3], k=3).to_frame()
    assert list(frame.columns[:4]) == ["query", "rank", "item", "score"]
    assert len(frame) == 6 and frame["rank"].tolist() == [1, 2, 3, 1, 2, 3]


def test_recommend_cli(trained, capsys) -> None:
    from recframe.cli import main

    ckpt = str(trained["sasrec"][0])
    rec = Recommender.from_checkpoint(ckpt)
    user = rec.user_ids[3]
    assert main(["recommend", "--ckpt", ckpt, "--user", user, "-k", "4"]) == 0
    printed = capsys.readouterr().out
    for item in rec.recommend(users=[user], k=4).items[0]:
        assert f" {item} " in printed
    assert main(["recommend", "--ckpt", ckpt, "--user", "nobody"]) == 2
    assert "unknown user 'nobody'" in capsys.readouterr().err
