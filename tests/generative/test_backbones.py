"""Semantic-ID backbones: trie structure known answers, and training equals scoring."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recframe.models.generative import TrieRec
from recframe.models.generative.decoder import DecoderBackbone
from recframe.models.generative.structure import (
    ANCESTOR,
    DESCENDANT,
    OTHER,
    SAME_NODE,
    SIBLING,
    item_token_nodes,
    pair_relations,
    subtree_sizes,
)
from recframe.models.generative.tiger import TigerBackbone


def test_subtree_sizes_by_hand() -> None:
    codes = np.array([[0, 0], [0, 1], [0, 2], [1, 0]])  # items 1..3 (row 0 padding)
    assert subtree_sizes(codes).tolist() == [[0, 0], [2, 1], [2, 1], [1, 1]]


def test_pair_relations_by_hand() -> None:
    # item 1 = (0, 1), item 2 = (0, 2), item 3 = (1, 0); tokens of history [1, 2, 3]:
    # t0 = node (0) of item 1, t1 = (0, 1), t2 = (0) of item 2, t3 = (0, 2), t4 = (1), t5 = (1, 0)
    codes = torch.tensor([[0, 0], [0, 1], [0, 2], [1, 0]])
    nodes = item_token_nodes(torch.tensor([[1, 2, 3]]), codes, torch.from_numpy(subtree_sizes(codes.numpy())))
    lca, dist, rel, same = (t[0] for t in pair_relations(nodes, nodes))
    assert (rel[1, 0], lca[1, 0], dist[1, 0], bool(same[1, 0])) == (ANCESTOR, 1, 1, True)
    assert (rel[0, 1], dist[0, 1]) == (DESCENDANT, 1)
    assert (rel[1, 3], lca[1, 3], dist[1, 3], bool(same[1, 3])) == (SIBLING, 1, 2, False)
    assert (rel[0, 2], lca[0, 2], dist[0, 2], bool(same[0, 2])) == (SAME_NODE, 1, 0, False)
    assert (rel[0, 3], dist[0, 3]) == (DESCENDANT, 1)  # item 2's (0, 2) lies below item 1's (0)
    assert (rel[5, 1], lca[5, 1], dist[5, 1]) == (OTHER, 0, 4)
    assert (rel[0, 4], lca[0, 4], dist[0, 4]) == (SIBLING, 0, 2)  # (0) and (1) are children of the root
    assert nodes.subtree[0].tolist() == [2, 1, 2, 1, 1, 1]


def _codes(n: int = 60, sizes: tuple[int, ...] = (4, 4, 5), seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    paths: set[tuple[int, ...]] = set()
    while len(paths) < n:
        paths.add(tuple(int(c) for c in rng.integers(0, sizes)))
    return np.array([[0] * len(sizes), *sorted(paths)], dtype=np.int64)


@pytest.mark.parametrize("cls", [TigerBackbone, DecoderBackbone])
@pytest.mark.parametrize("trierec", [False, True])
@pytest.mark.parametrize("history_tokens", ["codes", "items"])
def test_teacher_forced_loss_equals_stepwise_scoring(cls, trierec: bool, history_tokens: str) -> None:
    """The training loss of a window's last target is -sum_l log softmax(step(prefix_l))[c_l]."""
    torch.manual_seed(0)
    addons = [TrieRec()] if trierec else []
    model = cls(
        _codes(), (4, 4, 5), dim=32, n_layers=2, n_heads=2, inner=64, dropout=0.0, window=6, addons=addons,
        history_tokens=history_tokens,
    ).eval()
    if trierec:  # the TrieRec tables start at zero; give them values so the test exercises them
        for p in model.addons.parameters():
            torch.nn.init.normal_(p, std=0.5)
    inputs = torch.tensor([[0, 0, 3, 5, 7, 9], [1, 2, 3, 4, 5, 6]])
    targets = torch.tensor([[0, 0, 5, 7, 9, 11], [2, 3, 4, 5, 6, 8]])
    last = torch.zeros_like(targets)
    last[:, -1] = targets[:, -1]
    with torch.no_grad():
        ctx = model.context(inputs)
        path = model.codes[targets[:, -1]]
        logp = sum(
            torch.log_softmax(model.step(ctx, path[:, None, :level])[:, 0], -1).gather(
                1, path[:, level : level + 1]
            )[:, 0]
            for level in range(3)
        )
        per_row = torch.stack([model.loss(inputs[b : b + 1], last[b : b + 1]) * 3 for b in range(2)])
    torch.testing.assert_close(-logp, per_row, rtol=1e-5, atol=1e-5)


def _trierec_model(cls: type, history_tokens: str, seed: int) -> TigerBackbone | DecoderBackbone:
    """A small backbone with TrieRec whose (zero-initialised) tables get random values, so tests exercise
    them; no dropout."""
    torch.manual_seed(seed)
    model = cls(_codes(), (4, 4, 5), dim=32, n_layers=2, n_heads=2, inner=64, dropout=0.0, window=6,
                addons=[TrieRec()], history_tokens=history_tokens)
    with torch.no_grad():
        for p in model.addons.parameters():
            torch.nn.init.normal_(p, std=0.5)
    return model


ValueAndGrads = tuple[torch.Tensor, list[torch.Tensor]]


def _same_value_and_gradients(reference: ValueAndGrads,
                              other: ValueAndGrads) -> tuple[torch.Tensor, torch.Tensor]:
    """Assert two (value, gradients) pairs of one function computed two ways agree; return both values."""
    (value, grads), (other_value, other_grads) = reference, other
    torch.testing.assert_close(other_value, value, rtol=1e-5, atol=1e-6)
    assert len(other_grads) == len(grads) > 10
    for a, b in zip(other_grads, grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    return value, other_value


@pytest.mark.parametrize("cls, history_tokens", [(TigerBackbone, "codes"), (TigerBackbone, "items"),
                                                 (DecoderBackbone, "items")])
def test_compact_loss_equals_the_broadcast_loss_in_value_and_gradient(cls, history_tokens: str) -> None:
    """Decoding only the real targets (``compact=True``) is the same function as decoding every window
    position and dropping the padded ones; the default compacts a mostly padded batch."""
    model = _trierec_model(cls, history_tokens, seed=3)
    inputs = torch.tensor([[0, 0, 0, 0, 3, 5], [0, 0, 0, 1, 2, 3], [0, 0, 0, 0, 0, 4]])
    targets = torch.tensor([[0, 0, 0, 0, 5, 7], [0, 0, 0, 2, 3, 4], [0, 0, 0, 0, 0, 9]])

    def value_and_grads(compact: bool | None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        loss = model.loss(inputs, targets, compact=compact)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    broadcast, compact = _same_value_and_gradients(value_and_grads(False), value_and_grads(True))
    default, _ = value_and_grads(None)
    assert default == compact  # 6 of 18 positions are real: the default compacts (same process, same path)


def _stream_output(model: TigerBackbone | DecoderBackbone, items: torch.Tensor,
                   packed: bool | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The encoder memory (TIGER) or the hidden stream (decoder-only) of ``items``, and its real tokens."""
    if isinstance(model, TigerBackbone):
        memory, valid, _ = model._encode(items, packed=packed)
        return memory, valid
    h, nodes, _, _ = model._stream(items, packed=packed)
    return h, nodes.valid


@pytest.mark.parametrize("cls", [TigerBackbone, DecoderBackbone])
@pytest.mark.parametrize("history_tokens", ["codes", "items"])
def test_packed_stream_equals_the_dense_one_on_real_tokens(cls, history_tokens: str) -> None:
    """Running the stream's token-wise layers on the real tokens only (``run_stream(packed=True)``) is the
    dense stream's function on them, in value and gradient; the default packs a mostly padded batch and
    keeps a mostly real one dense."""
    model = _trierec_model(cls, history_tokens, seed=4)
    inputs = torch.tensor([[0, 0, 0, 0, 3, 5], [0, 0, 0, 1, 2, 3], [0, 0, 0, 0, 0, 4], [0, 0, 0, 0, 0, 0]])
    weights = torch.randn(4, 6 * (1 if history_tokens == "items" else 3), 32)

    def output_and_grads(packed: bool | None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        out, valid = _stream_output(model, inputs, packed)
        (out[valid] * weights[valid]).sum().backward()
        return out[valid].detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    dense, packed = _same_value_and_gradients(output_and_grads(False), output_and_grads(True))
    default, _ = output_and_grads(None)
    assert torch.equal(default, packed)  # 6 of 24 items are real: packed (same process, same path)
    full = torch.tensor([[1, 2, 3, 4, 5, 6]])
    out, valid = _stream_output(model, full, None)
    assert valid.all() and torch.equal(out, _stream_output(model, full, False)[0])  # all real: dense


@pytest.mark.parametrize("cls", [TigerBackbone, DecoderBackbone])
@pytest.mark.parametrize("history_tokens", ["codes", "items"])
def test_step_is_batched_over_prefixes(cls, history_tokens: str) -> None:
    """Scoring N prefixes at once equals scoring them one by one (rows do not leak into each other)."""
    torch.manual_seed(1)
    model = cls(
        _codes(), (4, 4, 5), dim=32, n_layers=1, n_heads=2, inner=64, dropout=0.0, window=4,
        addons=[TrieRec()], history_tokens=history_tokens,
    ).eval()
    for p in model.addons.parameters():
        torch.nn.init.normal_(p, std=0.5)
    with torch.no_grad():
        ctx = model.context(torch.tensor([[3, 5, 7, 9], [0, 2, 4, 6]]))
        prefixes = torch.tensor([[0, 1], [2, 3], [3, 0]])
        together = model.step(ctx, prefixes[None].expand(2, -1, -1))
        alone = torch.cat([model.step(ctx, prefixes[None, i : i + 1].expand(2, -1, -1)) for i in range(3)], 1)
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls", [TigerBackbone, DecoderBackbone])
@pytest.mark.parametrize("trierec", [False, True])
def test_pooled_history_trains_every_target_as_its_own_prefix_would_score(cls, trierec: bool) -> None:
    """With one token per history item, the loss of target ``t`` of a window equals the scoring of the
    window cut after item ``t`` and left-padded back to the window (the causal mask makes the rest invisible),
    except for positions: so the test uses a window whose items all sit at the end (only the last target)
    and one where every target is checked against a model without position signal."""
    torch.manual_seed(2)
    model = cls(_codes(), (4, 4, 5), dim=32, n_layers=2, n_heads=2, inner=64, dropout=0.0, window=5,
                addons=[TrieRec()] if trierec else [], history_tokens="items").eval()
    with torch.no_grad():
        model.pos.weight.zero_()  # positions off: a prefix of the window scores like a right-aligned history
        if trierec:
            for p in model.addons.parameters():
                torch.nn.init.normal_(p, std=0.5)
    inputs = torch.tensor([[3, 5, 7, 9, 11]])
    targets = torch.tensor([[5, 7, 9, 11, 13]])
    with torch.no_grad():
        for t in range(5):
            only = torch.zeros_like(targets)
            only[0, t] = targets[0, t]
            loss = model.loss(inputs, only) * 3
            history = torch.nn.functional.pad(inputs[:, : t + 1], (4 - t, 0))
            ctx = model.context(history)
            path = model.codes[targets[:, t]]
            logp = sum(torch.log_softmax(model.step(ctx, path[:, None, :level])[:, 0], -1)[0, path[0, level]]
                       for level in range(3))
            torch.testing.assert_close(loss, -logp, rtol=1e-5, atol=1e-5)


def test_pooled_history_is_shorter_and_unknown_layout_is_refused() -> None:
    codes = _codes()
    codes_model = DecoderBackbone(codes, (4, 4, 5), dim=16, n_layers=1, n_heads=2, inner=32, dropout=0.0,
                                  window=4)
    items_model = DecoderBackbone(codes, (4, 4, 5), dim=16, n_layers=1, n_heads=2, inner=32, dropout=0.0,
                                  window=4, history_tokens="items")
    history = torch.tensor([[0, 2, 4, 6]])
    assert codes_model.context(history).kv[0][0].shape[1] == 12
    assert items_model.context(history).kv[0][0].shape[1] == 4
    with pytest.raises(ValueError, match="history_tokens must be 'codes' or 'items'"):
        DecoderBackbone(codes, (4, 4, 5), dim=16, n_layers=1, n_heads=2, inner=32, dropout=0.0, window=4,
                        history_tokens="tokens")


def test_sibling_code_masks_by_hand() -> None:
    from recframe.models.generative.backbones import sibling_code_masks

    codes = np.array([[0, 0], [0, 1], [0, 2], [1, 0]])  # items 1..3 = (0, 1), (0, 2), (1, 0)
    level0, level1 = sibling_code_masks(codes, (2, 3))
    assert level0.tolist() == [[False, False], [True, True], [True, True], [True, True]]
    assert level1.tolist() == [[False] * 3, [False, True, True], [False, True, True], [True, False, False]]


def test_trierec_relative_bias_is_the_sum_of_its_four_tables_per_pair() -> None:
    """The joint-table lookup gives, for every token pair, relation + distance + LCA depth + same-item."""
    from recframe.models.generative.trierec import TrieRelativeBias

    torch.manual_seed(5)
    codes = torch.from_numpy(_codes())
    nodes = item_token_nodes(torch.tensor([[0, 3, 5, 9], [1, 2, 3, 4]]), codes,
                             torch.from_numpy(subtree_sizes(codes.numpy())))
    bias = TrieRelativeBias(depth=3, n_heads=2)
    for table in (bias.relation, bias.distance, bias.lca, bias.same_item):
        torch.nn.init.normal_(table.weight)
    lca, dist, rel, same = pair_relations(nodes, nodes)
    expected = (bias.relation.weight[rel] + bias.distance.weight[dist.clamp(0, 6)]
                + bias.lca.weight[lca.clamp(0, 3)] + bias.same_item.weight[same.long()]).permute(0, 3, 1, 2)
    torch.testing.assert_close(bias(nodes, nodes), expected, rtol=1e-6, atol=1e-6)
    bias(nodes, nodes).sum().backward()
    assert int(bias.same_item.weight.grad.sum()) == 2 * 2 * 12 * 12  # every pair counted once per head
