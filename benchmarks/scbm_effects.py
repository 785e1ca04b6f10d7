"""SCBM effect estimation: variance of bottleneck vs full adjustment, IV identification, bottleneck recovery.

Run::

    python -m benchmarks.scbm_effects            # full run (200 replicates per setting)
    python -m benchmarks.scbm_effects --quick    # smoke run (20 replicates, fewer settings; prints only)

Simulated linear SCBMs (:mod:`causal_ext.bottleneck.scenarios`) with known
bottlenecks and effects. Four tables:

1. Backdoor: Monte Carlo variance of the effect of ``T`` on ``Y`` when adjusting
   for all of ``C`` versus its bottleneck ``b(C)``. The headline bottleneck is
   *learned on the same sample* (reduced-rank regression of ``(T, Y)`` on ``C``,
   rank by the ``rsc`` rule, in every replicate); reference rows: a map learned on
   one independent source sample of 4000, and the oracle map up to a random
   invertible ``G``; against the exact theory ``sigma^2 / (Var(T|adj) (n - p - 3))``
   of the oracle, over several ``d_c``.
1b. Nonlinear bottleneck: backdoor design with ``b(C) = (B C)^2`` (even, so every
   linear method misses it); cross-fitted partialling out through a
   :class:`~causal_ext.bottleneck.NeuralBottleneck` of width ``k`` below, at and far
   above the true rank, against linear adjustment, a linear bottleneck and the oracle.
2. Mediation: variance of the indirect effect through ``M`` versus ``b(M)``.
3. IV: naïve 2SLS first-stage rank (detected non-identification) and the
   relative error of 2SLS on ``b(X)`` and of confounded OLS.
4. Bottleneck recovery: rank chosen by the ``rsc`` and ``cv`` rules and
   ``1 - min canonical correlation`` with the true bottleneck, versus ``n``.

Writes ``benchmarks/results/scbm_effects.{json,md}`` and ``docs/img/scbm_effects.png``.
BLAS runs single-threaded (the matrices are small; threads only add overhead).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from benchmarks.common import save_figure, write_results
from causal_ext.bottleneck import (
    BackdoorAdjustment,
    MediationEffect,
    NeuralBottleneck,
    PartiallyLinearBackdoor,
    ReducedRankBottleneck,
    TwoStageLeastSquares,
    backdoor_scenario,
    bottleneck_alignment,
    iv_scenario,
    mechanism_scenario,
    mediation_scenario,
    monte_carlo,
    nonlinear_alignment,
    nonlinear_backdoor_scenario,
    select_rank,
    summarize,
    theoretical_backdoor_variance,
)
from causal_ext.bottleneck.backdoor import adjusted_effect
from causal_ext.bottleneck.ols import ols
from recframe.report import metrics_table

PLOT = Path(__file__).resolve().parent.parent / "docs" / "img" / "scbm_effects.png"
SEED = 0

BACKDOOR_COLS = ["var full", "var b_hat(C)", "ratio b_hat", "bias z b_hat(C)", "cover b_hat(C)",
                 "rank b_hat ok", "var x-fit", "bias z x-fit", "cover x-fit", "var source b_hat", "var b(C)",
                 "ratio MC", "ratio theory", "theory full", "theory b(C)", "bias z full", "bias z source",
                 "bias z b(C)", "bias z none", "cover full", "cover b(C)"]
BACKDOOR_NOTE = ("Headline: b_hat(C), learned in each replicate on the same n rows by reduced-rank "
                 "regression of (T, Y) on C (rank by the rsc rule; 'rank b_hat ok' = share of replicates "
                 "where it picked the true rank 2); 'ratio b_hat' = var b_hat(C) / var full. Reference "
                 "rows: 'source b_hat' is learned once on an independent sample of 4000, b(C) is the true "
                 "map times a random invertible G (oracle). 'x-fit' = cross-fitted partialling out (5 "
                 "folds) with an unwhitened reduced-rank regression (rsc rank) of (T, Y) on C as the "
                 "learner, robust standard errors. Variance = mean over the 5 outcome coordinates of the "
                 "across-replicate variance; theory = sigma^2 / (Var(T|adj) (n - p - 3)) with sigma = "
                 "Var(T|adj) = 1. bias z = max over coordinates of |mean - truth| / MC standard error "
                 "(unadjusted 'none' for contrast); cover = 95 % interval coverage (classical OLS standard "
                 "errors, conditional on the map).")
NONLINEAR_COLS = ["mean |bias|", "max bias z", "rmse", "coverage", "mean se / sd"]
NONLINEAR_NOTE = ("Design: C ~ N(0, I_20), latent S = (B C)^2 (rank 2, elementwise square), T = a_t S + "
                  "N_T, Y = tau T + A_y S + N_Y (d_y = 3), a fixed draw (seed 1). S is uncorrelated with "
                  "every linear function of C. Arms: 'OLS on (T, C)' (linear full adjustment); 'linear "
                  "bottleneck' = cross-fitted partialling out with reduced-rank regression (rsc rank, "
                  "unwhitened) as the learner; 'neural k' = cross-fitted partialling out (3 folds) through "
                  "a NeuralBottleneck of width k (relu, 64 hidden units, early stopping on 20 % of each "
                  "training fold), k = 1 < r, k = 2 = r, k = 20 = d_c (no compression); 'oracle S' = OLS of"
                  " Y on (T, S) with the true S. mean |bias| and rmse over the 3 effect coordinates; max "
                  "bias z = max over coordinates of |mean - truth| / MC standard error; coverage of the 95 "
                  "% robust (sandwich) intervals; se / sd = mean reported standard error over the Monte "
                  "Carlo standard deviation.")
NL_RECOVERY_COLS = ["R2 neural k = 2", "R2 neural k = 1", "R2 linear rank 2"]
NL_RECOVERY_NOTE = ("Same design as the table above. Each learner is fitted on n rows of (C -> (T, Y)); on "
                    "4000 fresh rows, R2 = held-out R^2 of each true bottleneck coordinate S_j predicted "
                    "from "
                    "the learned scores by 25-nearest-neighbour regression (causal_ext.bottleneck."
                    "nonlinear_alignment), min over j, mean over replicates. 1 = S is a function of the "
                    "learned scores (recovery up to a bijection when k = 2).")
MEDIATION_COLS = ["var full", "var b(M)", "ratio MC", "se^2/var full", "se^2/var b(M)", "bias z full",
                  "bias z b(M)", "cover full", "cover b(M)"]
MEDIATION_NOTE = ("se^2/var = mean squared delta-method standard error over Monte Carlo variance "
                  "(1 = calibrated). Each d_m is a freshly drawn scenario (seed = d_m), so compare the two "
                  "arms within a row, not levels across rows.")
IV_COLS = ["naive rank (median)", "d_x", "naive identified", "err 2SLS b(X)", "err 2SLS b_hat(X)", "err OLS",
           "rank b_hat"]
IV_NOTE = ("naive identified = fraction of replicates where the first-stage rank equals d_x; err = mean "
           "relative Frobenius error of the (10, 30) effect; b_hat(X) learned by reduced-rank regression on "
           "3000 samples with X randomised.")
RECOVERY_COLS = ["rank ok (rsc)", "rank ok (cv)", "1 - min cc (mean)", "1 - min cc (max)"]
RECOVERY_NOTE = ("rank ok = fraction of replicates where the rule picks rank 3; cc = canonical correlations "
                 "between the estimated and true bottleneck (1 = equal up to an invertible map).")
_THREE = ("ratio MC", "ratio theory", "ratio b_hat", "cover b_hat(C)", "cover x-fit", "rank b_hat ok",
          "coverage",
          "mean |bias|", "rmse", "mean se / sd",
          "naive identified", "err 2SLS b(X)", "err 2SLS b_hat(X)", "err OLS",
          "rank ok (rsc)", "rank ok (cv)", "se^2/var full", "se^2/var b(M)", "cover full", "cover b(C)",
          "cover b(M)")
_TWO = ("bias z x-fit", "bias z full", "bias z b(C)", "bias z b_hat(C)", "bias z source", "bias z none",
        "bias z b(M)", "max bias z")
FORMATS = {**{c: ".3f" for c in _THREE}, **{c: ".2f" for c in _TWO},
           **{c: ".2e" for c in ("1 - min cc (mean)", "1 - min cc (max)")}}


def _section(title: str, note: str, rows: dict[str, dict], cols: list[str], digits: int = 4) -> str:
    return f"### {title}\n\n{note}\n\n" + metrics_table(rows, cols, digits=digits, formats=FORMATS) + "\n\n"


def _backdoor_arm(bottleneck):
    def run(d):
        est = BackdoorAdjustment(bottleneck).fit(d["treatment"], d["outcome"], d["confounder"])
        return est.effect_, est.stderr_
    return run


def _unadjusted(d):
    fit = ols(d["treatment"], d["outcome"])
    return fit.coef, fit.stderr


def _in_sample_arm(ranks: list[int]):
    """Learn the bottleneck on the replicate's own rows, then adjust for it (records the chosen rank)."""
    def run(d):
        learned = ReducedRankBottleneck().fit(d["confounder"], np.hstack([d["treatment"], d["outcome"]]))
        ranks.append(learned.rank_)
        if learned.rank_ == 0:  # nothing learned: adjust for nothing (the rule's answer, kept honest)
            return _unadjusted(d)
        return _backdoor_arm(learned)(d)
    return run


def backdoor_table(n: int, dims: list[int], reps: int, rank: int = 2, d_y: int = 5) -> dict[str, dict]:
    """Monte Carlo variance of full vs bottleneck backdoor adjustment for each ``d_c`` in ``dims``."""
    rows = {}
    for d_c in dims:
        sc = backdoor_scenario(d_c=d_c, d_y=d_y, rank=rank, seed=SEED + d_c)
        rng = np.random.default_rng(SEED + 1000 + d_c)
        source = sc.sample(4000, rng)
        learned = ReducedRankBottleneck().fit(source["confounder"],
                                              np.hstack([source["treatment"], source["outcome"]]))
        g = rng.standard_normal((rank, rank))
        ranks: list[int] = []
        arms = {"full": _backdoor_arm(None), "in_sample": _in_sample_arm(ranks),
                "crossfit": _plr_arm(ReducedRankBottleneck(whiten=False), folds=5),
                "oracle": _backdoor_arm(g @ sc.bottleneck), "source": _backdoor_arm(learned),
                "none": _unadjusted}
        res = monte_carlo(sc, n, reps, arms, seed=SEED + d_c)
        s = {k: summarize(*v, sc.effect) for k, v in res.items()}
        th_full = theoretical_backdoor_variance(n, d_c, 1.0, 1.0)
        th_b = theoretical_backdoor_variance(n, rank, 1.0, 1.0)
        rows[f"d_c = {d_c}"] = {
            "d_c": d_c, "var full": s["full"].variance, "var b_hat(C)": s["in_sample"].variance,
            "ratio b_hat": s["in_sample"].variance / s["full"].variance,
            "bias z b_hat(C)": s["in_sample"].max_bias_z, "cover b_hat(C)": s["in_sample"].coverage,
            "rank b_hat ok": float(np.mean(np.asarray(ranks) == rank)),
            "var x-fit": s["crossfit"].variance, "bias z x-fit": s["crossfit"].max_bias_z,
            "cover x-fit": s["crossfit"].coverage,
            "var source b_hat": s["source"].variance, "source rank": learned.rank_,
            "var b(C)": s["oracle"].variance, "ratio MC": s["oracle"].variance / s["full"].variance,
            "ratio theory": th_b / th_full, "theory full": th_full, "theory b(C)": th_b,
            "bias z full": s["full"].max_bias_z, "bias z source": s["source"].max_bias_z,
            "bias z b(C)": s["oracle"].max_bias_z, "bias z none": s["none"].max_bias_z,
            "cover full": s["full"].coverage, "cover b(C)": s["oracle"].coverage,
            "cover source": s["source"].coverage,
        }
    return rows


def _plr_arm(learner, folds: int = 3):
    def run(d):
        est = PartiallyLinearBackdoor(learner, n_folds=folds)
        est.fit(d["treatment"], d["outcome"], d["confounder"])
        return est.effect_, est.stderr_
    return run


def nonlinear_table(ns: list[int], reps: int, d_c: int = 20, rank: int = 2) -> dict[str, dict]:
    """Backdoor through a nonlinear bottleneck b(C) = (B C)^2: which adjustments recover the effect."""
    sc = nonlinear_backdoor_scenario(d_c=d_c, rank=rank, seed=SEED + 1)
    arms = {
        "OLS on (T, C)": lambda d: adjusted_effect(d["treatment"], d["outcome"], d["confounder"]),
        "linear bottleneck (RRR)": _plr_arm(ReducedRankBottleneck(whiten=False)),
        f"neural k = {rank - 1}": _plr_arm(NeuralBottleneck(rank - 1)),
        f"neural k = {rank}": _plr_arm(NeuralBottleneck(rank)),
        f"neural k = {d_c}": _plr_arm(NeuralBottleneck(d_c)),
        "oracle S": lambda d: adjusted_effect(d["treatment"], d["outcome"], d["bottleneck"]),
    }
    rows = {}
    for n in ns:
        res = monte_carlo(sc, n, reps, arms, seed=SEED + n)
        for name, (est, se) in res.items():
            sm = summarize(est, se, sc.effect)
            rows[f"n = {n}, {name}"] = {
                "n": n, "arm": name, "mean |bias|": sm.mean_abs_bias, "max bias z": sm.max_bias_z,
                "rmse": float(np.sqrt(np.mean((est - sc.effect) ** 2))), "coverage": sm.coverage,
                "mean se / sd": float(np.mean(se) / np.mean(est.std(axis=0, ddof=1))),
            }
    return rows


def _mediation_arm(bottleneck):
    def run(d):
        est = MediationEffect(bottleneck).fit(d["treatment"], d["mediator"], d["outcome"])
        return est.effect_, est.stderr_
    return run


def mediation_table(n: int, dims: list[int], reps: int, rank: int = 2, d_y: int = 5) -> dict[str, dict]:
    """Monte Carlo variance of the indirect effect through all of ``M`` vs through ``b(M)``."""
    rows = {}
    for d_m in dims:
        sc = mediation_scenario(d_m=d_m, d_y=d_y, rank=rank, seed=SEED + d_m)
        res = monte_carlo(sc, n, reps, {"full": _mediation_arm(None), "b": _mediation_arm(sc.bottleneck)},
                          seed=SEED + d_m)
        full, b = summarize(*res["full"], sc.effect), summarize(*res["b"], sc.effect)
        rows[f"d_m = {d_m}"] = {
            "d_m": d_m, "var full": full.variance, "var b(M)": b.variance,
            "ratio MC": b.variance / full.variance,
            "se^2/var full": full.mean_stderr_sq / full.variance,
            "se^2/var b(M)": b.mean_stderr_sq / b.variance,
            "bias z full": full.max_bias_z, "bias z b(M)": b.max_bias_z,
            "cover full": full.coverage, "cover b(M)": b.coverage,
        }
    return rows


def _rel(est: np.ndarray, truth: np.ndarray) -> float:
    return float(np.linalg.norm(est - truth) / np.linalg.norm(truth))


def iv_table(ns: list[int], reps: int) -> dict[str, dict]:
    """Naïve 2SLS rank check and errors of bottleneck 2SLS and OLS, for two IV designs."""
    designs = {"d_z=3 < d_x=30": {}, "d_z=40, b_x rank 4": {"d_z": 40, "first_stage_rank": 4}}
    rows = {}
    for label, kwargs in designs.items():
        sc = iv_scenario(seed=SEED + 2, **kwargs)
        rng = np.random.default_rng(SEED + 7)
        source = sc.scm.sample(3000, rng, interventions={"X": rng.standard_normal((3000, 30))})
        learned = ReducedRankBottleneck().fit(source["X"], source["Y"])
        for n in ns:
            ranks, identified, err_b, err_l, err_ols = [], [], [], [], []
            for _ in range(reps):
                d = sc.sample(n, rng)
                z, x, y = d["instrument"], d["treatment"], d["outcome"]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    naive = TwoStageLeastSquares(on_rank_deficiency="report").fit(z, x, y)
                ranks.append(naive.first_stage_rank_)
                identified.append(naive.identified_)
                err_b.append(_rel(TwoStageLeastSquares(sc.bottleneck).fit(z, x, y).effect_, sc.effect))
                err_l.append(_rel(TwoStageLeastSquares(learned).fit(z, x, y).effect_, sc.effect))
                err_ols.append(_rel(ols(x, y).coef, sc.effect))
            rows[f"{label}, n = {n}"] = {
                "n": n, "naive rank (median)": int(np.median(ranks)), "d_x": 30,
                "naive identified": float(np.mean(identified)), "err 2SLS b(X)": float(np.mean(err_b)),
                "err 2SLS b_hat(X)": float(np.mean(err_l)), "err OLS": float(np.mean(err_ols)),
                "rank b_hat": learned.rank_,
            }
    return rows


def recovery_table(ns: list[int], reps: int, rank: int = 3) -> dict[str, dict]:
    """Rank-rule accuracy and bottleneck alignment versus ``n`` (d_in = 20, d_out = 15)."""
    rows = {}
    for activation in ("linear", "tanh"):
        for n in ns:
            ok_rsc, ok_cv, gaps = [], [], []
            for rep in range(reps):
                sc = mechanism_scenario(20, 15, rank, activation=activation, seed=SEED + rep)
                d = sc.sample(n, np.random.default_rng(SEED + 100 + rep))
                ok_rsc.append(select_rank(d["parents"], d["child"], "rsc").rank == rank)
                ok_cv.append(select_rank(d["parents"], d["child"], "cv").rank == rank)
                est = ReducedRankBottleneck(rank=rank).fit(d["parents"], d["child"])
                gaps.append(1 - bottleneck_alignment(est.bottleneck_, sc.bottleneck).min())
            rows[f"{activation}, n = {n}"] = {
                "n": n, "rank ok (rsc)": float(np.mean(ok_rsc)), "rank ok (cv)": float(np.mean(ok_cv)),
                "1 - min cc (mean)": float(np.mean(gaps)), "1 - min cc (max)": float(np.max(gaps)),
            }
    return rows


def nonlinear_recovery_table(ns: list[int], reps: int, d_c: int = 20, rank: int = 2) -> dict[str, dict]:
    """Is the true nonlinear bottleneck a function of the learned one? (min held-out k-NN R^2 over j)."""
    sc = nonlinear_backdoor_scenario(d_c=d_c, rank=rank, seed=SEED + 1)
    learners = {"R2 neural k = 2": lambda: NeuralBottleneck(rank),
                "R2 neural k = 1": lambda: NeuralBottleneck(rank - 1),
                "R2 linear rank 2": lambda: ReducedRankBottleneck(rank=rank, whiten=False)}
    rows = {}
    for n in ns:
        rng = np.random.default_rng(SEED + 50 + n)
        scores: dict[str, list[float]] = {k: [] for k in learners}
        for _ in range(reps):
            d, test = sc.sample(n, rng), sc.sample(4000, rng)
            for name, make in learners.items():
                fit = make().fit(d["confounder"], np.hstack([d["treatment"], d["outcome"]]))
                scores[name].append(float(nonlinear_alignment(test["bottleneck"],
                                                              fit.transform(test["confounder"])).min()))
        rows[f"n = {n}"] = {"n": n, **{k: float(np.mean(v)) for k, v in scores.items()}}
    return rows


def plot(backdoor: dict[str, dict], mediation: dict[str, dict]) -> None:
    """Variance versus nuisance dimension, Monte Carlo points against theory lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    rows = list(backdoor.values())
    dc = [r["d_c"] for r in rows]
    ax = axes[0]
    ax.plot(dc, [r["theory full"] for r in rows], "-", color="C0", label="theory, adjust C")
    ax.plot(dc, [r["var full"] for r in rows], "o", color="C0", label="Monte Carlo, adjust C")
    ax.plot(dc, [r["theory b(C)"] for r in rows], "-", color="C1", label="theory, adjust b(C)")
    ax.plot(dc, [r["var b(C)"] for r in rows], "s", color="C1", label="Monte Carlo, adjust b(C)")
    ax.plot(dc, [r["var b_hat(C)"] for r in rows], "x", color="C2", label="Monte Carlo, learned in-sample")
    ax.set(xlabel="confounder dimension d_c", ylabel="Var(effect estimate)", yscale="log",
           title="Backdoor adjustment")
    ax.legend(fontsize=7)
    rows = list(mediation.values())
    ax = axes[1]
    dm = [r["d_m"] for r in rows]
    ax.plot(dm, [r["var full"] for r in rows], "o-", label="through M")
    ax.plot(dm, [r["var b(M)"] for r in rows], "s-", label="through b(M)")
    ax.set(xlabel="mediator dimension d_m", ylabel="Var(indirect effect estimate)", yscale="log",
           title="Mediation (scenario redrawn per d_m)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, PLOT, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 20 replicates, fewer settings; prints, writes nothing")
    parser.add_argument("--no-plot", action="store_true", help="skip docs/img/scbm_effects.png")
    ns = parser.parse_args(argv)
    with threadpool_limits(limits=1, user_api="blas"):  # small matrices: threads only add overhead
        return _run(ns)


def _run(ns: argparse.Namespace) -> int:
    reps = 20 if ns.quick else 200
    n_bd, n_med = 200, 200
    start = time.perf_counter()
    timings = {}
    t = time.perf_counter()
    backdoor = backdoor_table(n_bd, [5, 50] if ns.quick else [5, 25, 50, 100, 150], reps)
    timings["backdoor"] = time.perf_counter() - t
    t = time.perf_counter()
    nl_ns, nl_reps = ([1000], 3) if ns.quick else ([1000, 4000], 12)
    nonlinear = nonlinear_table(nl_ns, nl_reps)
    nl_recovery = nonlinear_recovery_table(nl_ns, 2 if ns.quick else 5)
    timings["nonlinear"] = time.perf_counter() - t
    t = time.perf_counter()
    mediation = mediation_table(n_med, [10, 100] if ns.quick else [10, 30, 100, 150], reps)
    timings["mediation"] = time.perf_counter() - t
    t = time.perf_counter()
    iv = iv_table([500, 2000] if ns.quick else [500, 2000, 8000], 5 if ns.quick else 50)
    timings["iv"] = time.perf_counter() - t
    t = time.perf_counter()
    recovery = recovery_table([250, 1000] if ns.quick else [250, 1000, 4000], 5 if ns.quick else 20)
    timings["recovery"] = time.perf_counter() - t
    wall = time.perf_counter() - start
    command = "python -m benchmarks.scbm_effects" + (" --quick" if ns.quick else "")
    md = (f"## SCBM effect estimation (simulated linear SCBMs, known effects)\n\n"
          f"Command: `{command}` — wall time {wall:.1f} s (seed {SEED}).\n\n"
          + _section(f"Backdoor: adjust for C vs its bottleneck b(C) (n = {n_bd}, rank 2, d_y = 5, "
                     f"{reps} replicates)", BACKDOOR_NOTE, backdoor, BACKDOOR_COLS, digits=5)
          + _section(f"Backdoor through a nonlinear bottleneck b(C) = (B C)^2 (d_c = 20, rank 2, "
                     f"{nl_reps} replicates)", NONLINEAR_NOTE, nonlinear, NONLINEAR_COLS, digits=3)
          + _section(f"Recovery of the nonlinear bottleneck ({2 if ns.quick else 5} replicates)",
                     NL_RECOVERY_NOTE, nl_recovery, NL_RECOVERY_COLS, digits=3)
          + _section(f"Mediation: indirect effect through M vs b(M) (n = {n_med}, rank 2, d_y = 5, "
                     f"{reps} replicates)", MEDIATION_NOTE, mediation, MEDIATION_COLS, digits=5)
          + _section("IV: naïve 2SLS vs 2SLS on the bottleneck (d_x = 30, d_y = 10, rank 2, "
                     "hidden confounder)", IV_NOTE, iv, IV_COLS)
          + _section("Bottleneck recovery by reduced-rank regression (d_in = 20, d_out = 15, rank 3)",
                     RECOVERY_NOTE, recovery, RECOVERY_COLS))
    payload = {"command": command, "seed": SEED, "replicates": reps, "wall_time_s": wall,
               "timings_s": timings, "backdoor": backdoor, "nonlinear_backdoor": nonlinear,
               "nonlinear_recovery": nl_recovery,
               "mediation": mediation, "iv": iv, "recovery": recovery}
    print(md)
    if ns.quick:  # a smoke run never overwrites the committed results
        return 0
    js, out = write_results("scbm_effects", payload, md)
    if not ns.no_plot:
        plot(backdoor, mediation)
    print(f"wrote {js} and {out}" + ("" if ns.no_plot else f" and {PLOT}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
