"""Conformal risk control and Learn-then-Test: hand cases and guarantees over many random draws."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from calib_ext.conformal import (
    ConformalSeverityControl,
    Hierarchy,
    SeverityCurves,
    crc_threshold,
    fnr_baseline,
    hierarchical_entry_times,
    ltt_threshold,
)
from calib_ext.conformal.quantile import exceedance_pvalues

TREE = Hierarchy.from_parent_map({"a": "X", "b": "X", "c": "Y"})
LABELS = ["a", "b", "c"]


def test_crc_threshold_by_hand() -> None:
    # flat sets t = 1 - p. Instance 1: true {a}, p_a = 0.9 -> severity 1 below lambda 0.1, then 0.
    # Instance 2: true {c}, p = (0.6, 0.2, 0.3): empty below 0.4 (cost 1), {a} at d(c, a) = 4 = D_max
    # (cost 1) until c enters at 0.7. R(lambda) = 1, 0.5, 0 on [0, .1), [.1, .7), [.7, 1].
    scores = np.array([[0.9, 0.5, 0.1], [0.6, 0.2, 0.3]])
    true = [["a"], ["c"]]
    for alpha, expected in ((0.7, 0.1), (0.5, 0.7), (0.3, 1.0)):  # (2R + 1) / 3 <= alpha
        csc = ConformalSeverityControl(TREE, LABELS, alpha, sets="flat").fit(scores, true)
        assert csc.lambda_ == pytest.approx(expected)
    assert csc.predict(scores).all()  # alpha < B/(n+1): the full set
    fitted = ConformalSeverityControl(TREE, LABELS, 0.7, sets="flat").fit(scores, true)
    assert fitted.predict_labels(scores) == [["a"], []]


def test_crc_bisection_finds_the_first_qualifying_candidate() -> None:
    risk_at = {0.0: 0.8, 0.2: 0.6, 0.5: 0.3, 0.9: 0.1, 1.0: 0.0}
    cand = np.array(sorted(risk_at))

    def risk(lam: float) -> float:
        return risk_at[max(c for c in cand if c <= lam)]

    # n = 9: (9 R + 1) / 10 <= alpha  <=>  R <= (10 alpha - 1) / 9
    assert crc_threshold(risk, 9, 0.4, cand) == 0.5
    assert crc_threshold(risk, 9, 0.2, cand) == 0.9
    assert crc_threshold(risk, 9, 0.95, cand) == 0.0
    with pytest.raises(ValueError, match="alpha=1.5"):
        crc_threshold(risk, 9, 1.5, cand)


def planted_pool(seed: int, n: int = 2000) -> tuple[np.ndarray, np.ndarray, Hierarchy, list[str]]:
    """ATC-coded labels; scores are noisy versions of the truth that leak onto siblings."""
    rng = np.random.default_rng(seed)
    codes = [f"{a}{t:02d}{p}A{s:02d}" for a in "CN" for t in (1, 7) for p in "AB" for s in (1, 2)]
    tree = Hierarchy.from_atc_codes(codes)
    true = rng.random((n, len(codes))) < 0.15
    sib = np.arange(len(codes)) ^ 1  # the other substance of the same chemical subgroup
    logit = 2.5 * true + 1.5 * true[:, sib] - 2.5 + rng.normal(0, 1.2, true.shape)
    return 1 / (1 + np.exp(-logit)), true, tree, codes


@pytest.mark.parametrize("loss, sets", [("severity", "hierarchical"), ("severity", "flat"), ("fnr", "flat")])
def test_crc_risk_is_at_most_alpha_on_average_over_splits(loss: str, sets: str) -> None:
    scores, true, tree, labels = planted_pool(0)
    alpha, splits, n = 0.1, 300, len(scores)
    csc = ConformalSeverityControl(tree, labels, alpha, sets=sets, loss=loss)
    curves = csc.curves(scores, true)
    rng = np.random.default_rng(1)
    achieved = []
    for _ in range(splits):
        perm = rng.permutation(n)
        cal, test = curves.subset(perm[: n // 2]), curves.subset(perm[n // 2:])
        lam = csc.fit_curves(cal).lambda_
        achieved.append((test.fnr_losses(lam) if loss == "fnr" else test.losses(lam)).mean())
    achieved = np.array(achieved)
    mc = achieved.std() / np.sqrt(splits)
    assert achieved.mean() <= alpha + 3 * mc  # the CRC guarantee
    assert achieved.mean() >= alpha - 2 / (n // 2 + 1) - 3 * mc - 0.003  # and it is tight, not vacuous


def test_ltt_pvalues_and_fixed_sequence_by_hand() -> None:
    assert exceedance_pvalues(np.array([0]), 10, 0.1)[0] == pytest.approx(0.9 ** 10)
    assert exceedance_pvalues(np.array([3]), 50, 0.2)[0] == pytest.approx(stats.binom.cdf(3, 50, 0.2))
    hoeffding = np.exp(-2 * 50 * 0.18 ** 2)
    assert exceedance_pvalues(np.array([1]), 50, 0.2, "hoeffding")[0] == pytest.approx(hoeffding)
    with pytest.raises(ValueError, match="pvalue='bentkus'"):
        exceedance_pvalues(np.array([1]), 50, 0.2, "bentkus")
    # 100 instances, instance i exceeds for lambda < i / 100. At lambda, k = #{i/100 > lambda}.
    crit = np.arange(100) / 100
    lam = ltt_threshold(crit, beta=0.2, delta=0.1, grid=101)
    grid = np.linspace(1, 0, 101)
    k = np.array([(crit > g).sum() for g in grid])
    ok = np.cumprod(stats.binom.cdf(k, 100, 0.2) <= 0.1).astype(bool)
    assert lam == pytest.approx(grid[ok].min())
    assert ltt_threshold(crit[:5], beta=0.1, delta=0.1) == 1.0  # 0.9^5 > 0.1: nothing rejected, full sets


def test_ltt_quantile_guarantee_holds_over_many_draws() -> None:
    """The pool is the population: calibration sets are drawn from it with replacement, and each draw's
    exceedance P(severity > tolerance) is computed exactly on the whole pool."""
    scores, true, tree, labels = planted_pool(2, n=3000)
    dist = tree.distance_matrix(labels)
    curves = SeverityCurves(hierarchical_entry_times(scores, tree, labels), true, dist)
    tol, beta, delta, n, draws = 0.2, 0.1, 0.1, 400, 400
    crit = curves.critical_lambdas(tol)
    rng = np.random.default_rng(3)
    ltt, naive = [], []
    grid = np.linspace(1, 0, 1001)
    for _ in range(draws):
        c = crit[rng.integers(0, len(crit), n)]
        lam = ltt_threshold(c, beta, delta)
        ltt.append((crit > lam).mean())
        # plug-in without a p-value: smallest lambda whose calibration exceedance is <= beta
        ok = (n - np.searchsorted(np.sort(c), grid, side="right")) / n <= beta
        naive.append((crit > grid[np.cumprod(ok).astype(bool)].min()).mean())
    ltt, naive = np.array(ltt), np.array(naive)
    assert (ltt > beta).mean() <= delta + 0.03  # P(exceedance > beta) <= delta, up to Monte Carlo error
    assert ltt.mean() > beta / 3  # not trivially conservative
    assert (naive > beta).mean() > 0.3  # the check can fail: the uncorrected plug-in breaks it


def test_estimator_errors_are_clear() -> None:
    scores = np.full((4, 3), 0.5)
    with pytest.raises(ValueError, match="mode='median'"):
        ConformalSeverityControl(TREE, LABELS, mode="median").fit(scores, [["a"]] * 4)
    with pytest.raises(ValueError, match="alpha=0.0"):
        ConformalSeverityControl(TREE, LABELS, 0.0).fit(scores, [["a"]] * 4)
    with pytest.raises(ValueError, match="use loss='severity'"):
        ConformalSeverityControl(TREE, LABELS, mode="quantile", loss="fnr").fit(scores, [["a"]] * 4)
    with pytest.raises(ValueError, match="scores have 4 rows but true_sets 3"):
        ConformalSeverityControl(TREE, LABELS).fit(scores, [["a"]] * 3)
    with pytest.raises(RuntimeError, match="not fitted"):
        fnr_baseline(TREE, LABELS).predict(scores)
    with pytest.raises(ValueError, match="not in the hierarchy"):
        ConformalSeverityControl(TREE, ["a", "b", "zz"]).fit(scores, [["a"]] * 4)
    csc = ConformalSeverityControl(TREE, LABELS, 0.3, mode="quantile", beta=0.2, delta=0.2)
    assert csc.fit(scores, [["a"]] * 4).lambda_ == 1.0  # n = 4 is too few to reject anything


@pytest.mark.parametrize("loss", ["severity", "fnr"])
def test_risk_path_is_the_exact_step_function(loss: str) -> None:
    from calib_ext.conformal.risk_control import crc_threshold_path

    scores, true, tree, labels = planted_pool(4, n=300)
    family = "hierarchical" if loss == "severity" else "flat"
    csc = ConformalSeverityControl(tree, labels, sets=family, loss=loss)
    curves = csc.curves(scores, true)
    lams, risks = curves.risk_path(loss)
    direct = curves.fnr_risk if loss == "fnr" else curves.risk
    probe = np.unique(np.concatenate([np.linspace(0, 1, 57), lams, np.minimum(lams + 1e-9, 1)]))
    for lam in probe:
        assert risks[np.searchsorted(lams, lam, side="right") - 1] == pytest.approx(direct(lam), abs=1e-12)
    for alpha in (0.02, 0.05, 0.1, 0.3, 0.6):
        assert crc_threshold_path(lams, risks, len(curves), alpha) == pytest.approx(
            crc_threshold(direct, len(curves), alpha, curves.breakpoints()))
