"""The evaluation protocol seen from a model: chunk-size invariance and NaN scores."""

from __future__ import annotations

import lightning as L
import pytest
import torch

from recframe.data.datamodule import RecDataModule
from recframe.metrics.ranking import NonFiniteScoresError
from recframe.models import BPRMF

SYNTH = {"n_users": 120, "n_items": 80, "n_clusters": 3, "mean_length": 15, "seed": 2}


def _test(model: BPRMF, eval_batch_size: int, split: str = "loo") -> dict[str, float]:
    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH, split=split, eval_batch_size=eval_batch_size)
    trainer = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False)
    return trainer.test(model, dm, verbose=False)[0]


@pytest.mark.parametrize("split", ["loo", "ratio"])
def test_metrics_do_not_depend_on_the_evaluation_chunk_size(split: str) -> None:
    torch.manual_seed(0)
    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH)
    model = BPRMF(n_items=dm.n_items, n_users=dm.n_users, dim=8)
    whole = _test(model, 4096, split)
    for size in (1, 7):
        chunked = _test(model, size, split)
        assert chunked.keys() == whole.keys()
        for key, value in whole.items():
            assert chunked[key] == pytest.approx(value, abs=1e-12), key


class _Broken(BPRMF):
    def score(self, batch):
        s = super().score(batch)
        s[0, 3] = float("nan")
        return s


def test_nan_scores_raise_an_error_naming_the_model() -> None:
    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH)
    model = _Broken(n_items=dm.n_items, n_users=dm.n_users, dim=8)
    with pytest.raises(NonFiniteScoresError, match="_Broken"):
        _test(model, 64)


def test_sharded_evaluation_summed_across_processes_equals_one_process() -> None:
    """What DDP does: each rank evaluates its shard, the sums are added, then metrics computed."""
    from recframe.data.datamodule import ShardSampler
    from recframe.metrics import FullRankingEvaluator

    torch.manual_seed(0)
    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH, split="ratio", eval_batch_size=16)
    model = BPRMF(n_items=dm.n_items, n_users=dm.n_users, dim=8).eval()
    es = dm.eval_set("test")
    world = 3
    shards = [list(ShardSampler(len(es.users), world, rank)) for rank in range(world)]
    assert sorted(i for shard in shards for i in shard) == list(range(len(es.users)))  # each user once

    def run(indices: list[int]) -> FullRankingEvaluator:
        ev = FullRankingEvaluator(n_items=dm.n_items, signed=True, relevance="liked")
        for start in range(0, len(indices), 16):
            batch = es.batch(indices[start:start + 16], dm.max_len)
            with torch.no_grad():
                ev.update(model.score(batch), batch["targets"], batch["labels"], batch["seen"])
        return ev

    whole = run(list(range(len(es.users)))).compute()
    parts = [run(shard).state_tensors() for shard in shards]
    merged = FullRankingEvaluator(n_items=dm.n_items, signed=True, relevance="liked")
    merged.load_state_tensors({k: sum(p[k] for p in parts) for k in parts[0]})
    for key, value in whole.items():
        assert merged.compute()[key] == pytest.approx(value, abs=1e-12), key
