"""``Recommender`` on bad input: non-finite scores, bad or huge ``k``, a bare-string user, an empty history,
``decode`` on the wrong model. Tiny hand-built models, no training: each test runs in milliseconds."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import torch

from recframe import Recommender, UnknownIdError
from recframe.metrics.ranking import NonFiniteScoresError

USERS = ["[PAD]", "196", "186", "22"]
ITEMS = ["[PAD]"] + [f"i{i}" for i in range(1, 9)]
SEEN = {1: [1, 2], 2: [3], 3: [4, 5, 6]}  # dense user -> dense items


class _Table(torch.nn.Module):
    """Scores from a fixed table ``[n_users + 1, n_items + 1]``; a history row scores as user 0."""

    uses_history = True

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.n_items = table.shape[1] - 1
        self.table = table

    def score(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.table[batch["users"]].clone()


class _Embedding(_Table):
    """An embedding model: ``score = query . items``, served through a FAISS index."""

    def __init__(self, queries: torch.Tensor, items: torch.Tensor) -> None:
        super().__init__(queries @ items.T)
        self.queries, self.items = queries, items

    def query_embedding(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.queries[batch["users"]]

    def item_embeddings(self) -> torch.Tensor:
        return self.items


def _serving() -> dict[str, object]:
    indptr = np.concatenate([[0], np.cumsum([len(SEEN.get(u, [])) for u in range(len(USERS))])])
    flat = np.concatenate([SEEN.get(u, []) for u in range(len(USERS))]).astype(np.int64)
    return {"user_ids": USERS, "item_ids": ITEMS, "max_len": 4, "seen_indptr": torch.from_numpy(indptr),
            "seen_items": torch.from_numpy(flat), "popularity": torch.arange(len(ITEMS)).float()}


def _table(seed: int = 0) -> torch.Tensor:
    values = np.random.default_rng(seed).permutation(len(USERS) * len(ITEMS)).astype(np.float32)
    return torch.from_numpy(values).reshape(len(USERS), len(ITEMS)) / 10.0


def _rec(table: torch.Tensor | None = None) -> Recommender:
    return Recommender(_Table(_table() if table is None else table), _serving())


def test_a_nan_score_raises_naming_model_and_user_instead_of_serving_padding() -> None:
    table = _table()
    table[1, 5] = float("nan")  # user '196'; today: '[PAD]' at rank 1 with score nan
    rec = _rec(table)
    with pytest.raises(NonFiniteScoresError, match=r"'_Table'.*1 of 1 user\(s\): 196"):
        rec.recommend(users=["196"], k=3)
    assert rec.recommend(users=["186"], k=3).items[0]  # other users are still served


def test_an_all_nan_row_raises_instead_of_returning_nothing() -> None:
    table = _table()
    table[2] = float("nan")
    with pytest.raises(NonFiniteScoresError, match="186"):
        _rec(table).recommend(users=["196", "186"], k=3)
    with pytest.raises(NonFiniteScoresError, match=r"history\[0\]"):
        _rec(_table().fill_(float("inf"))).recommend(histories=[["i1"]], k=3)


def test_nan_query_embeddings_raise_on_the_index_path() -> None:
    from recframe.retrieval import ItemIndex

    gen = torch.Generator().manual_seed(0)
    queries, items = torch.randn(len(USERS), 4, generator=gen), torch.randn(len(ITEMS), 4, generator=gen)
    queries[3, 1] = float("nan")
    model = _Embedding(queries, items)
    rec = Recommender(model, _serving(), ItemIndex.from_model(model, factory="Flat"))
    assert len(rec.recommend(users=["196"], k=3).items[0]) == 3
    with pytest.raises(NonFiniteScoresError, match=r"query embeddings.*: 22"):
        rec.recommend(users=["196", "22"], k=3)


def test_the_padding_id_is_never_served() -> None:
    table = _table()
    table[:, 0] = 1e30  # the padding column scores highest
    out = _rec(table).recommend(users=USERS[1:], k=100, exclude_seen=False)
    assert all("[PAD]" not in row and len(row) == len(ITEMS) - 1 for row in out.items)


@pytest.mark.parametrize("k", [2.5, "10", True, 0])
def test_k_must_be_a_whole_number_at_least_one(k: object) -> None:
    with pytest.raises(ValueError, match=r"k="):
        _rec().recommend(users=["196"], k=k)  # type: ignore[arg-type]


def test_a_huge_k_is_capped_before_anything_is_allocated() -> None:
    rec = _rec()
    tracemalloc.start()
    try:
        out = rec.recommend(users=["196", "186", "22"], k=10**7)  # today: 3 x 10^7 int64 + float32 arrays
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * 2**20, f"recommend(k=10**7) allocated {peak / 2**20:.0f} MiB"
    assert [len(row) for row in out.items] == [len(ITEMS) - 1 - len(SEEN[u]) for u in (1, 2, 3)]


def test_a_bare_string_is_one_user() -> None:
    rec = _rec()
    out = rec.recommend(users="196", k=3)  # today: the three users '1', '9', '6'
    assert out.queries == ["196"] and out.items == rec.recommend(users=["196"], k=3).items
    assert rec.recommend(users=22, k=3).queries == ["22"]
    with pytest.raises(UnknownIdError, match="unknown user '19'"):
        rec.recommend(users="19")


def test_an_empty_history_raises_unless_popularity_is_asked_for() -> None:
    rec = _rec()
    with pytest.raises(ValueError, match=r"histories\[1\] is empty"):
        rec.recommend(histories=[["i1"], []], k=3)  # today: a silent popularity answer
    out = rec.recommend(histories=[["i1"], []], k=3, cold_start="popularity")
    assert out.fallback == [False, True] and out.items[1] == ["i8", "i7", "i6"]
    with pytest.raises(ValueError, match="histories is one string"):
        rec.recommend(histories="i1")


def test_decode_settings_are_checked() -> None:
    rec = _rec()
    assert not rec.can_beam
    with pytest.raises(ValueError, match=r"_Table has no trie-constrained generate\(\).*decode='exact'"):
        rec.recommend(users=["196"], decode="beam", beam=5)
    with pytest.raises(ValueError, match="decode='greedy'"):
        rec.recommend(users=["196"], decode="greedy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="beam=5 applies only to decode='beam'"):
        rec.recommend(users=["196"], beam=5)
