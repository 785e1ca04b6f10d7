"""Wavelet projection density estimator: Haar = histogram, Daubechies keeps low moments, converges."""

from __future__ import annotations

import numpy as np
import pytest

from causal_ext.partial_id.wavelets import (
    UnitScaler,
    joint_density_on_grid,
    nonnegative_rows,
    resolution_level,
    scaling_basis,
)


def _density_1d(u: np.ndarray, grid: np.ndarray, level: int, wavelet: str) -> np.ndarray:
    """1-D projection estimate, built independently of ``joint_density_on_grid``."""
    alpha = scaling_basis(u, level, wavelet).mean(axis=0)
    return scaling_basis(grid, level, wavelet) @ alpha


def test_haar_projection_is_the_histogram() -> None:
    u = np.random.default_rng(0).uniform(size=500)
    u[:3] = [0.0, 1.0, 0.5]                        # both ends and a bin edge
    level = 4
    centres = (np.arange(2**level) + 0.5) / 2**level
    hist, _ = np.histogram(u, bins=2**level, range=(0.0, 1.0), density=True)
    np.testing.assert_allclose(_density_1d(u, centres, level, "haar"), hist, rtol=0, atol=1e-12)


@pytest.mark.parametrize("wavelet", ["db2", "db3", "db4"])
def test_daubechies_projection_keeps_mass_and_low_moments(wavelet: str) -> None:
    """db-N reproduces polynomials of degree < N, so the estimate keeps the sample's moments below N."""
    u = np.random.default_rng(1).beta(2.0, 3.0, size=400)
    level = 3
    grid = np.linspace(-0.8, 1.8, 20001)            # wider than the support, fine enough for a Riemann sum
    dens = _density_1d(u, grid, level, wavelet)
    step = grid[1] - grid[0]
    n_moments = int(wavelet[2:])
    for m in range(n_moments):
        np.testing.assert_allclose(np.sum(grid**m * dens) * step, np.mean(u**m), atol=2e-4)
    assert np.sum(np.abs(dens)) * step > 1.0       # but it is a signed function (clipped later)


def test_joint_density_converges_to_the_truth() -> None:
    """Independent Beta(3, 3) X and Y (smooth on R): mean absolute error on [0, 1]^2 shrinks with n."""
    rng = np.random.default_rng(3)
    g = np.linspace(0.0, 1.0, 21)
    beta33 = 30 * g**2 * (1 - g) ** 2
    truth = beta33[:, None] * beta33[None, :]
    errors = []
    for n in (500, 20000):
        ux, uy = rng.beta(3.0, 3.0, size=(n, 1)), rng.beta(3.0, 3.0, size=n)
        dens = joint_density_on_grid(ux, uy, [g], g, level_x=3, level_y=3, wavelet="db3")
        errors.append(np.mean(np.abs(dens - truth)))
    assert errors[1] < 0.1 and errors[1] < errors[0] / 2


def test_resolution_level_rule() -> None:
    assert resolution_level(2**16, smoothness=3, dim=2) == 2            # 16 / 8
    assert resolution_level(2**16, smoothness=3, dim=2, scale=0.25) == 4
    assert resolution_level(10, smoothness=3, dim=2) == 1               # never below 1
    with pytest.raises(ValueError, match="scale"):
        resolution_level(100, 3, 2, scale=2.0)


def test_unit_scaler_round_trip_and_constant_column() -> None:
    z = np.c_[np.linspace(-3, 5, 7), np.full(7, 2.0)]
    sc = UnitScaler.fit(z)
    u = sc.transform(z)
    assert u[:, 0].min() == 0 and u[:, 0].max() == 1 and np.all(u[:, 1] == 0)
    np.testing.assert_allclose(sc.inverse(u), z)


def test_bad_wavelet_name() -> None:
    with pytest.raises(ValueError, match="wavelet='sym4'"):
        scaling_basis(np.zeros(3), 2, "sym4")
    with pytest.raises(ValueError, match="wavelet='nope'"):
        scaling_basis(np.zeros(3), 2, "nope")


def test_shifted_positive_part_is_the_l2_projection() -> None:
    """``nonnegative_rows(p, "shift")`` is the closest non-negative row of the same mass (and "clip" is not).

    Checked against the defining property rather than a second implementation: the
    result is feasible (>= 0, same net mass), no other feasible row (400 random ones,
    plus the clipped-and-rescaled row) is closer to ``p`` in L2, and no small feasible
    move of mass between two entries gets closer (first-order optimality).
    """
    rng = np.random.default_rng(3)
    p = rng.normal(0.2, 1.0, size=(50, 40))
    q = nonnegative_rows(p, "shift")
    mass = p.sum(axis=1)
    assert np.all(q >= 0)
    np.testing.assert_allclose(q.sum(axis=1)[mass > 0], mass[mass > 0], atol=1e-10)
    assert np.all(q[mass <= 0] == 0)
    for i in np.flatnonzero(mass > 0):
        clip = np.maximum(p[i], 0.0)
        others = np.vstack([clip * mass[i] / clip.sum(), rng.dirichlet(np.ones(40), size=400) * mass[i]])
        assert np.linalg.norm(q[i] - p[i]) <= np.linalg.norm(others - p[i], axis=1).min() + 1e-12
        # no small feasible move (mass from an entry j > 0 to any entry k) gets closer: optimality
        base = np.linalg.norm(q[i] - p[i])
        for j in np.flatnonzero(q[i] > 1e-3):
            moved = np.repeat(q[i][None], 40, axis=0)
            moved[:, j] -= 1e-4
            moved[np.arange(40), np.arange(40)] += 1e-4
            assert np.linalg.norm(moved - p[i], axis=1).min() >= base - 1e-12
    np.testing.assert_array_equal(nonnegative_rows(p, "clip"), np.maximum(p, 0.0))
    with pytest.raises(ValueError, match="how='abs'"):
        nonnegative_rows(p, "abs")
