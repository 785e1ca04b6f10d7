"""Calibration metrics against hand computations, netcal and torchmetrics (and scikit-learn for NLL/Brier)."""

from __future__ import annotations

import math

import netcal.metrics as netcal_metrics  # noqa: E402  (the dev extra's reference implementations)
import numpy as np
import pytest
import sklearn.metrics as skm  # noqa: E402
import torch
import torchmetrics.functional.classification as tmf  # noqa: E402

from calib_ext.metrics import (
    accuracy,
    brier,
    calibration_summary,
    classwise_ece,
    mass_bin_edges,
    nll,
    reliability_diagram,
    top_label_ece,
    width_bin_index,
)


def _random(seed: int, n: int, c: int, concentration: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    gamma = torch.distributions.Gamma(torch.full((c,), concentration), torch.ones(c))
    torch.manual_seed(seed)
    p = gamma.sample((n,)).double()
    p = p / p.sum(dim=1, keepdim=True)
    y = torch.randint(0, c, (n,), generator=g)
    return p, y


# ------------------------------------------------------------------ hand-computed cases
# 4 binary samples; M = 4 bins with edges 0, .25, .5, .75, 1 (exact in binary floating point).
HAND_P = torch.tensor([[0.5, 0.5], [0.75, 0.25], [0.7, 0.3], [1.0, 0.0]], dtype=torch.float64)
HAND_Y = torch.tensor([0, 1, 0, 0])


def test_top_label_ece_hand_case_pins_the_lo_hi_edge_rule() -> None:
    # confidences .5 (right), .75 (wrong), .7 (right), 1 (right). (lo, hi] bins:
    # (.25,.5]: {.5}: |1 - .5| * 1/4 = .125; (.5,.75]: {.75, .7}: |.5 - .725| * 2/4 = .1125; (.75,1]: {1}: 0
    assert top_label_ece(HAND_P, HAND_Y, n_bins=4) == pytest.approx(0.2375, abs=1e-12)
    # torchmetrics bins [lo, hi): {.5,.7}: |1-.6|*2/4 = .2; {.75}: .75/4 = .1875; 1.0 in its own bin: 0
    tm = float(tmf.multiclass_calibration_error(HAND_P, HAND_Y, num_classes=2, n_bins=4, norm="l1"))
    assert tm == pytest.approx(0.3875, abs=1e-6)  # the documented edge-rule difference


def test_mass_ece_hand_case() -> None:
    # median of confidences (.5,.7,.75,1) is .725: (0,.725] = {.5,.7}: |1-.6|*.5 = .2; (.725,1] = {.75,1}:
    # |.5 - .875| * .5 = .1875
    assert top_label_ece(HAND_P, HAND_Y, n_bins=2, binning="mass") == pytest.approx(0.3875, abs=1e-12)


def test_classwise_ece_hand_case() -> None:
    # class 0: p = (.5,.75,.7,1), y0 = (1,0,1,1): bins (.25,.5]: |1-.5|; (.5,.75]: |1-1.45|; (.75,1]: 0
    #   -> (.5 + .45) / 4 = .2375
    # class 1: p = (.5,.25,.3,0), y1 = (0,1,0,0): (0,.25] incl. 0: |1-.25|; (.25,.5]: |0-.8|
    #   -> (.75 + .8) / 4 = .3875;  mean = .3125
    assert classwise_ece(HAND_P, HAND_Y, n_bins=4) == pytest.approx(0.3125, abs=1e-12)


def test_nll_brier_accuracy_hand_case() -> None:
    logits = torch.tensor([[0.0, math.log(3.0)], [math.log(3.0), 0.0]], dtype=torch.float64)
    y = torch.tensor([1, 1])
    assert nll(logits, y) == pytest.approx(-(math.log(0.75) + math.log(0.25)) / 2, abs=1e-7)
    # p = (.25,.75) y=1: .0625+.0625 = .125; p = (.75,.25) y=1: .5625+.5625 = 1.125
    probs = torch.softmax(logits.double(), dim=1)
    assert brier(probs, y) == pytest.approx((0.125 + 1.125) / 2, abs=1e-12)
    assert accuracy(probs, y) == 0.5


def test_width_bin_index_edges() -> None:
    conf = torch.tensor([0.0, 0.25, 0.2500001, 0.5, 1.0], dtype=torch.float64)
    assert width_bin_index(conf, 4).tolist() == [0, 0, 1, 1, 3]


# ------------------------------------------------------------------ peers on random inputs
@pytest.mark.parametrize("seed,n,c,bins", [(0, 2000, 10, 15), (1, 999, 5, 10), (2, 5000, 50, 20)])
def test_top_label_ece_matches_netcal_and_torchmetrics(seed: int, n: int, c: int, bins: int) -> None:
    p, y = _random(seed, n, c, concentration=0.3)
    ours = top_label_ece(p, y, n_bins=bins)
    ref_netcal = netcal_metrics.ECE(bins).measure(p.numpy(), y.numpy())
    ref_tm = float(tmf.multiclass_calibration_error(p, y, num_classes=c, n_bins=bins, norm="l1"))
    assert ours == pytest.approx(ref_netcal, abs=1e-10)
    assert ours == pytest.approx(ref_tm, abs=1e-6)  # torchmetrics accumulates in the input dtype


@pytest.mark.parametrize("seed,n,c,bins", [(3, 2000, 10, 15), (4, 1000, 7, 10)])
def test_mass_ece_matches_netcal(seed: int, n: int, c: int, bins: int) -> None:
    # (n - 1) * b / M is never an integer for 0 < b < M here, so no confidence sits on an edge
    assert all(((n - 1) * b) % bins for b in range(1, bins))
    p, y = _random(seed, n, c, concentration=0.5)
    ours = top_label_ece(p, y, n_bins=bins, binning="mass")
    ref = netcal_metrics.ECE(bins, equal_intervals=False).measure(p.numpy(), y.numpy())
    assert ours == pytest.approx(ref, abs=1e-10)
    conf = p.max(dim=1).values
    counts = torch.bucketize(conf, mass_bin_edges(conf, bins)[1:-1]).bincount(minlength=bins)
    assert int(counts.max() - counts.min()) <= 1  # equal mass


def test_classwise_ece_matches_per_class_binary_references() -> None:
    p, y = _random(5, 1500, 6, concentration=0.7)
    ours = classwise_ece(p, y, n_bins=15)
    tm = np.mean([float(tmf.binary_calibration_error(p[:, j].contiguous(), (y == j).long(), n_bins=15,
                                                     norm="l1")) for j in range(6)])
    nc = np.mean([netcal_metrics.ECE(15).measure(np.stack([1 - p[:, j].numpy(), p[:, j].numpy()], 1),
                                                 (y == j).long().numpy()) for j in range(6)])
    assert ours == pytest.approx(tm, abs=1e-6)
    assert ours == pytest.approx(nc, abs=1e-10)


def test_nll_brier_accuracy_match_peers() -> None:
    g = torch.Generator().manual_seed(6)
    logits = torch.randn(800, 12, generator=g) * 3
    y = torch.randint(0, 12, (800,), generator=g)
    p = torch.softmax(logits.double(), dim=1)
    ce = float(torch.nn.functional.cross_entropy(logits.double(), y))
    assert nll(logits, y) == pytest.approx(ce, 1e-12)
    assert nll(logits, y) == pytest.approx(skm.log_loss(y.numpy(), p.numpy(), labels=list(range(12))), 1e-9)
    ref_brier = skm.brier_score_loss(y.numpy(), p.numpy(), labels=list(range(12)), scale_by_half=False)
    assert brier(p, y) == pytest.approx(ref_brier, abs=1e-12)
    ref_acc = float(tmf.multiclass_accuracy(p, y, num_classes=12, average="micro"))
    assert accuracy(p, y) == pytest.approx(ref_acc, abs=1e-7)


# ------------------------------------------------------------------ statistical behaviour
def test_perfectly_calibrated_sample_has_small_ece() -> None:
    """Labels drawn from the predicted probabilities: top-label calibrated by construction.

    Given the probabilities, bin b's term is |S_b| / n with S_b = sum_{i in b} (a_i - c_i), a sum of
    independent centred variables of variance c_i (1 - c_i); Jensen gives
    E[ECE] <= sum_b sqrt(sum_{i in b} c_i (1 - c_i)) / n. Single draws can exceed 0.015 at this n (about
    0.0186 at worst over 10 draws with logit scale 1), so the test checks the mean over 20 draws.
    """
    n = 10_000
    g = torch.Generator().manual_seed(7)
    p = torch.softmax(torch.randn(n, 10, generator=g, dtype=torch.float64) * 2.0, dim=1)
    conf = p.max(dim=1).values
    var = torch.zeros(15, dtype=torch.float64).scatter_add_(0, width_bin_index(conf, 15), conf * (1 - conf))
    bound = float(var.sqrt().sum()) / n
    eces = [top_label_ece(p, torch.multinomial(p, 1, generator=g).squeeze(1)) for _ in range(20)]
    assert np.mean(eces) < 0.015
    assert np.mean(eces) <= bound
    # a miscalibrated version of the same sample (confidences sharpened) is far above it
    sharp = torch.softmax(torch.log(p) * 2.5, dim=1)
    assert top_label_ece(sharp, torch.multinomial(p, 1, generator=g).squeeze(1)) > 0.1


def test_summary_handles_masked_logits_and_numpy() -> None:
    g = torch.Generator().manual_seed(8)
    z = torch.randn(300, 9, generator=g)
    y = torch.randint(1, 9, (300,), generator=g)
    zm = z.clone()
    zm[:, 0] = float("-inf")  # a masked class (e.g. the padding column)
    s_masked = calibration_summary(zm.numpy(), y.numpy())
    s_ref = calibration_summary(z[:, 1:], y - 1)
    assert set(s_masked) == {"ece", "ece_mass", "classwise_ece", "nll", "brier", "accuracy"}
    for key in ("ece", "ece_mass", "nll", "brier", "accuracy"):
        assert s_masked[key] == pytest.approx(s_ref[key], abs=1e-9)
    # classwise averages over C classes: the always-0 masked class adds a zero term
    assert s_masked["classwise_ece"] == pytest.approx(s_ref["classwise_ece"] * 8 / 9, abs=1e-9)


def test_reliability_diagram_writes_png(tmp_path) -> None:
    p, y = _random(9, 500, 5)
    out = reliability_diagram(p, y, tmp_path / "fig" / "rel.png", title="random")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list((tmp_path / "fig").glob(".*.tmp"))


@pytest.mark.parametrize("call,match", [
    (lambda: top_label_ece(torch.ones(3, 2), torch.zeros(3, dtype=torch.long)), "sum to 1"),
    (lambda: top_label_ece(torch.full((3, 2), 0.5), torch.tensor([0, 1, 2])), "labels"),
    (lambda: top_label_ece(torch.full((3, 2), 0.5), torch.tensor([0.0, 1.0, 1.0])), "integer"),
    (lambda: top_label_ece(torch.full((3, 2), 0.5), torch.tensor([0, 1, 1]), binning="quantile"), "binning"),
    (lambda: top_label_ece(torch.full((3, 2), 0.5), torch.tensor([0, 1, 1]), n_bins=0), "n_bins"),
    (lambda: classwise_ece(torch.full((3,), 0.5), torch.tensor([0, 1, 1])), "2-D"),
    (lambda: nll(torch.tensor([[0.0, float("nan")]]), torch.tensor([0])), "NaN"),
    (lambda: calibration_summary(torch.full((1, 2), float("-inf")), torch.tensor([0])), "entirely -inf"),
    (lambda: brier(torch.tensor([[1.5, -0.5]]), torch.tensor([0])), "negative"),
])
def test_bad_input_raises_one_clear_error(call, match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        call()
