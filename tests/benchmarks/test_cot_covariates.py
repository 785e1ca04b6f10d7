"""The several-covariate design of benchmarks.cot_coverage and the near-cycle of temporal_priors_stress."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import benchmarks.cot_coverage as cot
from benchmarks.temporal_priors_stress import near_cycle, penalty_rows


@pytest.mark.parametrize("d", [1, 3])
def test_conditional_bounds_are_the_gaussian_ones_for_every_d(d: int) -> None:
    """Given X the shared effect g(X) cancels, so the sharp bounds do not depend on d.

    Checked by Monte Carlo on the design's own formulas (not the quadrature): with
    one normal draw Z per unit, Y1 - Y0 under the comonotone coupling is
    (g + Q1(Z)) - (g + Q0(Z)) and under the antitone one (g + Q1(Z)) - (g + Q0(-Z)).
    """
    rng = np.random.default_rng(d)
    x = rng.uniform(size=(400_000, d))
    z = rng.normal(size=len(x))
    g = cot._shared(x)
    y1 = g + cot._q1_gaussian(z, x[:, 0])
    lower = np.mean((y1 - g - cot._q0(z, x[:, 0])) ** 2)
    upper = np.mean((y1 - g - cot._q0(-z, x[:, 0])) ** 2)
    truth = cot.covariate_bounds(d, draws=20_000)
    assert lower == pytest.approx(truth["conditional_lower"], abs=0.03)
    assert upper == pytest.approx(truth["conditional_upper"], abs=0.05)
    assert truth["unconditional_upper"] > 2 * truth["conditional_upper"]      # conditioning tightens strongly
    assert np.std(g) == pytest.approx(cot.SHARED_SD, rel=0.01)


def test_covariates_run_writes_a_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--covariates 2 --reps 2`` runs every estimator and renders one row per estimator."""
    written: dict[str, object] = {}

    def fake_write(name: str, payload: dict, md: str) -> tuple[Path, Path]:
        written.update(name=name, payload=payload, md=md)
        return Path("x.json"), Path("x.md")

    monkeypatch.setattr(cot, "write_results", fake_write)
    assert cot.main(["--covariates", "2", "--reps", "2", "--units", "600"]) == 0
    assert written["name"] == "cot_covariates"
    runs = written["payload"]["results"]["2"]["runs"]
    assert set(runs) == set(cot.COVARIATE_ESTIMATORS)
    assert written["md"].count("\n| 2 |") == len(cot.COVARIATE_ESTIMATORS)


def test_near_cycle_penalty_explodes_only_unnormalised() -> None:
    """The stress table's shape: exp(S) equals the direct edge at small weights and explodes by w = 20.

    With the chain weight w small, the only prohibited walk that counts is the back
    edge itself, so exp(S) gives P = 0.05; by w = 20 (lambda(S) = 14.8 at d = 20)
    walks around the cycle dominate. The normalised penalty stays below 1/margin = 10.
    """
    assert near_cycle(20, 2.0)[19, 0] == 0.05
    rows = {r["w"]: r for r in penalty_rows([20], [1.0, 20.0, 1000.0])}
    assert rows[1.0]["unnormalised exp"]["P"] == pytest.approx(0.05, rel=1e-6)
    assert rows[20.0]["unnormalised exp"]["P"] > 100
    assert rows[1000.0]["unnormalised exp"]["P"] > 1e250
    for r in rows.values():
        assert r["normalised resolvent"]["finite"] and 0 < r["normalised resolvent"]["P"] < 10
