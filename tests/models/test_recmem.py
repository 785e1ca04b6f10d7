"""RecMem: gate arithmetic, rollout equivalence, constant state, contraction, serving, planted long range."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from recframe.data.datamodule import RecDataModule
from recframe.data.synthetic_long import make_long_history
from recframe.models.recmem import (
    MemoryWriter,
    RecMem,
    RecMemStream,
    gate_bias_start,
    gated_update,
    rollout_sensitivity,
    segment_layout,
    to_segments,
)

SMALL = {"hidden": 16, "n_heads": 2, "inner": 32, "n_layers": 1, "dropout": 0.0, "attn_dropout": 0.0}


def _model(**kw) -> RecMem:
    torch.manual_seed(0)
    args = {"n_items": 40, "max_len": 64, "segment_len": 4, "n_slots": 3, **SMALL, **kw}
    return RecMem(**args).eval()


def _left_padded(lengths: list[int], width: int, n_items: int = 40, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    out = torch.zeros(len(lengths), width, dtype=torch.long)
    for r, n in enumerate(lengths):
        if n:
            out[r, -n:] = torch.randint(1, n_items + 1, (n,), generator=gen)
    return out


def test_gated_update_hand_example() -> None:
    old = torch.tensor([1.0, 2.0, -4.0])
    write = torch.tensor([3.0, -1.0, 0.0])
    gate = torch.tensor([0.25, 0.9, 0.5])
    # 0.25 * 1 + 0.75 * 3 = 2.5 ; 0.9 * 2 + 0.1 * (-1) = 1.7 ; 0.5 * (-4) + 0.5 * 0 = -2
    torch.testing.assert_close(gated_update(old, write, gate), torch.tensor([2.5, 1.7, -2.0]))


def test_fold_uses_the_gate_it_computes() -> None:
    """Zero gate weights and bias log(3): g = g_max * sigmoid(log 3) = 0.8 * 0.75 = 0.6 everywhere."""
    torch.manual_seed(0)
    writer = MemoryWriter(8, 2, 2, 16, 0.0, 0.0, gate_max=0.8, state_queries=False).eval()
    with torch.no_grad():
        writer.gate.weight.zero_()
        writer.gate.bias.fill_(math.log(3.0))
    memory = torch.randn(2, 2, 8)
    tokens = torch.randn(2, 5, 8)
    valid = torch.tensor([[True] * 5, [False] * 5])  # row 1: an empty segment
    gate, write = writer.gate_and_write(memory, writer.encode(tokens, valid), valid)
    torch.testing.assert_close(gate, torch.full_like(gate, 0.6))
    new = writer(memory, tokens, valid)
    torch.testing.assert_close(new[0], 0.6 * memory[0] + 0.4 * write[0])
    torch.testing.assert_close(new[1], memory[1])  # an empty segment leaves the memory unchanged


def test_chrono_gates_start_with_retention_times_spread_over_the_range() -> None:
    """b = log u, u ~ U(1, T - 1): sigmoid(b) = u / (1 + u), so 1 / (1 - sigmoid(b)) = 1 + u in [2, T]."""
    torch.manual_seed(0)
    bias = gate_bias_start(20_000, "chrono", max_folds=32)
    retention = 1.0 / (1.0 - torch.sigmoid(bias))
    assert 2.0 <= float(retention.min()) and float(retention.max()) <= 32.0
    assert abs(float(retention.mean()) - 17.0) < 0.2  # the mean of 1 + U(1, 31)
    torch.testing.assert_close(gate_bias_start(3, "constant", 4.0), torch.full((3,), 4.0))
    model = _model(gate_init="chrono", chrono_max_folds=8)
    u = model.writer.gate.bias.detach().exp()
    assert float(u.min()) >= 1.0 and float(u.max()) <= 7.0
    with pytest.raises(ValueError, match="gate_init"):
        _model(gate_init="uniform")


def test_segment_layout_aligns_segments_at_the_first_item() -> None:
    items = torch.tensor([[0, 0, 5, 6, 7], [1, 2, 3, 4, 8]])
    src, valid = segment_layout(items, 2)
    segs = to_segments(items, src, valid, 2)
    # row 0: 3 items -> segments [5, 6], [7, _]; row 1: 5 items -> [1, 2], [3, 4], [8, _]
    assert segs.tolist() == [[[0, 0], [5, 6], [7, 0]], [[1, 2], [3, 4], [8, 0]]]


def test_rollout_segment_by_segment_equals_batched_rollout() -> None:
    model = _model()
    lengths = [13, 4, 0, 40, 1, 8]
    batch = _left_padded(lengths, 48)
    q = model.query_embedding({"history": batch})
    for r, n in enumerate(lengths):
        items = batch[r, batch.shape[1] - n:]
        # by hand: fold complete segments one at a time, decode the last (partial) one
        mem = model.initial_memory(1)
        k = max(math.ceil(n / 4), 1)
        for t in range(k - 1):
            mem = model.fold(mem, items[None, 4 * t:4 * t + 4])
        last = torch.zeros(1, 4, dtype=torch.long)
        tail = items[4 * (k - 1):]
        last[0, :len(tail)] = tail
        hand = model.decode(mem, last)[0, max(len(tail) - 1, 0)]
        torch.testing.assert_close(q[r], hand, rtol=1e-5, atol=1e-5)
        stream = RecMemStream(model, 1)
        for x in items:
            stream.push(x.view(1))
        if n:
            torch.testing.assert_close(stream.query()[0], q[r], rtol=1e-5, atol=1e-5)
        alone = model.query_embedding({"history": batch[r:r + 1]})[0]
        torch.testing.assert_close(alone, q[r], rtol=1e-5, atol=1e-5)


def test_training_loss_reads_the_same_rollout_as_scoring() -> None:
    """The loss at the last position equals the cross-entropy of the scoring path's query."""
    model = _model()
    hist = _left_padded([11], 16)
    inp, tgt = hist[:, :-1], torch.zeros(1, 15, dtype=torch.long)
    tgt[0, -1] = 7  # only the last position is counted
    loss = model.loss({"input": inp, "target": tgt})
    q = model.query_embedding({"history": inp})
    logits = q @ model.item_embeddings().T
    logits[:, 0] = -math.inf
    torch.testing.assert_close(loss, torch.nn.functional.cross_entropy(logits, torch.tensor([7])))


def test_truncated_backprop_cuts_the_gradient_to_the_initial_memory() -> None:
    inp = _left_padded([12], 12)
    tgt = torch.zeros_like(inp)
    tgt[0, -1] = 3  # a target in the third segment only
    for bptt, reaches in ((1, False), (None, True)):
        model = _model(bptt_segments=bptt).train()
        model.loss({"input": inp, "target": tgt}).backward()
        assert bool(model.mem_init.grad.abs().sum() > 0) is reaches


def test_state_and_decoder_cost_do_not_depend_on_history_length() -> None:
    model = _model()
    sizes = []
    for n in (10, 400):
        stream = RecMemStream(model, 2)
        for x in torch.randint(1, 41, (n,)):
            stream.push(x.repeat(2))
        sizes.append((tuple(stream.memory.shape), tuple(stream.segment.shape)))
    assert sizes[0] == sizes[1] == ((2, 3, 16), (2, 4))
    assert model.decoder_tokens() == 3 + 4


def test_contraction_bound_with_state_free_writes() -> None:
    """With ``state_queries=False`` the fold is a contraction with rho = g_max: error <= g_max^t."""
    model = _model(state_queries=False, gate_max=0.9)
    segs = to_segments(*(lambda b: (b, *segment_layout(b, 4)))(_left_padded([80] * 3, 80)), 4)
    ratios = rollout_sensitivity(model, segs, eps=1e-3)
    bound = 0.9 ** torch.arange(len(ratios), dtype=torch.float32)
    assert bool((ratios <= bound + 1e-4).all())
    assert float(ratios[-1]) < 0.9 ** 19


def test_state_cache_is_exact_and_hit(tmp_path: Path) -> None:
    model = _model()
    batch = _left_padded([13, 9, 30], 32)
    with torch.no_grad():
        plain = model.query_embedding({"history": batch})
        model.enable_state_cache(8)
        first = model.query_embedding({"history": batch})
        assert len(model._state_cache) == 3
        grown = batch.clone()  # one more item, no new complete segment for row 0 (13 -> 14 items)
        grown[0, :-1] = batch[0, 1:]
        grown[0, -1] = 5
        model.query_embedding({"history": grown})
        assert len(model._state_cache) == 3  # row 0 reused its cached state
    torch.testing.assert_close(first, plain)


def test_bad_settings_name_the_key() -> None:
    with pytest.raises(ValueError, match="gate_max"):
        _model(gate_max=1.0)
    with pytest.raises(ValueError, match="segment_len"):
        _model(segment_len=0)
    with pytest.raises(ValueError, match="bptt_segments"):
        _model(bptt_segments=0)


def test_long_history_generator_plants_the_theme() -> None:
    data = make_long_history(n_users=6, n_clusters=4, items_per_cluster=120, min_events=300, max_events=320,
                             early_events=60, late_rate=0.0, seed=3)
    hist = data.interactions.histories
    for u in range(1, 7):
        items = hist.of(u)
        assert 300 <= len(items) <= 320 and len(set(items.tolist())) == len(items)  # no repeats
        theme = data.item_cluster[items] == data.user_theme[u]
        assert theme[-2:].all() and not theme[60:-2].any() and theme[:60].mean() > 0.3
    dm = RecDataModule(dataset="synthetic-long", synthetic={"n_users": 6, "n_clusters": 4,
                                                            "items_per_cluster": 120, "min_events": 300,
                                                            "max_events": 320, "early_events": 60, "seed": 3})
    assert dm.n_users == 6 and dm.split.test.histories.lengths()[1:].tolist() == [1] * 6


def _smoke_yaml(tmp: Path) -> Path:
    cfg = tmp / "recmem.yaml"
    cfg.write_text(f"""
seed_everything: 0
model:
  class_path: recframe.models.recmem.RecMem
  init_args: {{segment_len: 8, n_slots: 4, hidden: 32, n_layers: 1, n_heads: 2, inner: 64, lr: 0.005}}
data:
  dataset: synthetic
  synthetic: {{n_users: 80, n_items: 60, n_clusters: 4, mean_length: 30, seed: 0}}
  split: loo
  max_len: 64
  batch_size: 64
trainer:
  max_epochs: 1
  enable_model_summary: false
  enable_progress_bar: false
  logger:
    class_path: lightning.pytorch.loggers.CSVLogger
    init_args: {{save_dir: {tmp / 'runs'}, name: recmem}}
""")
    return cfg


def test_serving_restores_and_ranks_like_the_model(tmp_path: Path) -> None:
    from recframe import Recommender
    from recframe.cli import run_cli

    cli = run_cli(["--config", str(_smoke_yaml(tmp_path))], run=False)
    cli.trainer.fit(cli.model, cli.datamodule)
    ckpt = next((tmp_path / "runs" / "recmem").glob("version_*/checkpoints/last.ckpt"))
    rec = Recommender.from_checkpoint(ckpt, index=None)
    assert isinstance(rec.model, RecMem)
    es = cli.datamodule.eval_set("test")
    users = es.users[:8]
    seen = [es.known.of(u) for u in users]
    batch = es.batch(list(range(8)), max_len=cli.datamodule.max_len)
    with torch.inference_mode():
        scores = rec.model.score(batch).float()
    scores = scores.clone()  # a normal tensor, writable outside inference mode
    scores[:, 0] = -torch.inf
    for r, items in enumerate(seen):
        scores[r, torch.from_numpy(items)] = -torch.inf
    expected = torch.topk(scores, 5, dim=1).indices.numpy()
    histories = [[rec.item_ids[i] for i in h] for h in seen]
    out = rec.recommend(histories=histories, k=5)
    rec.model.enable_state_cache(100)
    cached = rec.recommend(histories=histories, k=5)
    for r in range(8):
        assert out.items[r] == [rec.item_ids[i] for i in expected[r]] == cached.items[r]


def _oracle_hits(data, window: int | None, position: int, k: int = 10) -> float:
    """Share of users whose held-out item at ``-position`` (2 = validation, 1 = test) the oracle ranks in
    the top ``k`` (seen items masked, ties broken by a fixed random jitter)."""
    import numpy as np

    from recframe.data.synthetic_long import key_recall_oracle

    hist = data.interactions.histories
    hits = []
    for u in range(1, data.interactions.n_users + 1):
        items = hist.of(u)
        seen, target = items[:-position], items[-position]
        scores = key_recall_oracle(data, seen, window) + 1e-3 * np.random.default_rng(u).random(len(
            data.item_kind))
        scores[seen], scores[0] = -1.0, -1.0
        hits.append(int((scores > scores[target]).sum()) < k)
    return float(np.mean(hits))


def test_key_recall_plants_a_dependence_beyond_the_window() -> None:
    """The held-out items' key cluster is readable from the whole history and not from the last 48 items:
    an oracle reading everything ranks them in the top 10 far above chance, one reading the window at
    chance."""
    import numpy as np

    from recframe.data.synthetic_long import ROLE_CUE, ROLE_FIRST, ROLE_SECOND, make_key_recall

    data = make_key_recall(n_users=120, seed=5)
    hist = data.interactions.histories
    for u in (1, 57, 120):
        items = hist.of(u)
        assert len(set(items.tolist())) == len(items)  # no repeats
        roles = data.row_role[hist.indptr[u]:hist.indptr[u + 1]]
        assert roles[-3:].tolist() == [ROLE_CUE, ROLE_FIRST, ROLE_SECOND]
        assert (roles == ROLE_FIRST).sum() == 6 + 4  # the introduction's pairs and the recall triples
        assert (data.item_key[items[roles == ROLE_FIRST]] == data.user_keys[u, 0]).all()
        assert (data.item_key[items[roles == ROLE_SECOND]] == data.user_keys[u, 1]).all()
        # nothing of either key in the 48 items before the final cue: the window cannot see the keys
        assert (data.item_key[items[-51:-3]] == -1).all()
    # 24 items a key, at most 10 of each key seen by the end: 14+ unseen items of the right key
    chance = 10 / ((data.item_kind == 2).sum() - 20)
    for position in (2, 1):  # validation, test
        whole, window = _oracle_hits(data, None, position), _oracle_hits(data, 48, position)
        assert whole > 0.5 and whole > 8 * window, (whole, window)
        assert window < 3 * chance, (window, chance)
        # a window long enough to hold the previous triple reads the same keys
        assert _oracle_hits(data, 200, position) == whole
    np.testing.assert_array_equal(make_key_recall(n_users=5, seed=1).interactions.histories.items,
                                  make_key_recall(n_users=5, seed=1).interactions.histories.items)
    with pytest.raises(ValueError, match="n_recalls"):
        make_key_recall(items_per_key=10, n_recalls=4)
