"""Known answers of the baselines' pieces: reservoir buffer, EWC penalty and Fisher, LwF loss."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

from recframe.continual.baselines import ReservoirBuffer, diagonal_fisher, distillation_loss, ewc_penalty


def test_reservoir_fills_then_keeps_capacity() -> None:
    buf = ReservoirBuffer(3, seed=0)
    buf.add(np.array([10, 11]))
    assert buf.items.tolist() == [10, 11] and buf.seen == 2
    buf.add(np.arange(20, 40))
    assert len(buf) == 3 and buf.seen == 22
    assert set(buf.items) <= {10, 11, *range(20, 40)}
    with pytest.raises(ValueError, match="capacity"):
        ReservoirBuffer(0)


def test_reservoir_inclusion_is_uniform() -> None:
    """Algorithm R keeps every one of n offered items with probability k / n (here 4 / 10)."""
    counts = np.zeros(10)
    trials = 4000
    for seed in range(trials):
        buf = ReservoirBuffer(4, seed=seed)
        for v in range(10):  # one at a time, as a stream
            buf.add(np.array([v]))
        counts[buf.items] += 1
    freq = counts / trials
    # binomial sd at p = 0.4, 4000 trials: 0.0077; 4.5 sd
    assert np.abs(freq - 0.4).max() < 0.035, freq


def test_ewc_penalty_by_hand() -> None:
    params = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor([0.5])}
    anchors = {"w": torch.tensor([0.0, 1.0]), "b": torch.tensor([1.5])}
    fisher = {"w": torch.tensor([2.0, 3.0]), "b": torch.tensor([4.0])}
    # (lam / 2) * (2 * 1 + 3 * 1 + 4 * 1) = 0.5 * 10 * 9
    assert ewc_penalty(params, anchors, fisher, lam=10.0).item() == pytest.approx(45.0)


def test_diagonal_fisher_of_a_linear_model() -> None:
    """Loss (w x - y)^2 on two batches: gradient 2 (w x - y) x, Fisher = mean of its squares."""
    model = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(2.0)
    batches = [{"x": torch.tensor([[1.0]]), "y": torch.tensor([[0.0]])},
               {"x": torch.tensor([[3.0]]), "y": torch.tensor([[3.0]])}]
    fisher = diagonal_fisher(model, iter(batches), lambda b: ((model(b["x"]) - b["y"]) ** 2).sum())
    # grads: 2 * 2 * 1 = 4 and 2 * (6 - 3) * 3 = 18 -> (16 + 324) / 2
    assert fisher["weight"].item() == pytest.approx(170.0)


def test_distillation_loss_known_values() -> None:
    logits = torch.tensor([[1.0, 0.0]])
    assert distillation_loss(logits, logits, 2.0).item() == pytest.approx(0.0, abs=1e-7)
    old, new = torch.tensor([[0.0, 0.0]]), torch.tensor([[math.log(3.0), 0.0]])
    # tau = 1: KL([.5, .5] || [.75, .25]) = .5 ln(.5/.75) + .5 ln(.5/.25)
    want = 0.5 * math.log(0.5 / 0.75) + 0.5 * math.log(2.0)
    assert distillation_loss(new, old, 1.0).item() == pytest.approx(want, rel=1e-6)
