"""SIDTrie: every root-to-leaf path is an item, every item is a path, child masks match brute-force sets."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from recframe.models.generative import SIDTrie
from tests.generative.scorers import random_codes


@st.composite
def code_tables(draw: st.DrawFn) -> np.ndarray:
    sizes = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    n_items = draw(st.integers(1, min(math.prod(sizes), 14)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return random_codes(rng, sizes, n_items), sizes


def both_storages(codes: np.ndarray, sizes: tuple[int, ...]) -> list[SIDTrie]:
    dense, csr = SIDTrie.from_codes(codes, sizes), SIDTrie.from_codes(codes, sizes, dense_max_bytes=0)
    assert all(dense.is_dense(lv) for lv in range(len(sizes)))
    assert not any(csr.is_dense(lv) for lv in range(len(sizes)))
    return [dense, csr]


def walk_leaves(trie: SIDTrie) -> dict[tuple[int, ...], int]:
    """Every root-to-leaf path found through ``children`` -> the id stored at the leaf."""
    paths: dict[tuple[int, ...], int] = {(): 0}
    for level in range(trie.depth):
        nodes = torch.tensor(list(paths.values()))
        kids = trie.children(level, nodes)
        paths = {(*path, code): int(kids[row, code]) for row, path in enumerate(paths)
                 for code in range(trie.codebook_sizes[level]) if kids[row, code] >= 0}
    return paths


@settings(max_examples=60, deadline=None)
@given(code_tables())
def test_paths_are_items_and_items_are_paths(table: tuple[np.ndarray, tuple[int, ...]]) -> None:
    codes, sizes = table
    expected = {tuple(codes[i].tolist()): i for i in range(1, len(codes))}
    for trie in both_storages(codes, sizes):
        assert walk_leaves(trie) == expected
        assert trie.n_nodes[0] == 1 and trie.n_nodes[-1] == trie.n_items == len(codes) - 1
        assert sorted(trie.leaf_items.tolist()) == list(range(1, len(codes)))


@settings(max_examples=60, deadline=None)
@given(code_tables())
def test_child_masks_equal_brute_force_sets(table: tuple[np.ndarray, tuple[int, ...]]) -> None:
    codes, sizes = table
    real = codes[1:]
    for trie in both_storages(codes, sizes):
        for depth in range(trie.depth):
            brute_prefixes = sorted({tuple(row[:depth].tolist()) for row in real})
            assert [tuple(p) for p in trie.prefixes(depth).tolist()] == brute_prefixes
            nodes = torch.arange(trie.n_nodes[depth])
            mask = trie.child_mask(depth, nodes)
            for node, prefix in enumerate(brute_prefixes):
                allowed = {int(r[depth]) for r in real if tuple(r[:depth].tolist()) == prefix}
                assert set(torch.nonzero(mask[node]).flatten().tolist()) == allowed
            dead = trie.children(depth, torch.tensor([-1, 0]))
            assert (dead[0] == -1).all() and torch.equal(dead[1], trie.children(depth, torch.tensor(0)))


@settings(max_examples=40, deadline=None)
@given(code_tables())
def test_node_arrays_are_consistent(table: tuple[np.ndarray, tuple[int, ...]]) -> None:
    codes, sizes = table
    trie = SIDTrie.from_codes(torch.as_tensor(codes), sizes)
    for item in range(1, len(codes)):
        nodes = trie.path_nodes[item]
        for depth in range(trie.depth + 1):
            assert trie.prefixes(depth)[nodes[depth]].tolist() == codes[item, :depth].tolist()
            under = int(np.all(codes[1:, :depth] == codes[item, :depth], axis=1).sum())
            assert int(trie.subtree_items[depth][nodes[depth]]) == under
            if depth:
                assert int(trie.parents(depth)[nodes[depth]]) == int(nodes[depth - 1])
                assert int(trie.node_codes(depth)[nodes[depth]]) == codes[item, depth - 1]
        assert int(trie.leaf_items[nodes[-1]]) == item
    assert (trie.path_nodes[0] == -1).all()
    for level in range(trie.depth):
        off = trie.child_offsets(level)
        counts = torch.bincount(trie.parents(level + 1), minlength=trie.n_nodes[level])
        assert torch.equal(torch.diff(off), counts)


def test_example_and_from_table() -> None:
    codes = np.array([[0, 0], [0, 1], [0, 0], [1, 2], [2, 0], [2, 1]])
    trie = SIDTrie.from_table(SimpleNamespace(codes=codes, codebook_sizes=(3, 3)))
    assert trie.n_nodes == (1, 3, 5)
    assert trie.children(0, torch.tensor([0])).tolist() == [[0, 1, 2]]
    assert trie.children(1, torch.tensor([0, 1, 2])).tolist() == [[2, 1, -1], [-1, -1, 3], [4, 5, -1]]
    assert trie.to("cpu") is trie
    assert trie.memory_bytes()["dense"] == 4 * (1 * 3 + 3 * 3)


@pytest.mark.parametrize(("codes", "sizes", "match"), [
    (np.zeros((3,), dtype=np.int64), (2,), "shape"),
    (np.zeros((1, 2), dtype=np.int64), (2, 2), "n_items >= 1"),
    (np.array([[0, 0], [0, 1]], dtype=float), (2, 2), "dtype"),
    (np.array([[0, 0], [0, 1]]), (2,), "codebook_sizes has 1 levels"),
    (np.array([[0, 0], [0, 1]]), (2, 0), "at least one code"),
    (np.array([[0, 0], [0, 2]]), (2, 2), r"codes\[1, 1\] = 2 is outside"),
    (np.array([[0, 0], [1, -1]]), (2, 2), "outside"),
    (np.array([[0, 0], [0, 1], [1, 1], [0, 1]]), (2, 2), "items 1 and 3 share the code path"),
])
def test_bad_tables_raise_one_clear_error(codes: np.ndarray, sizes: tuple[int, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SIDTrie.from_codes(codes, sizes)


def test_bad_queries_raise() -> None:
    trie = SIDTrie.from_codes(np.array([[0, 0], [0, 1], [1, 0]]), (2, 2))
    with pytest.raises(ValueError, match="levels run 0..1"):
        trie.children(2, torch.tensor([0]))
    with pytest.raises(ValueError, match="depths run 0..2"):
        trie.prefixes(3)
    with pytest.raises(ValueError, match="no attribute 'codebook_sizes'"):
        SIDTrie.from_table(SimpleNamespace(codes=np.zeros((2, 1))))


def test_dense_budget_is_per_level() -> None:
    rng = np.random.default_rng(0)
    codes = random_codes(rng, (4, 50), 120)
    trie = SIDTrie.from_codes(codes, (4, 50), dense_max_bytes=4 * 4 * 50)  # level 1 (4 x 50) fits, not more
    assert trie.is_dense(0) and trie.is_dense(1)
    trie = SIDTrie.from_codes(codes, (4, 50), dense_max_bytes=4 * 4 * 50 - 1)
    assert trie.is_dense(0) and not trie.is_dense(1)
    nodes = torch.tensor([[3, -1], [0, 2]])
    assert torch.equal(trie.children(1, nodes), SIDTrie.from_codes(codes, (4, 50)).children(1, nodes))
