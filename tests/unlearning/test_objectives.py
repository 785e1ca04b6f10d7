"""Each loss on a tiny model: its value by definition, its gradient's sign, and its decrease under a step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recframe.models.generative import SIDDecoder
from recframe.unlearning.methods import clone_model
from recframe.unlearning.objectives import (
    Examples,
    coherence_kl,
    concept_unlikelihood,
    ga_loss,
    npo_loss,
    path_logprob,
    representation_drift,
    retain_code_masks,
    retain_nll,
)
from recframe.unlearning.reassign import exclusive_roots
from tests.generative.fixtures.make_legacy import SIZES, codes

KW = {"max_len": 6, "dim": 16, "n_layers": 1, "n_heads": 2, "inner": 32, "dropout": 0.0}
HIST = torch.tensor([[0, 1, 2, 5, 9, 11], [4, 4, 6, 7, 8, 10], [0, 0, 0, 3, 2, 1]])
TARGET = torch.tensor([12, 20, 7])


def _model(normalize: str = "valid") -> SIDDecoder:
    torch.manual_seed(0)
    model = SIDDecoder(n_items=40, normalize=normalize, **KW)
    model.build_from_codes(codes(), SIZES)
    return model.eval()


def _step(model, loss_fn, lr: float = 0.05) -> tuple[float, float]:
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    before = loss_fn()
    opt.zero_grad()
    before.backward()
    opt.step()
    with torch.no_grad():
        after = loss_fn()
    return float(before.detach()), float(after)


@pytest.mark.parametrize("normalize", ["codebook", "valid"])
def test_path_logprob_is_the_exact_score(normalize: str) -> None:
    model = _model(normalize)
    with torch.no_grad():
        scores = model.score({"history": HIST})
        lp = path_logprob(model, HIST, TARGET)
    torch.testing.assert_close(lp, scores.gather(1, TARGET[:, None])[:, 0], rtol=0, atol=1e-4)


def test_ga_step_lowers_the_forget_log_probability() -> None:
    model = _model()
    before, after = _step(model, lambda: ga_loss(model, HIST, TARGET))
    assert after < before


def test_npo_value_gradient_and_decrease() -> None:
    model, ref = _model(), _model()
    beta = 0.1
    with torch.no_grad():  # at theta = ref the ratio is 1: (2 / beta) log 2
        assert float(npo_loss(model, ref, HIST, TARGET, beta)) == pytest.approx(
            2 / beta * np.log(2), rel=1e-5
        )
    # at theta = ref, NPO's gradient equals GA's (weight 2 r^b / (1 + r^b) = 1)
    g_npo = torch.autograd.grad(npo_loss(model, ref, HIST, TARGET, beta), model.backbone.tok.weight)[0]
    g_ga = torch.autograd.grad(ga_loss(model, HIST, TARGET), model.backbone.tok.weight)[0]
    torch.testing.assert_close(g_npo, g_ga, rtol=1e-4, atol=1e-6)
    before, after = _step(model, lambda: npo_loss(model, ref, HIST, TARGET, beta))
    assert after < before
    with pytest.raises(ValueError, match="beta"):
        npo_loss(model, ref, HIST, TARGET, 0.0)


def test_retain_nll_step_raises_the_retain_probability() -> None:
    model = _model()
    before, after = _step(model, lambda: retain_nll(model, HIST, TARGET))
    assert after < before


def test_concept_unlikelihood_is_minus_log_one_minus_the_concept_mass() -> None:
    model = _model()
    table = codes()
    forget = np.zeros(41, dtype=bool)
    forget[[3, 7, 8]] = True
    roots = exclusive_roots(table, forget)
    reps = [int(next(i for i in np.flatnonzero(forget) if tuple(table[i, : len(r)]) == r)) for r in roots]
    rep_t, depth_t = torch.tensor(reps), torch.tensor([len(r) for r in roots])
    with torch.no_grad():
        mass = model.score({"history": HIST}).exp()[:, forget].sum(1)  # P(F | x) by exact scoring
        value = concept_unlikelihood(model, HIST, rep_t, depth_t)
    assert float(value) == pytest.approx(float(-torch.log1p(-mass).mean()), rel=1e-4)
    before, after = _step(model, lambda: concept_unlikelihood(model, HIST, rep_t, depth_t), lr=0.5)
    assert after < before


def test_coherence_terms_are_zero_at_the_original_and_pull_back() -> None:
    ref = _model()
    model = clone_model(ref)
    forget = np.zeros(41, dtype=bool)
    forget[[3, 7, 8]] = True
    masks = retain_code_masks(codes(), SIZES, forget)
    items = torch.arange(1, 41)[~torch.from_numpy(forget[1:])]
    with torch.no_grad():
        assert float(coherence_kl(model, ref, HIST, TARGET, masks)) == pytest.approx(0.0, abs=1e-6)
        assert float(representation_drift(model, ref, items)) == pytest.approx(0.0, abs=1e-12)
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    before, after = _step(model, lambda: coherence_kl(model, ref, HIST, TARGET, masks), lr=0.5)
    assert before > 0 and after < before
    before, after = _step(model, lambda: representation_drift(model, ref, items), lr=0.5)
    assert before > 0 and after < before


def test_examples_are_every_training_position() -> None:
    from recframe.data.interactions import Histories

    hist = Histories(
        indptr=np.array([0, 0, 3, 5]),
        items=np.array([4, 5, 6, 7, 8]),
        labels=np.ones(5, dtype=np.int8),
        timestamps=np.arange(5.0),
    )
    ex = Examples.from_histories(hist, max_len=2)
    assert ex.target.tolist() == [5, 6, 8]
    assert ex.history.tolist() == [[0, 4], [4, 5], [0, 7]]
    f, r = ex.split(np.isin(np.arange(9), [6]))
    assert f.target.tolist() == [6] and r.target.tolist() == [5, 8]
