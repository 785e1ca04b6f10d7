"""Cold-start protocol: cold items leave no trace in any split; cases, masks and ranks by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recframe.data.cold_start import ColdEvalSet, check_cold_settings, cold_eval_set, hold_out_cold_items
from recframe.data.datamodule import RecDataModule
from recframe.data.interactions import DataError
from recframe.metrics.cold_start import cold_start_metrics, cold_start_ranks

SYNTH = {"n_users": 120, "n_items": 80, "n_clusters": 4, "mean_length": 20, "seed": 3}


def test_no_split_mentions_a_cold_item_and_the_catalogue_is_kept() -> None:
    plain = RecDataModule(dataset="synthetic", synthetic=SYNTH)
    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH, cold_items={"fraction": 0.2, "seed": 1})
    sp = dm.split
    cold = dm._cold.items
    assert dm.n_items == plain.n_items and len(cold) == round(0.2 * plain.n_items)
    for part in (sp.train, sp.valid, sp.test):
        assert not np.isin(part.item, cold).any()
    every = plain.split.train.concat(plain.split.valid).concat(plain.split.test)
    assert len(sp.train) + len(sp.valid) + len(sp.test) + len(dm._cold.removed) == len(every)
    again = RecDataModule(dataset="synthetic", synthetic=SYNTH, cold_items={"fraction": 0.2, "seed": 1})
    assert np.array_equal(again.split.train.item, sp.train.item) and np.array_equal(again._cold.items, cold)


def test_cases_take_the_last_cold_item_after_the_warm_history_before_it() -> None:
    from recframe.data.interactions import Interactions

    # user 1: a(1) C(2) b(3) D(4) e(5)  -> target D, history a b, masked C
    # user 2: C(1) f(2)                 -> no warm item before C: no case
    raw = Interactions.from_raw(["u1"] * 5 + ["u2"] * 2, ["a", "C", "b", "D", "e", "C", "f"],
                                [1, 2, 3, 4, 5, 1, 2])
    ids = {raw.item_ids[i]: i for i in range(1, raw.n_items + 1)}
    is_cold = np.isin(raw.item, [ids["C"], ids["D"]])
    from recframe.data.cold_start import ColdItems

    cases = cold_eval_set(raw.select(~is_cold), ColdItems(np.array(sorted([ids["C"], ids["D"]])),
                                                         raw.select(is_cold)))
    assert len(cases) == 1 and cases.targets.tolist() == [ids["D"]]
    assert cases.histories[0].tolist() == [ids["a"], ids["b"]] and cases.masked[0].tolist() == [ids["C"]]


class FixedScores(torch.nn.Module):
    def __init__(self, scores: list[float]) -> None:
        super().__init__()
        self.register_buffer("s", torch.tensor(scores))

    def score(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.s.expand(batch["history"].shape[0], -1)


def test_ranks_count_only_eligible_cold_items_pessimistically() -> None:
    # items 1..6; cold = 2, 4, 5, 6. Scores: item 2 -> 0.9, 4 -> 0.5, 5 -> 0.5, 6 -> 0.7; warm item 1 -> 5.0
    model = FixedScores([0.0, 5.0, 0.9, 1.0, 0.5, 0.5, 0.7])
    cases = ColdEvalSet(cold_items=np.array([2, 4, 5, 6]), users=np.array([1, 2, 3]),
                        histories=[np.array([1]), np.array([3]), np.array([1, 3])],
                        targets=np.array([4, 2, 4]),
                        masked=[np.array([], np.int64), np.array([6]), np.array([2])])
    ranks = cold_start_ranks(model, cases, max_len=5)
    # case 1: above 4 are 2 (0.9), 6 (0.7), and 5 ties (pessimistic) -> rank 3; warm item 1 is not ranked
    # case 2: target 2 is top; 6 is masked -> rank 0
    # case 3: 2 masked; 6 above; 5 ties -> rank 2
    assert ranks.tolist() == [3, 0, 2]
    metrics = cold_start_metrics(ranks, ks=(1, 3))
    assert metrics["recall@1"] == pytest.approx(1 / 3)
    assert metrics["ndcg@3"] == pytest.approx((1.0 + 1 / np.log2(4)) / 3)


@pytest.mark.parametrize("settings, key", [({"fraction": 1.5}, "fraction"), ({"sed": 1}, "unknown"),
                                           ({"seed": -1}, "seed"), ("0.1", "mapping")])
def test_bad_settings_name_the_key(settings, key: str) -> None:
    with pytest.raises(DataError, match=key):
        check_cold_settings(settings)


def test_a_fraction_that_leaves_no_cold_item_is_one_clear_error() -> None:
    plain = RecDataModule(dataset="synthetic", synthetic=SYNTH)
    with pytest.raises(DataError, match="fraction"):
        hold_out_cold_items(plain.split.train, fraction=0.001)


def test_cold_eval_set_without_the_setting_says_how_to_turn_it_on() -> None:
    with pytest.raises(DataError, match="cold_items"):
        RecDataModule(dataset="synthetic", synthetic=SYNTH).cold_eval_set()
