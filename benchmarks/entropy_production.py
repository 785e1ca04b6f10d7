"""Entropy production as a causal observable: it sees an intervention that endpoint and cumulative ATEs miss.

Run::

    python -m benchmarks.entropy_production            # full run (about a minute on one core)
    python -m benchmarks.entropy_production --quick    # smoke run (fewer paths; prints, writes nothing)

Setting (:mod:`causal_ext.hamiltonian`). Base model: the overdamped 2-D unit oscillator in a heat bath (``V =
|q|^2 / 2``, friction 1, temperature 1), at equilibrium ``N(0, I)``. Intervention ``do(u = w R q)`` with ``R =
[[0, 1], [-1, 0]]``: a circulating, non-conservative control force. It keeps the stationary law ``N(0, I)``
(so from the pre-intervention equilibrium every one-time marginal is unchanged) but breaks detailed balance:
``dx = -B x dt + sqrt(2) dW`` with ``B = [[1, -w], [w, 1]]``, entropy production ``2 w^2``, path KL against
the control ``w^2 / 2`` per unit time. Both arms start from the pre-intervention equilibrium and are
independent samples (a randomised experiment on trajectories). Reported, per ``w``:

* endpoint ATEs (``q_T`` and ``|q_T|^2``), cumulative ATEs (``int q dt``, ``int |q|^2 dt``) and the mean
  displacement ``q_T - q_0``, with Welch 95% intervals;
* entropy production of each arm from the trajectories: path KL between forward and time-reversed paths
  (fitted drift, cross-fitted; and Gaussian transition statistics at lag ``dt``), the TUR lower bound (fixed
  angular current over windows of 1 time unit; optimised linear current over windows of 0.05), each with a
  path-bootstrap standard error, and the analytic value;
* the Girsanov path KL between the interventional path laws (closed-form integrand along the paths, and the
  mean log likelihood ratio of the data).

Two supporting tables: the underdamped Hamiltonian system (positions and momenta; momentum-flip estimator)
with the same circulating control against friction, with its overdamped limit; and a nonlinear double well
(planted non-linear force) where the drift basis has to contain the force.

Writes ``benchmarks/results/entropy_production.{json,md}`` and ``docs/img/entropy_production.png``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from benchmarks.common import RESULTS, save_figure, write_results
from causal_ext.hamiltonian import (
    HamiltonianCausalModel,
    LangevinBath,
    PathKLEntropyProduction,
    PolynomialBasis,
    PotentialHamiltonian,
    QuadraticHamiltonian,
    Trajectories,
    TransitionKLEntropyProduction,
    TURBound,
    cumulative_ate,
    difference_in_means,
    endpoint_ate,
    path_kl,
    path_log_likelihood_ratio,
    rotational,
)
from causal_ext.hamiltonian.effects import EffectEstimate, mean_estimate

PLOT = Path(__file__).resolve().parent.parent / "docs" / "img" / "entropy_production.png"
ANGULAR = np.array([[0.0, -1.0], [1.0, 0.0]])  # d(q) = (-q2, q1): J = int q1 o dq2 - q2 o dq1
# circulating control on the underdamped unit oscillator is stable only for kappa < gamma (sqrt(k / m) = 1)
UNDERDAMPED_KAPPA, UNDERDAMPED_GAMMAS = 0.5, [1.0, 2.0, 5.0, 10.0, 20.0]
ATE_NAMES = ["endpoint q1", "endpoint q2", "endpoint ‖q‖²", "cumulative ∫q1 dt", "cumulative ∫q2 dt",
             "cumulative ∫‖q‖² dt", "displacement q1", "displacement q2"]  # no '|': they go into md tables


def _with_square(x: np.ndarray) -> np.ndarray:
    return np.concatenate([x, (x**2).sum(-1, keepdims=True)], axis=-1)


def _effect_dict(e: EffectEstimate, names: list[str]) -> dict[str, dict[str, float]]:
    covers = e.covers(0.0)
    return {n: {"estimate": float(e.estimate[i]), "stderr": float(e.stderr[i]), "ci_low": float(e.ci_low[i]),
                "ci_high": float(e.ci_high[i]), "covers_0": bool(covers[i])} for i, n in enumerate(names)}


def ates(treated: Trajectories, control: Trajectories) -> dict[str, dict[str, float]]:
    """Endpoint, cumulative and displacement ATEs with 95% Welch intervals."""
    end = endpoint_ate(treated, control, _with_square)
    cum = cumulative_ate(treated, control, _with_square)
    disp = difference_in_means(treated.q[:, -1] - treated.q[:, 0], control.q[:, -1] - control.q[:, 0])
    out = _effect_dict(end, ATE_NAMES[:3])
    out.update(_effect_dict(cum, ATE_NAMES[3:6]))
    out.update(_effect_dict(disp, ATE_NAMES[6:]))
    return out


def entropy_estimates(traj: Trajectories, n_boot: int) -> dict[str, dict[str, float]]:
    """Every trajectory estimator of the entropy production rate of one arm (estimate, stderr, interval)."""
    out: dict[str, dict[str, float]] = {}
    for name, est in [("path_kl_drift", PathKLEntropyProduction(n_boot=n_boot)),
                      ("transition_kl", TransitionKLEntropyProduction(n_boot=n_boot))]:
        est.fit(traj)
        out[name] = {"estimate": est.entropy_production_, "stderr": est.stderr_, "ci_low": est.ci_[0],
                     "ci_high": est.ci_[1]}
    for name, tur in [("tur_angular_w1", TURBound(1.0, current=ANGULAR, n_boot=n_boot)),
                      ("tur_optimised_w0.05", TURBound(0.05, n_boot=n_boot))]:
        tur.fit(traj)
        out[name] = {"estimate": tur.bound_, "stderr": tur.stderr_, "ci_low": tur.ci_[0],
                     "ci_high": tur.ci_[1]}
    return out


def current_field(traj: Trajectories, edges: np.ndarray) -> dict[str, list]:
    """Binned mean Stratonovich velocity ``E[dq/dt | q]`` (the probability current over the density) and the
    occupation of each bin: what distinguishes the arms is the current, not the density."""
    mid = 0.5 * (traj.q[:, 1:] + traj.q[:, :-1]).reshape(-1, 2)
    vel = (np.diff(traj.q, axis=1) / traj.dt).reshape(-1, 2)
    ix = np.digitize(mid[:, 0], edges) - 1
    iy = np.digitize(mid[:, 1], edges) - 1
    n = len(edges) - 1
    keep = (ix >= 0) & (ix < n) & (iy >= 0) & (iy < n)
    flat = ix[keep] * n + iy[keep]
    count = np.bincount(flat, minlength=n * n).astype(float)
    mean = np.stack([np.bincount(flat, vel[keep, k], minlength=n * n) for k in range(2)], axis=1)
    mean /= np.maximum(count, 1.0)[:, None]
    density = (count / count.sum()).reshape(n, n)
    return {"velocity": mean.reshape(n, n, 2).tolist(), "density": density.tolist()}


def demo(omegas: list[float], n_paths: int, duration: float, dt: float, n_boot: int,
         seed: int, headline: float) -> dict[str, Any]:
    """The circulating-control experiment for every strength ``w`` against one control arm."""
    base = HamiltonianCausalModel(QuadraticHamiltonian(stiffness=1.0, dim=2), LangevinBath(1.0, 1.0),
                                  regime="overdamped")
    control = base.simulate(n_paths, duration, dt, init="equilibrium", seed=seed)
    control_ep = entropy_estimates(control, n_boot)
    edges = np.linspace(-2.4, 2.4, 9)
    fields = {"edges": edges.tolist(), "control": current_field(control, edges)}
    rows = []
    for i, w in enumerate(tqdm(omegas, desc="circulating control w")):
        model = base.do(rotational(w))
        treated = model.simulate(n_paths, duration, dt, init="equilibrium", seed=seed + 1 + i)
        kl = path_kl(model, base, treated)
        llr = mean_estimate(path_log_likelihood_ratio(model, base, treated))
        if w == headline:
            fields["treated"] = current_field(treated, edges)
        rows.append({
            "omega": w,
            "analytic_entropy_production": model.entropy_production_rate(),
            "analytic_path_kl_rate": w**2 / 2,
            "ates": ates(treated, control),
            "entropy_production": entropy_estimates(treated, n_boot),
            "path_kl_rate": {"estimate": float(kl.estimate) / duration,
                             "stderr": float(kl.stderr) / duration},
            "log_likelihood_ratio_rate": {"estimate": float(llr.estimate) / duration,
                                          "stderr": float(llr.stderr) / duration},
        })
    return {"control_entropy_production": control_ep, "rows": rows, "current_field": fields}


def underdamped(gammas: list[float], kappa: float, n_paths: int, duration: float, dt: float,
                n_boot: int, seed: int) -> list[dict[str, float]]:
    """Hamiltonian (q, p) oscillator with the circulating control against friction; overdamped limit."""
    H = QuadraticHamiltonian(stiffness=1.0, mass=1.0, dim=2)
    rows = []
    for i, gamma in enumerate(tqdm(gammas, desc="underdamped gamma")):
        model = HamiltonianCausalModel(H, LangevinBath(gamma, 1.0), rotational(kappa), "underdamped")
        traj = model.simulate(n_paths, duration, dt, seed=seed + i)
        est = PathKLEntropyProduction(n_boot=n_boot).fit(traj)
        limit = HamiltonianCausalModel(H, LangevinBath(gamma, 1.0), rotational(kappa), "overdamped")
        rows.append({"gamma": gamma, "analytic": model.entropy_production_rate(),
                     "estimate": est.entropy_production_, "stderr": est.stderr_,
                     "fitted_friction": float(np.trace(est.friction_) / 2),
                     "overdamped_limit": limit.entropy_production_rate()})
    return rows


def double_well(n_paths: int, duration: float, dt: float, n_boot: int, seed: int) -> dict[str, Any]:
    """Planted nonlinear force: V = sum (q_i^2 - 1)^2 with the circulating control w = 1."""
    H = PotentialHamiltonian(lambda q: ((q**2 - 1) ** 2).sum(-1), lambda q: 4 * q * (q**2 - 1), dim=2)
    model = HamiltonianCausalModel(H, LangevinBath(1.0, 1.0), rotational(1.0), "overdamped")
    traj = model.simulate(n_paths, duration, dt, init=np.zeros(2), burn_in=5.0, seed=seed)
    mid = 0.5 * (traj.q[:, 1:] + traj.q[:, :-1])
    force = model.force(mid.reshape(-1, 2), 0.0).reshape(mid.shape)
    per_path = (force * np.diff(traj.q, axis=1)).sum(axis=(1, 2)) / traj.duration  # D = I
    heat = mean_estimate(per_path)
    out: dict[str, Any] = {"model_based_heat": {"estimate": float(heat.estimate),
                                                "stderr": float(heat.stderr)}}
    for degree in (1, 3):
        est = PathKLEntropyProduction(basis=PolynomialBasis(degree), n_boot=n_boot).fit(traj)
        out[f"path_kl_degree_{degree}"] = {"estimate": est.entropy_production_, "stderr": est.stderr_}
    tk = TransitionKLEntropyProduction(n_boot=n_boot).fit(traj)
    out["transition_kl"] = {"estimate": tk.entropy_production_, "stderr": tk.stderr_}
    tur = TURBound(dt, n_boot=n_boot).fit(traj)
    out["tur_optimised_linear"] = {"estimate": tur.bound_, "stderr": tur.stderr_}
    return out


def _pm(d: dict[str, float], fmt: str = ".3f") -> str:
    return f"{d['estimate']:{fmt}} ± {d['stderr']:{fmt}}"


def markdown(res: dict[str, Any], header: str, headline: float) -> str:
    demo_res = res["demo"]
    row = next(r for r in demo_res["rows"] if r["omega"] == headline)
    lines = [header, "", f"**Headline, w = {headline}** (effect = treated minus control, 95% interval):", "",
             "| quantity | effect ± SE | 95% interval | covers 0 |", "|---|---:|---:|:---:|"]
    for name in ATE_NAMES:
        a = row["ates"][name]
        lines.append(f"| ATE {name} | {a['estimate']:+.3f} ± {a['stderr']:.3f} | [{a['ci_low']:+.3f}, "
                     f"{a['ci_high']:+.3f}] | {'yes' if a['covers_0'] else 'no'} |")
    ctrl, trt = demo_res["control_entropy_production"], row["entropy_production"]
    labels = {"path_kl_drift": "entropy production, path KL (fitted drift)",
              "transition_kl": "entropy production, path KL (transition statistics)",
              "tur_angular_w1": "TUR bound, angular current, window 1",
              "tur_optimised_w0.05": "TUR bound, optimised current, window 0.05"}
    for key, label in labels.items():
        eff = trt[key]["estimate"] - ctrl[key]["estimate"]
        se = float(np.hypot(trt[key]["stderr"], ctrl[key]["stderr"]))
        lines.append(f"| {label} | {eff:+.3f} ± {se:.3f} | [{eff - 1.96 * se:+.3f}, "
                     f"{eff + 1.96 * se:+.3f}] | {'yes' if abs(eff) <= 1.96 * se else 'no'} |")
    lines.append(f"| path KL rate KL(P_do(w) ‖ P_do(0)) / t, Girsanov | {_pm(row['path_kl_rate'])} | "
                 f"(analytic {row['analytic_path_kl_rate']:.3f}) | no |")
    lines.append(f"| same, mean log-likelihood ratio of the data | {_pm(row['log_likelihood_ratio_rate'])} "
                 "| | no |")
    analytic = row["analytic_entropy_production"]
    lines += ["", f"Analytic entropy production: control 0, treated {analytic:.3f}. ATE intervals: Welch "
              "(normal). Entropy-production SEs: path bootstrap (whole paths resampled); the effect SE "
              "combines the two arms' bootstrap SEs.", "",
              "**Sweep over the control strength w** (entropy production per unit time of the treated arm, "
              "estimate ± bootstrap SE; ATE column: largest |estimate / SE| over the 8 ATEs):", "",
              "| w | analytic σ = 2w² | path KL (drift) | path KL (transitions) | TUR angular (τ=1) | "
              "TUR optimised (τ=0.05) | max ATE z | ATEs covering 0 | path KL rate (analytic w²/2) |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in demo_res["rows"]:
        ep = r["entropy_production"]
        z = max(abs(a["estimate"]) / a["stderr"] for a in r["ates"].values())
        cover = sum(a["covers_0"] for a in r["ates"].values())
        lines.append(f"| {r['omega']:.2f} | {r['analytic_entropy_production']:.3f} | "
                     f"{_pm(ep['path_kl_drift'])} | {_pm(ep['transition_kl'])} | "
                     f"{_pm(ep['tur_angular_w1'])} | "
                     f"{_pm(ep['tur_optimised_w0.05'])} | {z:.2f} | {cover}/8 | "
                     f"{_pm(r['path_kl_rate'])} ({r['analytic_path_kl_rate']:.3f}) |")
    c = demo_res["control_entropy_production"]
    lines += ["", f"Control arm (w = 0, equilibrium): path KL (drift) {_pm(c['path_kl_drift'], '.4f')}, "
              f"path KL (transitions) {_pm(c['transition_kl'], '.4f')}, TUR angular "
              f"{_pm(c['tur_angular_w1'], '.4f')}, TUR optimised {_pm(c['tur_optimised_w0.05'], '.4f')}.", "",
              "**Hamiltonian (underdamped) system**: 2-D oscillator with momenta, circulating control κ = "
              f"{res['underdamped_kappa']}, T = 1, against friction γ; estimator with momentum reversal "
              "(fitted drift of dp on [1, q, p]):", "",
              "| γ | analytic σ | estimate ± SE | relative error | fitted friction | "
              "overdamped limit 2κ²/γ |",
              "|---:|---:|---:|---:|---:|---:|"]
    for r in res["underdamped"]:
        lines.append(f"| {r['gamma']:.1f} | {r['analytic']:.4f} | {r['estimate']:.4f} ± {r['stderr']:.4f} | "
                     f"{100 * (r['estimate'] / r['analytic'] - 1):+.1f}% | {r['fitted_friction']:.3f} | "
                     f"{r['overdamped_limit']:.4f} |")
    dw = res["double_well"]
    lines += ["", "**Nonlinear (planted double-well force, w = 1)**: model-based Stratonovich heat with the "
              f"true force {_pm(dw['model_based_heat'])}; path KL with a cubic drift basis "
              f"{_pm(dw['path_kl_degree_3'])}; "
              f"with the linear basis {_pm(dw['path_kl_degree_1'])}; transition statistics "
              f"{_pm(dw['transition_kl'])}; optimised linear-current TUR {_pm(dw['tur_optimised_linear'])}."]
    return "\n".join(lines) + "\n"


def plot(res: dict[str, Any]) -> None:
    """ATEs vs w (all ~0), entropy production vs w (2 w^2), underdamped sigma vs friction."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["demo"]["rows"]
    w = np.array([r["omega"] for r in rows])
    fig, axes = plt.subplots(1, 4, figsize=(20, 4.4), gridspec_kw={"width_ratios": [0.8, 1, 1, 1]})
    ax = axes[0]
    field = res["demo"]["current_field"]
    edges = np.array(field["edges"])
    centres = 0.5 * (edges[1:] + edges[:-1])
    X, Y = np.meshgrid(centres, centres, indexing="ij")
    ax.contourf(X, Y, np.array(field["treated"]["density"]), levels=8, cmap="Greys", alpha=0.5)
    for arm, colour, label in [("treated", "tab:red", f"treated do(w R q), w = {res['headline']}"),
                               ("control", "tab:blue", "control do(0): arrows ~ 0")]:
        v = np.array(field[arm]["velocity"])
        ax.quiver(X, Y, v[..., 0], v[..., 1], color=colour, angles="xy", scale_units="xy", scale=2.5,
                  width=0.008, label=label)
    ax.set_xlim(edges[0], edges[-1])
    ax.set_ylim(edges[0], edges[-1])
    ax.set_aspect("equal")
    ax.set_title("Same density N(0, I), different mean velocity E[dq/dt | q]", fontsize=9)
    ax.set_xlabel("q1")
    ax.set_ylabel("q2")
    ax.legend(fontsize=7, loc="lower left")
    ax = axes[1]
    shown = [ATE_NAMES[i] for i in (0, 2, 3, 5, 6)]
    for j, name in enumerate(shown):
        est = np.array([r["ates"][name]["estimate"] for r in rows])
        half = np.array([r["ates"][name]["ci_high"] - r["ates"][name]["estimate"] for r in rows])
        ax.errorbar(w + (j - 2) * 0.02, est, yerr=half, fmt="o", ms=3, capsize=2, label=name)
    ep = np.array([r["entropy_production"]["path_kl_drift"]["estimate"] for r in rows])
    ax.plot(w, ep, "k--", lw=1, label="entropy production (path KL)")
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("circulating control strength w")
    ax.set_title("ATEs (95% CI) stay at 0; entropy production does not")
    ax.legend(fontsize=7)
    ax = axes[2]
    grid = np.linspace(0, w.max(), 100)
    ax.plot(grid, 2 * grid**2, "k-", lw=1, label="analytic 2w²")
    styles = [("path_kl_drift", "o", "path KL, fitted drift"), ("transition_kl", "s", "path KL, transitions"),
              ("tur_optimised_w0.05", "^", "TUR, optimised current (τ=0.05)"),
              ("tur_angular_w1", "v", "TUR, angular current (τ=1)")]
    for j, (key, marker, label) in enumerate(styles):
        est = np.array([r["entropy_production"][key]["estimate"] for r in rows])
        se = np.array([r["entropy_production"][key]["stderr"] for r in rows])
        ax.errorbar(w + (j - 1.5) * 0.015, est, yerr=1.96 * se, fmt=marker, ms=4, capsize=2, label=label)
    ax.set_xlabel("w")
    ax.set_ylabel("entropy production rate")
    ax.set_title("Estimated from trajectories")
    ax.legend(fontsize=7)
    ax = axes[3]
    ud = res["underdamped"]
    g = np.array([r["gamma"] for r in ud])
    ax.plot(g, [r["analytic"] for r in ud], "k-", lw=1, label="analytic (underdamped)")
    ax.errorbar(g, [r["estimate"] for r in ud], yerr=[1.96 * r["stderr"] for r in ud], fmt="o", ms=4,
                capsize=2, label="path KL with momentum flip")
    ax.plot(g, [r["overdamped_limit"] for r in ud], "k:", lw=1, label="overdamped limit 2κ²/γ")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("friction γ")
    ax.set_title(f"Hamiltonian system, κ = {res['underdamped_kappa']}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, PLOT, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--omegas", type=float, nargs="+", default=[0.25, 0.5, 1.0, 1.5, 2.0])
    parser.add_argument("--headline", type=float, default=1.0)
    parser.add_argument("--paths", type=int, default=2000)
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--dt", type=float, default=0.01)
    parser.add_argument("--boot", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot-only", action="store_true", help="redraw the plot from the existing JSON")
    parser.add_argument("--quick", action="store_true",
                        help="500 paths, 50 bootstrap replicates; write nothing")
    ns = parser.parse_args(argv)
    if ns.headline not in ns.omegas:
        parser.error("--headline must be one of --omegas")
    if ns.plot_only:
        plot(json.loads((RESULTS / "entropy_production.json").read_text()))
        print(f"wrote {PLOT}")
        return 0
    if ns.quick:
        ns.paths, ns.boot = 500, 50
    start = time.perf_counter()
    with threadpool_limits(limits=1):
        res: dict[str, Any] = {"demo": demo(ns.omegas, ns.paths, ns.duration, ns.dt, ns.boot, ns.seed,
                                            ns.headline)}
        res["headline"] = ns.headline
        res["underdamped_kappa"] = UNDERDAMPED_KAPPA
        res["underdamped"] = underdamped(UNDERDAMPED_GAMMAS, UNDERDAMPED_KAPPA, ns.paths,
                                         2 * ns.duration, ns.dt, ns.boot, ns.seed + 100)
        res["double_well"] = double_well(ns.paths // 4, 3 * ns.duration, ns.dt / 2, ns.boot, ns.seed + 200)
    wall = time.perf_counter() - start
    command = "python -m benchmarks.entropy_production" + (" --quick" if ns.quick else "")
    header = (f"### Hamiltonian causal models: entropy production sees what ATEs miss\n\n"
              f"Command: `{command}` (wall time {wall:.0f} s, one thread). Overdamped 2-D unit oscillator "
              f"(friction 1, T = 1) at equilibrium; intervention do(u = w R q), a circulating force; "
              f"{ns.paths} independent paths per arm, t = {ns.duration:g}, dt = {ns.dt:g}, both arms started "
              f"from the pre-intervention equilibrium N(0, I); seed {ns.seed}.")
    md = markdown(res, header, ns.headline)
    print(md)
    if ns.quick:
        return 0
    config = {k: v for k, v in vars(ns).items() if k != "quick"}
    js, out = write_results("entropy_production", {"command": command, "config": config, "wall_seconds": wall,
                                                   **res}, md)
    plot(res)
    print(f"wrote {js}, {out} and {PLOT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
