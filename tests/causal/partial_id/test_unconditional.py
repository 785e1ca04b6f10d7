"""Known answers for the unconditional OT bounds: Gaussian, binary Frechet, Makarov, duality."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from causal_ext.partial_id import OTBounds, effect_variance_bounds, solve_bound
from causal_ext.partial_id.costs import resolve_cost

MU1, SD1, MU0, SD0 = 1.0, 2.0, 0.0, 1.0
N = 700


@pytest.fixture(scope="module")
def gaussian_fit() -> tuple[OTBounds, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    y1, y0 = rng.normal(MU1, SD1, N), rng.normal(MU0, SD0, N)
    return OTBounds().fit(y1, y0), y1, y0


def test_gaussian_bounds_match_the_closed_form(gaussian_fit) -> None:
    """Quadratic cost, N(mu1, s1^2) vs N(mu0, s0^2): [(mu1-mu0)^2 + (s1-s0)^2, (mu1-mu0)^2 + (s1+s0)^2].

    The lower end is the comonotone coupling (Y0 = mu0 + s0/s1 (Y1 - mu1)), the
    upper the antitone one. With n = 700 per arm the sampling sd is about 0.26
    and 0.49 (computed below from the potentials), so 4 standard errors is a
    check that fails for a wrong constant (e.g. using s1^2 - s0^2) or coupling.
    """
    est, _, _ = gaussian_fit
    lower, upper = (MU1 - MU0) ** 2 + (SD1 - SD0) ** 2, (MU1 - MU0) ** 2 + (SD1 + SD0) ** 2
    assert abs(est.lower_ - lower) < 4 * est.se_[0]
    assert abs(est.upper_ - upper) < 4 * est.se_[1]
    assert est.ci_[0, 0] < lower < est.ci_[0, 1] and est.ci_[1, 0] < upper < est.ci_[1, 1]
    assert est.set_ci_ == (est.ci_[0, 0], est.ci_[1, 1])


def test_empirical_bounds_are_the_sorted_couplings(gaussian_fit) -> None:
    """Equal sample sizes on the line: OT solves exactly to sorted-vs-sorted and sorted-vs-reversed."""
    est, y1, y0 = gaussian_fit
    s1, s0 = np.sort(y1), np.sort(y0)
    assert est.lower_ == pytest.approx(np.mean((s1 - s0) ** 2), abs=1e-9)
    assert est.upper_ == pytest.approx(np.mean((s1 - s0[::-1]) ** 2), abs=1e-9)


def test_standard_errors_match_the_gaussian_potentials(gaussian_fit) -> None:
    """Var of the plug-in = Var f(Y1)/n1 + Var g(Y0)/n0 with the closed-form Brenier potentials.

    Comonotone map T(y) = mu0 + r (y - mu1), r = s0/s1, potential
    f(y) = (1 - r) u^2 + 2 (mu1 - mu0) u with u = y - mu1, so
    Var f = 2 (1 - r)^2 s1^4 + 4 (mu1 - mu0)^2 s1^2 (symmetrically for g; the
    antitone case flips the sign of r).
    """
    est, _, _ = gaussian_fit
    dm = MU1 - MU0
    for col, sign in ((0, 1.0), (1, -1.0)):
        var_f = 2 * (1 - sign * SD0 / SD1) ** 2 * SD1**4 + 4 * dm**2 * SD1**2
        var_g = 2 * (1 - sign * SD1 / SD0) ** 2 * SD0**4 + 4 * dm**2 * SD0**2
        assert est.se_[col] == pytest.approx(np.sqrt(var_f / N + var_g / N), rel=0.15)


def test_effect_variance_bounds(gaussian_fit) -> None:
    """Var(Y1 - Y0) lies in [(s1 - s0)^2, (s1 + s0)^2] = [1, 9]."""
    est, _, _ = gaussian_fit
    lo, hi = effect_variance_bounds(est)
    assert abs(lo - (SD1 - SD0) ** 2) < 4 * est.se_[0] and abs(hi - (SD1 + SD0) ** 2) < 4 * est.se_[1]


@pytest.mark.parametrize(("k1", "n1", "k0", "n0"), [(30, 50, 10, 40), (10, 50, 30, 40), (45, 50, 36, 40),
                                                     (5, 50, 4, 40), (25, 50, 20, 40)])
def test_binary_frechet_bounds_are_exact(k1: int, n1: int, k0: int, n0: int) -> None:
    """Binary outcomes: OT reproduces the Frechet-Hoeffding bounds exactly.

    P(Y1=1, Y0=0) in [max(0, p1 - p0), min(p1, 1 - p0)] and
    P(Y1=1, Y0=1) in [max(0, p1 + p0 - 1), min(p1, p0)].
    """
    y1 = np.r_[np.ones(k1), np.zeros(n1 - k1)]
    y0 = np.r_[np.ones(k0), np.zeros(n0 - k0)]
    p1, p0 = k1 / n1, k0 / n0
    benefit = OTBounds(cost=lambda a, b: (a == 1) & (b == 0)).fit(y1, y0)
    assert benefit.lower_ == pytest.approx(max(0.0, p1 - p0), abs=1e-12)
    assert benefit.upper_ == pytest.approx(min(p1, 1.0 - p0), abs=1e-12)
    both = OTBounds(cost=lambda a, b: (a == 1) & (b == 1)).fit(y1, y0)
    assert both.lower_ == pytest.approx(max(0.0, p1 + p0 - 1.0), abs=1e-12)
    assert both.upper_ == pytest.approx(min(p1, p0), abs=1e-12)
    assert benefit.ci_ is None and benefit.se_ is None          # intervals only for the quadratic cost


def test_share_who_benefit_matches_makarov() -> None:
    """P(Y1 > Y0) for N(1, 1) vs N(0, 1): Makarov bounds [2 Phi(1/2) - 1, 1].

    The lower end is sup_y (F0(y) - F1(y)) = Phi(1/2) - Phi(-1/2); the upper is
    1 - sup_y (F1(y) - F0(y)) = 1. The tolerance 0.07 is about 1.3 times the sd
    of the sup of an empirical CDF difference at 600 per arm.
    """
    rng = np.random.default_rng(4)
    est = OTBounds(cost="greater").fit(rng.normal(1.0, 1.0, 600), rng.normal(0.0, 1.0, 600))
    assert est.lower_ == pytest.approx(2 * norm.cdf(0.5) - 1, abs=0.07)
    assert est.upper_ == pytest.approx(1.0, abs=0.03)


@pytest.mark.parametrize("cost", ["quadratic", "absolute", "greater"])
@pytest.mark.parametrize("sense", [1, -1])
def test_potentials_are_dual_optimal(cost: str, sense: int) -> None:
    """Strong duality (value = a.f + b.g) and feasibility (f + g <= c for min, >= c for max)."""
    rng = np.random.default_rng(5)
    ya, yb = rng.normal(size=40), rng.normal(0.5, 2.0, size=30)
    a, b = rng.uniform(size=40), rng.uniform(size=30)
    c = resolve_cost(cost)
    tr = solve_bound(ya, a, yb, b, c, sense)
    assert tr.value == pytest.approx(tr.a @ tr.f + tr.b @ tr.g, abs=1e-9)
    slack = sense * (c(tr.ya[:, None], tr.yb[None, :]) - tr.f[:, None] - tr.g[None, :])
    assert slack.min() > -1e-9
    np.testing.assert_allclose(tr.f_at(tr.ya), tr.f, atol=1e-9)      # c-transform is a fixed point
    np.testing.assert_allclose(tr.g_at(tr.yb), tr.g, atol=1e-9)
    other = solve_bound(ya, a, yb, b, c, -sense)
    assert sense * (other.value - tr.value) >= -1e-12                 # lower <= upper
