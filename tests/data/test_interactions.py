"""The Interactions table: dense ids, stable time order, CSR histories, compaction."""

from __future__ import annotations

import numpy as np
import pytest

from recframe.data.batches import NegativeSampler, SequenceWindows, pad_rows, sequence_batch
from recframe.data.interactions import Interactions


def test_dense_ids_follow_first_appearance_and_zero_is_padding() -> None:
    inter = Interactions.from_raw(["u9", "u1", "u9"], ["b", "a", "c"], [3, 1, 2])
    assert inter.user_ids.tolist() == ["[PAD]", "u9", "u1"]
    assert inter.item_ids.tolist() == ["[PAD]", "b", "a", "c"]
    assert inter.user_index("u1") == 2 and inter.item_index("c") == 3
    # rows sorted by (user, time): u9 has c (t=2) then b (t=3)
    assert inter.histories.of(1).tolist() == [3, 1]
    assert inter.histories.of(2).tolist() == [2]
    with pytest.raises(KeyError, match="unknown user 'nobody'"):
        inter.user_index("nobody")


def test_compact_drops_unused_ids_and_keeps_order() -> None:
    inter = Interactions.from_raw(["a", "b", "c"], ["x", "y", "z"], [1, 2, 3],
                                  item_features={"y": {"title": "Why", "categories": ["g"]}})
    kept = inter.select(inter.user != 2).compact()
    assert kept.user_ids.tolist() == ["[PAD]", "a", "c"]
    assert kept.item_ids.tolist() == ["[PAD]", "x", "z"]
    assert kept.item_features.title.tolist() == ["", "", ""]


def test_fingerprint_changes_with_content() -> None:
    a = Interactions.from_raw(["u", "u"], ["i", "j"], [1, 2])
    b = Interactions.from_raw(["u", "u"], ["i", "j"], [1, 3])
    assert a.fingerprint != b.fingerprint
    assert a.fingerprint == Interactions.from_raw(["u", "u"], ["i", "j"], [1, 2]).fingerprint


def test_pad_rows_keeps_latest_items_left_padded() -> None:
    indptr = np.array([0, 0, 3, 4])
    values = np.array([5, 6, 7, 8])
    out = pad_rows(indptr, values, np.array([1, 2, 0]), max_len=2)
    assert out.tolist() == [[6, 7], [0, 8], [0, 0]]
    right = pad_rows(indptr, values, np.array([2, 1]), left=False)
    assert right.tolist() == [[8, 0, 0], [5, 6, 7]]


def test_sequence_windows_cover_every_target_once() -> None:
    items = list(range(1, 13))  # one user with 12 items
    inter = Interactions.from_raw(["u"] * 12, [str(i) for i in items], np.arange(12))
    hist = inter.histories
    windows = SequenceWindows.build(hist, max_len=5)
    batch = sequence_batch(hist.items, windows, np.arange(len(windows)), max_len=5)
    targets = batch["target"][batch["target"] > 0].tolist()
    assert sorted(targets) == list(range(2, 13))  # 11 targets, each once
    inp, tgt = batch["input"], batch["target"]
    real = tgt > 0
    assert (tgt[real] == inp[real] + 1).all()  # next item of this user


@pytest.mark.parametrize("stride", [1, 2, 3, 5])
def test_overlapping_windows_count_every_target_once_with_longer_context(stride: int) -> None:
    max_len, n = 5, 23
    inter = Interactions.from_raw(["u"] * n, [str(i) for i in range(1, n + 1)], np.arange(n))
    hist = inter.histories
    windows = SequenceWindows.build(hist, max_len=max_len, stride=stride)
    assert windows.n_targets() == n - 1
    batch = sequence_batch(hist.items, windows, np.arange(len(windows)), max_len=max_len)
    inp, tgt = batch["input"], batch["target"]
    counted = tgt[tgt > 0].tolist()
    assert sorted(counted) == sorted(hist.items[1:].tolist())  # each target exactly once
    for row in range(len(windows)):
        for col in np.flatnonzero(tgt[row].numpy() > 0):
            context = int((inp[row, : col + 1] > 0).sum())  # items the target at this position sees
            position_in_history = int(np.flatnonzero(hist.items == int(tgt[row, col]))[0])
            assert context <= min(position_in_history, max_len)
            # a counted target sees at least max_len - stride + 1 items, or all it has
            assert context >= min(position_in_history, max_len - stride + 1)


def test_window_stride_default_is_the_non_overlapping_layout() -> None:
    inter = Interactions.from_raw(["u"] * 12 + ["v"] * 3, [str(i) for i in range(15)], np.arange(15))
    default = SequenceWindows.build(inter.histories, max_len=5)
    explicit = SequenceWindows.build(inter.histories, max_len=5, stride=5)
    assert default.starts.tolist() == explicit.starts.tolist()
    assert (default.counted == default.starts + 1).all()
    with pytest.raises(ValueError, match="stride"):
        SequenceWindows.build(inter.histories, max_len=5, stride=6)


def test_negative_sampler_never_returns_a_training_item() -> None:
    rng = np.random.default_rng(0)
    users = rng.integers(0, 20, 300)
    items = rng.integers(0, 30, 300)
    inter = Interactions.from_raw(users, items)
    sampler = NegativeSampler(inter.histories, inter.n_items)
    u = np.repeat(np.arange(1, inter.n_users + 1), 50)
    neg = sampler.sample(u)
    assert not sampler._is_positive(u, neg).any()
    assert neg.min() >= 1 and neg.max() <= inter.n_items


@pytest.mark.parametrize("kind", ["pairwise", "sequence", "history"])
def test_every_batch_kind_pickles_for_spawned_workers(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import pickle

    from recframe.data.datamodule import RecDataModule

    dm = RecDataModule(dataset="synthetic", synthetic={"n_users": 40, "n_items": 30, "seed": 0}, max_len=8,
                       batch_size=16)
    monkeypatch.setattr(dm, "_train_kind", lambda: kind)
    for loader in (dm.train_dataloader(), dm.val_dataloader(), dm.test_dataloader()):
        # round-trips an object this test just pickled in memory (what spawned workers do), no file
        clone = pickle.loads(pickle.dumps(loader.collate_fn))
        torch_batch = clone(list(range(4)))
        first = next(iter(torch_batch.values()))
        assert first.shape[0] == 4
    if kind == "sequence":
        b = dm.train_dataloader().collate_fn(list(range(3)))
        assert b["input"].shape == (3, 8) and b["target"].shape == (3, 8)
