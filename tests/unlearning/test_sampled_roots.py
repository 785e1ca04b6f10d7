"""The sampled-root estimate of TRACER's concept unlikelihood against the exact one, on a small case.

The estimate draws ``m`` of the ``R`` exclusive roots and scales their mass by ``R / m``: its expectation is
the exact concept mass (checked over every subset, and statistically over seeded draws of the function
itself), and the loss built on it is the exact loss plus a non-negative Jensen excess that a second-order
Taylor bound caps. ``m >= R`` is the exact loss, and TRACER's root draws do not move its example draws.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from recframe.data.interactions import DataError
from recframe.models.generative import SIDDecoder
from recframe.unlearning.methods import FinetuneSettings
from recframe.unlearning.objectives import (
    SAMPLED_MARGIN,
    Examples,
    concept_log_mass,
    concept_unlikelihood,
    sampled_concept_log_mass,
)
from recframe.unlearning.reassign import exclusive_roots
from recframe.unlearning.settings import parse_methods
from recframe.unlearning.tracer import TracerSettings, run_tracer
from tests.generative.fixtures.make_legacy import SIZES, codes

KW = {"max_len": 6, "dim": 16, "n_layers": 1, "n_heads": 2, "inner": 32, "dropout": 0.0}
HIST = torch.tensor([[0, 1, 2, 5, 9, 11], [4, 4, 6, 7, 8, 10], [0, 0, 0, 3, 2, 1]])
FORGET_ITEMS = [3, 7, 8, 12, 17, 21, 26, 33]
M = 3  # roots per draw
DRAWS = 600


def _model() -> SIDDecoder:
    torch.manual_seed(0)
    model = SIDDecoder(n_items=40, normalize="valid", **KW)
    model.build_from_codes(codes(), SIZES)
    return model.eval()


def _forget() -> np.ndarray:
    forget = np.zeros(41, dtype=bool)
    forget[FORGET_ITEMS] = True
    return forget


def _roots() -> tuple[torch.Tensor, torch.Tensor]:
    table, forget = codes(), _forget()
    roots = exclusive_roots(table, forget)
    reps = [int(next(i for i in np.flatnonzero(forget) if tuple(table[i, : len(r)]) == r)) for r in roots]
    return torch.tensor(reps), torch.tensor([len(r) for r in roots])


def _loss(mass: np.ndarray) -> np.ndarray:
    """The sampled loss as a function of the estimated mass (exact formula, tangent above the margin)."""
    knot = 1.0 - SAMPLED_MARGIN
    return np.where(mass <= knot, -np.log1p(-np.minimum(mass, knot)),
                    -np.log(SAMPLED_MARGIN) + (mass - knot) / SAMPLED_MARGIN)


@pytest.fixture(scope="module")
def case() -> dict:
    torch.set_num_threads(1)
    model = _model()
    roots, depths = _roots()
    with torch.no_grad():
        exact = concept_log_mass(model, HIST, roots, depths).exp().double()
        # every subset of M roots, equally likely under uniform sampling without replacement
        subsets = [list(s) for s in itertools.combinations(range(len(roots)), M)]
        scale = len(roots) / M
        estimates = torch.stack([
            concept_log_mass(model, HIST, roots[s], depths[s]).exp().double() * scale for s in subsets
        ])  # [n_subsets, B]
    return {"model": model, "roots": roots, "depths": depths, "exact": exact, "subsets": estimates}


def test_the_small_case_has_several_roots_and_a_real_concept_mass(case: dict) -> None:
    assert len(case["roots"]) >= 6 > M
    assert bool((case["exact"] > 0.05).all()) and bool((case["exact"] < 0.9).all())
    with torch.no_grad():  # the exact mass is the exact scores' mass on the forget items
        mass = case["model"].score({"history": HIST}).exp()[:, torch.from_numpy(_forget())].sum(1).double()
    torch.testing.assert_close(case["exact"], mass, rtol=1e-4, atol=0)


def test_the_estimate_averaged_over_every_subset_is_the_exact_mass(case: dict) -> None:
    torch.testing.assert_close(case["subsets"].mean(0), case["exact"], rtol=1e-5, atol=0)


def test_seeded_draws_of_the_estimate_average_to_the_exact_mass(case: dict) -> None:
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        draws = torch.stack([
            sampled_concept_log_mass(case["model"], HIST, case["roots"], case["depths"], M, generator)
            .exp().double() for _ in range(DRAWS)
        ])
    std_error = case["subsets"].std(0, unbiased=False) / DRAWS**0.5
    assert bool((std_error > 0).all())  # the subsets do differ: the check has power
    gap = (draws.mean(0) - case["exact"]).abs()
    assert bool((gap < 4 * std_error).all()), (gap, std_error)


def test_the_sampled_loss_is_the_exact_loss_plus_a_bounded_jensen_excess(case: dict) -> None:
    exact, est = case["exact"].numpy(), case["subsets"].numpy()
    exact_loss, mean_loss = -np.log1p(-exact), _loss(est).mean(0)
    worst = np.minimum(np.maximum(est, exact[None]), 1.0 - SAMPLED_MARGIN)
    bound = ((est - exact[None]) ** 2 / (2 * (1 - worst) ** 2)).mean(0)
    assert np.all(mean_loss >= exact_loss - 1e-9)
    assert np.all(mean_loss - exact_loss <= bound + 1e-9), (mean_loss - exact_loss, bound)
    # the function's own loss, per history, over seeded draws: within 4 standard errors of that expectation
    generator = torch.Generator().manual_seed(1)
    for row in range(len(HIST)):
        with torch.no_grad():
            values = np.array([
                float(concept_unlikelihood(case["model"], HIST[row : row + 1], case["roots"], case["depths"],
                                           sample=M, generator=generator))
                for _ in range(150)
            ])
        std_error = _loss(est[:, row]).std() / np.sqrt(len(values))
        assert abs(values.mean() - mean_loss[row]) < 4 * std_error + 1e-12


def test_the_tangent_keeps_a_gradient_above_the_margin() -> None:
    log_mass = torch.log(torch.tensor([0.5, 1.2, 3.0], requires_grad=True))
    from recframe.unlearning.objectives import _log_one_minus_tangent

    value = _log_one_minus_tangent(log_mass, SAMPLED_MARGIN)
    assert bool(torch.isfinite(value).all())
    mass = log_mass.detach().exp()
    grad = torch.autograd.grad(value.sum(), log_mass)[0] / mass  # d loss / d mass
    torch.testing.assert_close(grad, torch.tensor([2.0, 1 / SAMPLED_MARGIN, 1 / SAMPLED_MARGIN]))


@pytest.mark.parametrize("sample", [0, 8, 50])
def test_every_root_or_more_is_the_exact_loss(case: dict, sample: int) -> None:
    assert len(case["roots"]) <= 8
    with torch.no_grad():
        exact = concept_unlikelihood(case["model"], HIST, case["roots"], case["depths"])
        other = concept_unlikelihood(case["model"], HIST, case["roots"], case["depths"], sample=sample)
    assert float(other) == float(exact)


def _examples() -> tuple[Examples, Examples]:
    rng = np.random.default_rng(0)
    hist = rng.integers(0, 41, size=(64, 6))
    target = rng.integers(1, 41, size=64)
    return Examples(hist, target).split(_forget())


def test_tracer_with_sampled_roots_lowers_the_exact_concept_mass_and_keeps_the_example_stream() -> None:
    torch.set_num_threads(1)
    model = _model()
    roots, depths = _roots()
    f_ex, r_ex = _examples()
    loop = FinetuneSettings(steps=15, batch_size=8, lr=5e-3)
    ablation = TracerSettings(reassign=False, root_sample=M)
    sampled, info = run_tracer(model, _forget(), f_ex, r_ex, loop, ablation)
    assert info["exclusive_roots"] == len(roots) and info["roots_per_step"] == M
    with torch.no_grad():
        before = concept_log_mass(model, HIST, roots, depths).exp().mean()
        after = concept_log_mass(sampled, HIST, roots, depths).exp().mean()
    assert float(after) < 0.7 * float(before)  # measured: 0.226 -> 0.114 in 15 steps
    # m >= R is exact, and the root draws use their own generator: the run is the exact run, step for step
    exact = run_tracer(model, _forget(), f_ex, r_ex, loop, TracerSettings(reassign=False))[1]["losses"]
    full = run_tracer(model, _forget(), f_ex, r_ex, loop, TracerSettings(reassign=False, root_sample=99))
    assert full[1]["losses"] == exact and full[1]["roots_per_step"] == len(roots)


def test_a_negative_root_sample_is_one_line_naming_the_key() -> None:
    with pytest.raises(DataError, match=r"methods\.tracer@x\.root_sample"):
        parse_methods({"tracer@x": {"root_sample": -1}})
    assert parse_methods({"tracer": {"root_sample": 4}})["tracer"].get(TracerSettings).root_sample == 4
