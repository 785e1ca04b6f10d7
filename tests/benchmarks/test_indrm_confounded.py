"""The confounded-parents simulation and the FCI parent reading of benchmarks.indrm_confounded."""

import numpy as np
import pandas as pd
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import SplineTransformer

from benchmarks.indrm_confounded import _score, run_fci, simulate


def _resid_var(df: pd.DataFrame, cols: list[str]) -> float:
    model = make_pipeline(SplineTransformer(n_knots=12), LinearRegression()).fit(df[cols], df["Y"])
    return float(np.var(df["Y"] - model.predict(df[cols])))


def test_simulation_has_the_planted_structure():
    """Y's parents are X1, X2 (residual variance 0.4^2, not lowered by X3, X4).

    The hidden H1 makes X1 and X3 dependent only when the strength s > 0.
    """
    strong = simulate(20000, 1.5, seed=4)
    assert abs(_resid_var(strong, ["X1", "X2"]) - 0.16) < 0.01
    assert _resid_var(strong, ["X1", "X2", "X3", "X4"]) > 0.16 - 0.01
    assert abs(np.corrcoef(strong["X1"], strong["X3"])[0, 1]) > 0.2
    none = simulate(20000, 0.0, seed=4)
    assert abs(np.corrcoef(none["X1"], none["X3"])[0, 1]) < 0.03
    assert list(none.columns) == ["X1", "X2", "X3", "X4", "Y", "X5", "X6"]


def test_fci_parent_reading_on_a_collider():
    """A -> Y <- B, Y -> C (linear Gaussian): FCI's PAG has A o-> Y <-o B, so A and B are possible, not
    definite, parents; C (a child) is neither."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(3000), rng.standard_normal(3000)
    y = a + b + 0.5 * rng.standard_normal(3000)
    c = y + 0.5 * rng.standard_normal(3000)
    res = run_fci(pd.DataFrame({"A": a, "B": b, "Y": y, "C": c}), "fisherz", 0.05)
    assert sorted(res["possible"]) == ["A", "B"]
    assert res["parents"] == []


def test_score_counts_confounded_and_child_false_positives():
    s = _score(["X1", "X3", "X5"])
    assert not s["exact"] and s["confounded_fp"] and s["child_fp"]
    assert s["precision"] == 1 / 3 and s["recall"] == 0.5
    assert _score(["X2", "X1"])["exact"]
