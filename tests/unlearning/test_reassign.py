"""TRACER's reassignment: never two items on one path, minimal sharing, and the SID table's new version."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from recframe.tokenizers.sid_table import SIDTable
from recframe.unlearning.reassign import exclusive_roots, reassign_forget_items, shared_retain_items


def _random_case(seed: int, sizes=(3, 4, 2), n_items=16, share=0.3):
    rng = np.random.default_rng(seed)
    paths = list(itertools.product(*(range(s) for s in sizes)))
    pick = rng.choice(len(paths), size=n_items, replace=False)
    codes = np.array([[0] * len(sizes)] + [paths[i] for i in pick], dtype=np.int64)
    forget = np.zeros(n_items + 1, dtype=bool)
    forget[1:] = rng.random(n_items) < share
    forget[1 + rng.integers(n_items)] = True
    return codes, sizes, forget


def _cost(codes: np.ndarray, retain: np.ndarray, path: tuple[int, ...]) -> int:
    return sum(int((codes[retain, :d] == np.asarray(path[:d])).all(1).sum()) for d in range(1, len(path) + 1))


@pytest.mark.parametrize("seed", range(12))
def test_reassignment_never_collides_and_keeps_retain_items(seed: int) -> None:
    codes, sizes, forget = _random_case(seed)
    moved = reassign_forget_items(codes, sizes, forget)
    new = moved.apply(codes)
    assert len(np.unique(new[1:], axis=0)) == len(new) - 1  # every path unique
    assert np.array_equal(new[~forget], codes[~forget])  # retain rows untouched
    assert (new[1:] < np.asarray(sizes)).all() and (new >= 0).all()  # inside the codebooks
    # minimal total sharing cost: brute force over all collision-free assignments' costs = the n_F cheapest
    retain = np.flatnonzero(~forget)[1:]
    taken = {tuple(p) for p in codes[retain].tolist()}
    free = [p for p in itertools.product(*(range(s) for s in sizes)) if p not in taken]
    cheapest = sorted(_cost(codes, retain, p) for p in free)[: int(forget.sum())]
    assert moved.sharing_cost == sum(cheapest)
    assert moved.sharing_cost <= moved.sharing_cost_before


def test_a_fresh_level0_code_takes_every_forget_item() -> None:
    # level-0 code 2 is unused: the forget items (1 and 3, mixed with retain items under codes 0, 1)
    # move there
    codes = np.array([[0, 0], [0, 0], [0, 1], [1, 0], [1, 1]])
    forget = np.array([False, True, False, True, False])
    moved = reassign_forget_items(codes, (3, 2), forget)
    new = moved.apply(codes)
    assert sorted(map(tuple, new[[1, 3]].tolist())) == [(2, 0), (2, 1)]
    assert moved.sharing_cost == 0 and moved.sharing_cost_before == 2
    assert shared_retain_items(codes, forget) == [2, 0] and moved.shared_after == [0, 0]
    assert exclusive_roots(new, forget) == [(2,)]
    assert exclusive_roots(codes, forget) == [(0, 0), (1, 0)]


def test_already_exclusive_items_keep_their_paths() -> None:
    codes = np.array([[0, 0], [0, 0], [0, 1], [1, 0], [1, 1]])
    forget = np.array([False, False, False, True, True])  # items 3, 4 alone under code 1
    moved = reassign_forget_items(codes, (2, 2), forget)
    assert moved.moved == 0 and np.array_equal(moved.apply(codes), codes)


def test_too_few_free_paths_and_empty_concepts_are_refused() -> None:
    codes = np.array([[0, 0], [0, 0], [0, 1], [1, 0], [1, 1]])
    with pytest.raises(ValueError, match="no item"):
        reassign_forget_items(codes, (2, 2), np.zeros(5, dtype=bool))
    with pytest.raises(ValueError, match="every item"):
        reassign_forget_items(codes, (2, 2), np.array([False, True, True, True, True]))


def test_the_reassigned_table_gets_a_new_version_and_fingerprint() -> None:
    codes = np.array([[0, 0], [0, 0], [0, 1], [1, 0], [1, 1]])
    table = SIDTable(
        codes=codes, codebook_sizes=(3, 2), fingerprint="abc", settings={"tokenizer": "t"}, stats={}
    )
    new = table.reassigned([1, 3], [[2, 0], [2, 1]], reason="concept: x")
    assert new.version == 1 and table.version == 0
    assert new.fingerprint != table.fingerprint and new.settings["derived_from"] == "abc"
    assert new.codes[1].tolist() == [2, 0] and new.codes[2].tolist() == [0, 1]
    again = SIDTable.from_state_dict(new.state_dict())
    assert again.version == 1 and again.fingerprint == new.fingerprint
    assert new.reassigned([2], [[0, 0]], reason="r").version == 2
    with pytest.raises(ValueError, match="unique"):  # two items on one path are refused
        table.reassigned([1], [[1, 0]], reason="collide")
    with pytest.raises(ValueError, match="distinct"):
        table.reassigned([1, 1], [[2, 0], [2, 1]], reason="dup")
