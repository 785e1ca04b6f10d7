"""Conditional OT bounds: covariate tightening, an analytic heteroscedastic design, the binned baseline."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.polynomial.legendre import leggauss

from causal_ext.partial_id import BinnedConditionalOTBounds, ConditionalOTBounds, OTBounds
from causal_ext.partial_id.binned_cot import covariate_bins

S = 0.5
N_ARM = 700


@pytest.fixture(scope="module")
def tightening_sample() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    x1, x0 = rng.uniform(-np.sqrt(3), np.sqrt(3), N_ARM), rng.uniform(-np.sqrt(3), np.sqrt(3), N_ARM)
    return x1 + S * rng.normal(size=N_ARM), x0 + S * rng.normal(size=N_ARM), x1, x0


def test_covariates_tighten_the_upper_bound(tightening_sample) -> None:
    """Unconditional max E[(Y1 - Y0)^2] = 4 (1 + s^2); given X it is 4 s^2.

    Design: X uniform on [-sqrt 3, sqrt 3] (mean 0, variance 1, symmetric),
    Y1 = X + s e1 and Y0 = X + s e0 with independent standard normal noise,
    s = 0.5.

    Given X = x both potential outcomes are N(x, s^2). The largest
    E[(Y1 - Y0)^2 | x] over couplings is the antitone one (Y0 - x = -(Y1 - x)):
    (x - x)^2 + (s + s)^2 = 4 s^2, the same for every x, so the conditional
    upper bound is 4 s^2 = 1. The lower bound (comonotone, Y0 = Y1) is 0.

    Without X, Y1 and Y0 have the same law L = law(X + s e), symmetric about 0
    with E Y^2 = 1 + s^2. E[(Y1 - Y0)^2] = 2 (1 + s^2) - 2 E[Y1 Y0] and by
    Cauchy-Schwarz E[Y1 Y0] >= -(1 + s^2), attained by Y0 = -Y1, which has law
    L by symmetry; so the unconditional upper bound is 4 (1 + s^2) = 5 and the
    lower is again 0.

    Tolerances at 700 units per arm: the unconditional upper bound has se ~0.15
    (4 se = 0.6); the conditional estimators have se ~0.04, plus a smoothing or
    within-bin bias of a few hundredths, hence +-0.15 -- far from 5, and failing
    for an estimator that ignores X or mixes the arms' covariate cells.
    """
    y1, y0, x1, x0 = tightening_sample
    unconditional = OTBounds().fit(y1, y0)
    wavelet = ConditionalOTBounds().fit(y1, y0, x1, x0)
    binned = BinnedConditionalOTBounds().fit(y1, y0, x1, x0)
    assert unconditional.upper_ == pytest.approx(4 * (1 + S**2), abs=0.6)
    assert unconditional.lower_ == pytest.approx(0.0, abs=0.05)
    for est in (wavelet, binned):
        assert est.upper_ == pytest.approx(4 * S**2, abs=0.15)
        assert est.lower_ == pytest.approx(0.0, abs=0.1)
        assert unconditional.lower_ - 0.05 <= est.lower_ <= est.upper_ < unconditional.upper_ - 3


def _design(n: int, seed: int) -> tuple[np.ndarray, ...]:
    """X ~ U(0, 1), e(X) = 0.3 + 0.4 X, Y1 | X ~ N(1 + 2X, (1 + X)^2), Y0 | X ~ N(4X(1-X), (0.5 + 0.5X)^2)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=n)
    t = rng.uniform(size=n) < 0.3 + 0.4 * x
    y1 = 1 + 2 * x + (1 + x) * rng.normal(size=n)
    y = np.where(t, y1, 4 * x * (1 - x) + (0.5 + 0.5 * x) * rng.normal(size=n))
    return y[t], y[~t], x[t], x[~t]


def _design_truth() -> tuple[float, float]:
    """E[(m1 - m0)^2 + (s1 -+ s0)^2] by 64-point Gauss-Legendre (exact for these polynomials)."""
    z, w = leggauss(64)
    x, w = (z + 1) / 2, w / 2
    dm2 = (1 + 2 * x - 4 * x * (1 - x)) ** 2
    s1, s0 = 1 + x, 0.5 + 0.5 * x
    return float(w @ (dm2 + (s1 - s0) ** 2)), float(w @ (dm2 + (s1 + s0) ** 2))


def test_wavelet_bounds_recover_an_analytic_design() -> None:
    """Gaussian conditionals: bounds = E[(m1 - m0)^2 + (s1 -+ s0)^2]; confounded treatment e(X).

    At n = 3000 the se are ~0.16 / 0.22; the check is 3 se plus 0.1 for the
    smoothing bias, and that both 95% intervals hold the truth for this seed.
    """
    lower, upper = _design_truth()
    est = ConditionalOTBounds().fit(*_design(3000, seed=1))
    assert abs(est.lower_ - lower) < 3 * est.se_[0] + 0.1
    assert abs(est.upper_ - upper) < 3 * est.se_[1] + 0.1
    assert est.ci_[0, 0] < lower < est.ci_[0, 1] and est.ci_[1, 0] < upper < est.ci_[1, 1]
    assert est.set_ci_[0] < lower < upper < est.set_ci_[1]
    assert est.mean_difference_ == pytest.approx(4 / 3, abs=0.15)   # E[1 + 2X - 4X(1 - X)]
    assert set(est.levels_) == {"level_x", "level_y", "grid_x", "grid_y"}


def test_haar_estimator_is_exact_for_cellwise_constant_laws() -> None:
    """X uniform on 4 dyadic cells, outcome laws constant within a cell: Haar at level_x = 2 pools exactly.

    Inside each cell the estimator's conditional laws are then the Haar
    histograms of that cell's outcomes, so its bounds are the per-cell OT between
    the level-y histograms; with outcomes taking values at the histogram's bin
    centres this equals exact OT between the cells' empirical laws, which is
    what the binned estimator computes when its bins are the same cells.
    """
    rng = np.random.default_rng(2)
    n = 400
    x1, x0 = rng.uniform(size=n), rng.uniform(size=n)
    ly = 4
    centres = (np.arange(2**ly) + 0.5) / 2**ly

    def outcome(x: np.ndarray, shift: float) -> np.ndarray:
        idx = np.clip((np.floor(x * 4) * 3 + rng.integers(0, 4, len(x)) + shift).astype(int), 0, 2**ly - 1)
        return centres[idx]

    y1, y0 = outcome(x1, 2), outcome(x0, 0)
    y1[0], y0[0] = centres[0], centres[-1]          # pin the outcome range to [c_0, c_15] in both fits
    x1[0], x0[0] = 0.0, 1.0
    wav = ConditionalOTBounds(wavelet="haar", level_x=2, level_y=ly, grid_x=4, grid_y=2**ly,
                              outcome_scale="minmax").fit(y1, y0, x1, x0)
    lows, highs, weights = [], [], []
    for c in range(4):
        in1, in0 = np.floor(np.minimum(x1, 1 - 1e-12) * 4) == c, np.floor(np.minimum(x0, 1 - 1e-12) * 4) == c
        cell = OTBounds().fit(y1[in1], y0[in0])
        lows.append(cell.lower_)
        highs.append(cell.upper_)
        weights.append(in1.sum() + in0.sum())
    w = np.array(weights) / np.sum(weights)
    assert wav.lower_ == pytest.approx(w @ lows, abs=1e-9)
    assert wav.upper_ == pytest.approx(w @ highs, abs=1e-9)


def test_binned_bins_hold_both_arms_and_use_everyone() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(size=(300, 1))
    treated = x[:, 0] > 0.2                          # no treated unit among the lowest 20%
    bins = covariate_bins(x, treated, neighbors=20)
    assert len(bins) == 300
    for b in np.unique(bins):
        assert treated[bins == b].any() and (~treated[bins == b]).any()
    x2 = rng.normal(size=(300, 2))
    bins2 = covariate_bins(x2, x2[:, 0] > -0.5, neighbors=25)
    for b in np.unique(bins2):
        assert (x2[bins2 == b, 0] > -0.5).any() and (x2[bins2 == b, 0] <= -0.5).any()


def test_two_covariates() -> None:
    """d = 2: Y1 = X1 + X2 + e1, Y0 = X1 - X2 + 0.5 e0 gives E[4 X2^2] + (1 -+ 0.5)^2 with X ~ U(0,1)^2."""
    rng = np.random.default_rng(4)
    n = 800
    x1, x0 = rng.uniform(size=(n, 2)), rng.uniform(size=(n, 2))
    y1 = x1.sum(axis=1) + rng.normal(size=n)
    y0 = x0[:, 0] - x0[:, 1] + 0.5 * rng.normal(size=n)
    lower, upper = 4 / 3 + 0.25, 4 / 3 + 2.25
    for est in (ConditionalOTBounds(), BinnedConditionalOTBounds()):
        est.fit(y1, y0, x1, x0)
        assert abs(est.lower_ - lower) < 4 * est.se_[0] + 0.15
        assert abs(est.upper_ - upper) < 4 * est.se_[1] + 0.15
