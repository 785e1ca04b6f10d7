"""Scalable next-item losses: SASRec on the shared loss is unchanged, chunked CE equals full CE,
sampled softmax with logQ correction estimates the full softmax gradient."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from recframe.models import BERT4Rec, GRU4Rec, SASRec
from recframe.models.losses import NextItemLoss, ce_chunked, next_item_loss, sampled_logq
from recframe.models.recmem import RecMem


def _batch(n_items: int, seed: int = 0, batch: int = 4, length: int = 6) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    seq = torch.randint(1, n_items + 1, (batch, length + 1), generator=g)
    seq[0, :3] = 0  # left padding: padded targets are dropped
    return {"input": seq[:, :-1], "target": seq[:, 1:].masked_fill(seq[:, :-1] == 0, 0)}


def _legacy_sasrec_loss(model: SASRec, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """SASRec's own loss before it moved onto ``next_item_loss`` (verbatim), the reference."""
    h = model.encode(batch["input"])
    target = batch["target"]
    keep = target > 0
    h, target = h[keep], target[keep]
    if model.loss_type == "ce":
        logits = h @ model.item_emb.weight.T
        logits[:, 0] = float("-inf")
        return F.cross_entropy(logits, target)
    neg = torch.randint(1, model.n_items + 1, (model.n_negatives,), device=h.device)
    pos_logit = (h * model.item_emb(target)).sum(-1, keepdim=True)
    neg_logit = h @ model.item_emb(neg).T
    neg_logit = neg_logit.masked_fill(neg[None, :] == target[:, None], float("-inf"))
    logits = torch.cat([pos_logit, neg_logit], dim=1)
    return F.cross_entropy(logits, torch.zeros(len(target), dtype=torch.long, device=h.device))


def _loss_and_grads(model: SASRec, fn, batch, seed: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad()
    torch.manual_seed(seed)  # same dropout masks and negatives for both
    loss = fn(model, batch)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("loss_type", ["ce", "sampled"])
def test_sasrec_on_the_shared_loss_is_bit_identical_to_its_own(loss_type: str) -> None:
    torch.manual_seed(0)
    model = SASRec(n_items=40, max_len=6, hidden=16, n_layers=2, n_heads=2, inner=32, loss_type=loss_type,
                   n_negatives=16).train()
    batch = _batch(40)
    old, old_g = _loss_and_grads(model, _legacy_sasrec_loss, batch, seed=3)
    new, new_g = _loss_and_grads(model, lambda m, b: m.loss(b), batch, seed=3)
    assert torch.equal(old, new)
    assert all(torch.equal(a, b) for a, b in zip(old_g, new_g))
    # no new checkpoint state for the existing loss types
    assert not any(k.startswith("next_item") for k in model.state_dict())


@pytest.mark.parametrize("dtype, n_items, chunk", [(torch.float64, 37, 8), (torch.float64, 37, 1),
                                                    (torch.float64, 37, 100), (torch.float32, 500, 64)])
def test_chunked_ce_equals_full_ce_in_value_and_gradients(dtype, n_items: int, chunk: int) -> None:
    g = torch.Generator().manual_seed(1)
    h = (torch.randn(23, 8, generator=g, dtype=dtype) * 2).requires_grad_()
    w = torch.randn(n_items + 1, 8, generator=g, dtype=dtype).requires_grad_()
    target = torch.randint(1, n_items + 1, (23,), generator=g)
    target[:5] = target[5]  # repeated targets: index_add must accumulate
    full = next_item_loss(h, target, w, "ce")
    gh_full, gw_full = torch.autograd.grad(full, (h, w))
    chunked = ce_chunked(h, target, w, chunk_size=chunk)
    gh, gw = torch.autograd.grad(chunked, (h, w))
    torch.testing.assert_close(chunked, full)
    torch.testing.assert_close(gh, gh_full)
    torch.testing.assert_close(gw, gw_full)
    assert not gw[0].any()  # padding row is not a class


def test_chunked_ce_gradcheck_and_upstream_gradient() -> None:
    g = torch.Generator().manual_seed(2)
    h = torch.randn(5, 3, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(12, 3, generator=g, dtype=torch.float64, requires_grad=True)
    target = torch.randint(1, 12, (5,), generator=g)
    assert torch.autograd.gradcheck(lambda a, b: ce_chunked(a, target, b, chunk_size=4), (h, w))
    # a scaled upstream gradient scales both input gradients
    (2.5 * ce_chunked(h, target, w, 4)).backward()
    gh = h.grad.clone()
    h.grad = None
    (2.5 * next_item_loss(h, target, w, "ce")).backward()
    torch.testing.assert_close(gh, h.grad)


SEQUENTIAL = {
    "SASRec": lambda **kw: SASRec(n_items=60, max_len=6, hidden=16, n_layers=1, n_heads=2, inner=32, **kw),
    "GRU4Rec": lambda **kw: GRU4Rec(n_items=60, max_len=6, dim=16, hidden=16, **kw),
    "BERT4Rec": lambda **kw: BERT4Rec(n_items=60, max_len=6, hidden=16, n_layers=1, n_heads=2, inner=32,
                                      **kw),
    "RecMem": lambda **kw: RecMem(n_items=60, max_len=6, segment_len=2, n_slots=2, hidden=16, n_layers=1,
                                  n_heads=2, inner=32, **kw),
}
"""Every sequential model on the shared next-item loss, small enough for exact gradient comparisons."""


@pytest.mark.parametrize("name", list(SEQUENTIAL))
def test_chunked_equals_ce_end_to_end(name: str) -> None:
    build = SEQUENTIAL[name]
    torch.manual_seed(0)
    ce = build(loss_type="ce")
    torch.manual_seed(0)
    chunked = build(loss_type="chunked", chunk_size=7)
    assert ce.state_dict().keys() == chunked.state_dict().keys()  # a ce checkpoint loads into chunked
    batch = _batch(60, seed=5)
    a, ga = _loss_and_grads(ce, lambda m, b: m.loss(b), batch, seed=1)
    b, gb = _loss_and_grads(chunked, lambda m, b: m.loss(b), batch, seed=1)
    torch.testing.assert_close(a, b)
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y)


def _full_grad(scores: torch.Tensor, target: int) -> torch.Tensor:
    """d/ds of the full softmax cross-entropy over items 1..V (column 0 is padding)."""
    p = torch.softmax(scores[1:], 0)
    grad = torch.zeros_like(scores)
    grad[1:] = p
    grad[target] -= 1
    return grad


def _mean_sampled_grad(scores: torch.Tensor, target: int, trials: int, *, counts=None, sampler="uniform",
                       in_batch=False, n_negatives=32, others=0, legacy=False, seed=0) -> torch.Tensor:
    """Mean over draws of d/ds of row 0's sampled loss; with W = I, d/dh is d/ds."""
    n_classes = scores.shape[0]
    eye = torch.eye(n_classes, dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    total = torch.zeros_like(scores)
    q = None if counts is None else torch.as_tensor(counts[1:], dtype=torch.float64) + 1
    for _ in range(trials):
        # rows 1..others: in-batch rows whose targets are draws from the item-frequency proposal
        target_t = torch.tensor([target])
        if others:
            other_t = torch.multinomial(q / q.sum(), others, replacement=True, generator=g) + 1
            target_t = torch.cat([target_t, other_t])
        h = torch.zeros(len(target_t), n_classes, dtype=torch.float64)
        h[0] = scores
        h.requires_grad_()
        if legacy:
            torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=g)))
            loss = next_item_loss(h, target_t, eye, "sampled", n_negatives)
        else:
            loss = sampled_logq(h, target_t, eye, n_negatives, item_counts=None if counts is None else
                                torch.as_tensor(counts), sampler=sampler, in_batch=in_batch, generator=g)
        (grad,) = torch.autograd.grad(loss * len(target_t), h)
        total += grad[0]
    return total / trials


def test_sampled_logq_uniform_gradient_matches_full_softmax_in_expectation() -> None:
    scores = torch.tensor([0.0, 2.0, 1.0, 0.5, -1.0, 0.0, 3.0, -0.5, 1.5], dtype=torch.float64)
    full = _full_grad(scores, target=2)
    # a ratio estimator: bias ~ c / draws (measured: 0.20, 0.05, 0.013, 0.003 at 4, 16, 64, 256 draws;
    # the Monte Carlo error of 3000 trials is ~0.001)
    err = {m: (_mean_sampled_grad(scores, 2, trials=3000, n_negatives=m, seed=m) - full).abs().max()
           for m in (16, 256)}
    assert err[256] < 0.006, err
    assert 8 < err[16] / err[256] < 32, err  # shrinks like 1 / draws
    # the uncorrected sampled softmax weighs 64 draws of 8 items as 64 items: off by 0.06 where the
    # corrected one is off by 0.013 at the same 64 draws
    legacy = _mean_sampled_grad(scores, 2, trials=300, n_negatives=64, legacy=True)
    assert (legacy - full).abs().max() > 0.04


def test_sampled_logq_in_batch_and_popularity_negatives_match_full_softmax_in_expectation() -> None:
    scores = torch.tensor([0.0, 1.0, -1.0, 0.5, 2.0, 0.0, -0.5], dtype=torch.float64)
    counts = np.array([0, 40, 5, 1, 20, 3, 10])  # skewed popularity (add-one smoothed inside)
    full = _full_grad(scores, target=3)
    for sampler in ("uniform", "popularity"):
        est = _mean_sampled_grad(scores, 3, trials=2000, counts=counts, sampler=sampler, in_batch=True,
                                 n_negatives=24, others=39)
        assert (est - full).abs().max() < 0.015, (sampler, est, full)  # 63 draws: bias ~0.01


def test_sampled_logq_masks_hits_and_checks_its_inputs() -> None:
    h = torch.randn(3, 4)
    w = torch.randn(3, 4)  # two items: every negative is often a hit
    target = torch.tensor([1, 1, 2])
    loss = sampled_logq(h, target, w, 16, item_counts=torch.tensor([0, 3, 1]))
    assert torch.isfinite(loss)
    with pytest.raises(ValueError, match="item_counts"):
        sampled_logq(h, target, w, 16)
    with pytest.raises(ValueError, match="sampler"):
        sampled_logq(h, target, w, 16, item_counts=torch.ones(3), sampler="zipf")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no negatives"):
        sampled_logq(h, target, w, 0, in_batch=False)


@pytest.mark.parametrize("name", list(SEQUENTIAL))
def test_sampled_logq_needs_and_keeps_item_counts(name: str) -> None:
    torch.manual_seed(0)
    model = SEQUENTIAL[name](loss_type="sampled_logq", n_negatives=8, sampler="popularity")
    batch = _batch(60)
    with pytest.raises(ValueError, match="item counts"):
        model.loss(batch)
    counts = np.arange(61)
    model.next_item.bind_counts(counts)
    loss = model.loss(batch)
    assert torch.isfinite(loss)
    loss.backward()  # the sampled loss trains the item table
    assert float(model.item_emb.weight.grad.abs().sum()) > 0
    assert torch.equal(model.state_dict()["next_item.item_counts"], torch.arange(61))
    with pytest.raises(ValueError, match="60 items"):
        model.next_item.bind_counts(np.arange(5))


@pytest.mark.parametrize("kwargs, match", [
    (dict(loss_type="full"), "loss_type"), (dict(chunk_size=0), "chunk_size"),
    (dict(sampler="zipf"), "sampler"), (dict(n_negatives=0), "n_negatives")])
def test_bad_loss_settings_name_the_argument(kwargs, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        NextItemLoss(10, **kwargs)
