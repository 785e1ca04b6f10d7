"""TemperatureScaler: recovery of a planted temperature, agreement with a 1-D optimiser, masking, errors."""

from __future__ import annotations

import math

import pytest
import scipy.optimize as scipy_optimize  # noqa: E402
import torch

from calib_ext.metrics import accuracy, nll, top_label_ece
from calib_ext.temperature import TemperatureScaler


def _planted(seed: int, n: int = 10_000, c: int = 10,
             scale: float = 2.0) -> tuple[torch.Tensor, torch.Tensor]:
    """True logits and labels drawn from softmax(true logits): calibrated at T = 1."""
    g = torch.Generator().manual_seed(seed)
    true = torch.randn(n, c, generator=g, dtype=torch.float64) * scale
    y = torch.multinomial(torch.softmax(true, dim=1), 1, generator=g).squeeze(1)
    return true, y


@pytest.mark.parametrize("t_star", [2.5, 0.4])
def test_recovers_planted_temperature(t_star: float) -> None:
    true, y = _planted(0)
    scaler = TemperatureScaler().fit(true * t_star, y)  # over- (2.5) or under-confident (0.4) logits
    assert scaler.temperature_ == pytest.approx(t_star, rel=0.05)
    assert scaler.converged_
    assert scaler.nll_after_ < scaler.nll_before_
    # fitted on one draw, it calibrates a fresh draw from the same model
    g = torch.Generator().manual_seed(1)
    y_test = torch.multinomial(torch.softmax(true, dim=1), 1, generator=g).squeeze(1)
    before = top_label_ece(torch.softmax(true * t_star, dim=1), y_test)
    after = top_label_ece(scaler.predict_proba(true * t_star), y_test)
    assert after < 0.02 < before


def test_matches_bounded_scalar_minimiser() -> None:
    true, y = _planted(2, n=3000, c=20, scale=1.5)
    logits = true * 1.7 + 0.3 * torch.randn(3000, 20, generator=torch.Generator().manual_seed(3),
                                            dtype=torch.float64)
    scaler = TemperatureScaler().fit(logits, y)
    res = scipy_optimize.minimize_scalar(lambda t: nll(logits / t, y), bounds=(0.05, 20), method="bounded",
                                         options={"xatol": 1e-9})
    assert scaler.temperature_ == pytest.approx(res.x, rel=1e-4)
    assert scaler.nll_after_ == pytest.approx(res.fun, abs=1e-9)


def test_transform_keeps_argmax_and_masked_classes() -> None:
    true, y = _planted(4, n=2000, c=8)
    logits = true * 3.0
    logits[:, 0] = float("-inf")  # masked class: probability 0 at every T
    y = torch.where(y == 0, 1, y)
    scaler = TemperatureScaler().fit(logits.numpy(), y.numpy())
    scaled = scaler.transform(logits)
    assert torch.isneginf(scaled[:, 0]).all()
    assert torch.equal(scaled.argmax(dim=1), logits.argmax(dim=1))
    probs = scaler.predict_proba(logits)
    assert torch.all(probs[:, 0] == 0)
    assert accuracy(probs, y) == accuracy(torch.softmax(logits, dim=1), y)
    assert math.isfinite(scaler.temperature_) and scaler.temperature_ > 1.0
    assert set(scaler.to_dict()) >= {"temperature", "nll_before", "nll_after", "converged"}


def test_separable_data_hits_the_bound_and_says_so() -> None:
    logits = torch.tensor([[5.0, 0.0], [0.0, 5.0]] * 10, dtype=torch.float64)
    y = torch.tensor([0, 1] * 10)
    with pytest.warns(RuntimeWarning, match="separable"):
        scaler = TemperatureScaler().fit(logits, y)
    assert scaler.temperature_ < 0.5
    assert not scaler.converged_
    assert scaler.nll_after_ < 1e-6


def test_errors() -> None:
    with pytest.raises(RuntimeError, match="not fitted"):
        TemperatureScaler().transform(torch.zeros(2, 2))
    logits = torch.tensor([[float("-inf"), 1.0]])
    with pytest.raises(ValueError, match="masked"):
        TemperatureScaler().fit(logits, torch.tensor([0]))
    with pytest.raises(ValueError, match="max_iter"):
        TemperatureScaler(max_iter=0)


def test_fits_inside_inference_mode() -> None:
    """A Lightning test hook runs under torch.inference_mode; the fit must still get gradients."""
    true, y = _planted(5, n=2000)
    with torch.inference_mode():
        logits, y = true * 2.0, y.clone()  # both inference tensors, as a Lightning test hook makes them
        scaler = TemperatureScaler().fit(logits, y)
    assert scaler.temperature_ == pytest.approx(2.0, rel=0.1)
