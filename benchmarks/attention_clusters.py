"""Two-cluster behaviour of causal-attention dynamics: phase diagram over lambda_max, and GQA layers.

Run::

    python -m benchmarks.attention_clusters            # full run (a few minutes on one core)
    python -m benchmarks.attention_clusters --quick    # smoke run: tiny batches, prints only, writes nothing
    python -m benchmarks.attention_clusters --plot-only  # redraw docs/img/attention_phase.png from the JSON

What is measured (all from :mod:`causal_ext.attention_dynamics`):

* **Phase diagram (ODE).** ``V_s = U diag(s - g) U^T`` with a random orthogonal ``U`` and fixed gaps
  ``g = linspace(0, 1.6, d)``, so ``lambda_max(V_s) = s`` sweeps from negative to positive with eigenvectors
  and gaps unchanged (``V_s = V_0 + s I``). ``Q = K = I``, ``beta`` in {1, 4}, ``d = 5``, ``n = 12`` tokens,
  many uniform random initialisations per ``s``, integrated to ``t = horizon`` (Dormand-Prince 5(4),
  ``rtol = 1e-7``, ``atol = 1e-9``, renormalisation onto the sphere as drift correction only). Per ``s``:
  the fraction of runs whose tokens all lie within 0.05 rad of ``+-u_1`` (*aligned*, the theorem's limit),
  the fraction aligned with **both** signs present (*two clusters*), the mean number of single-linkage
  clusters (angular threshold 0.05 rad), the fraction converged (final largest token speed < 1e-4).
* **Dimension deduction.** ``d = 16``, ``n = 16``: the mean share of the tokens in the top-1 / top-2
  eigen-directions of ``V`` and in the top-2 principal directions of the token cloud, over time, for
  ``lambda_max = +0.5`` and ``-0.5``.
* **Time-dependent parameters.** ``V(t) = V_s + a sin(t) I`` (``lambda_max(t) = s + a sin t``) and a
  time-varying temperature ``Q(t) = (1 + 0.5 sin(t/3)) I``.
* **GQA layers.** A ``recframe.models.layers.CausalSelfAttention`` with ``dim = 16, n_heads = 4,
  n_kv_heads = 2`` applied repeatedly (projected Euler step ``h = 0.25`` then renormalisation, biases
  zeroed), with a planted effective value matrix ``V_eff = U_8 diag(s - g_8) U_8^T`` of rank 8 (all GQA
  allows) so ``lambda_max(V_eff) = max(s, 0)``; queries/keys either as initialised by PyTorch (near-uniform
  attention) or planted at ``qk_beta = 4``. Plus default-initialised GQA layers (``16/4/2`` and ``64/8/2``,
  ``h = 1``, i.e. the real residual update, then renormalisation): their own ``lambda_max(V_eff)``, whether
  the top eigenvalue is real, alignment with its eigenvector, clusters, and the top-2 principal share.

Writes ``benchmarks/results/attention_clusters.{json,md}`` and ``docs/img/attention_phase.png``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from benchmarks.common import RESULTS, save_figure, write_results
from causal_ext.attention_dynamics import (
    CausalAttentionFlow,
    principal_fraction,
    subspace_fraction,
    top_eigendirections,
    two_cluster_verdict,
    uniform_sphere,
)
from causal_ext.attention_dynamics.gqa import GQALayerDynamics, plant_value_spectrum
from recframe.models.layers import CausalSelfAttention

PLOT = Path(__file__).resolve().parent.parent / "docs" / "img" / "attention_phase.png"
ANGLE_TOL = THRESHOLD = 0.05
SPEED_TOL = 1e-4


def orthogonal(d: int, seed: int) -> np.ndarray:
    """A random ``[d, d]`` orthogonal matrix (QR of a Gaussian)."""
    return np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))[0]


def value_family(U: np.ndarray, s: float) -> np.ndarray:
    """``V_s = U diag(s - linspace(0, 1.6, d)) U^T``: top eigenvalue ``s``, eigenvector ``U[:, 0]``."""
    return U @ np.diag(s - np.linspace(0.0, 1.6, U.shape[0])) @ U.T


def summarise(final: np.ndarray, speed: np.ndarray, u: np.ndarray) -> dict[str, float]:
    """Fractions aligned / two clusters / converged, and cluster counts, over a batch of final states."""
    vs = [two_cluster_verdict(x, u, ANGLE_TOL, THRESHOLD) for x in final]
    return {"aligned": float(np.mean([v.aligned for v in vs])),
            "two_clusters": float(np.mean([v.two_clusters for v in vs])),
            "n_clusters": float(np.mean([v.n_clusters for v in vs])),
            "n_clusters_median": float(np.median([v.n_clusters for v in vs])),
            "converged": float(np.mean(speed < SPEED_TOL)),
            "speed_median": float(np.median(speed)),
            "pca2": float(principal_fraction(final, 2).mean())}


def phase_diagram(args: argparse.Namespace, U: np.ndarray, X0: torch.Tensor) -> list[dict[str, Any]]:
    """The ODE sweep over ``s = lambda_max`` for each ``beta``."""
    rows = []
    for beta in tqdm(args.betas, desc="phase diagram (beta)"):
        for s in args.s_values:
            t0 = time.perf_counter()
            flow = CausalAttentionFlow(value_family(U, s), beta=beta, horizon=args.horizon, n_save=2,
                                       speed_tol=SPEED_TOL).fit(X0)
            rows.append({"beta": beta, "lambda_max": s, **summarise(flow.final_, flow.speed_, U[:, 0]),
                         "steps": flow.n_steps_, "max_drift": flow.max_drift_,
                         "seconds": time.perf_counter() - t0})
    return rows


def dimension_deduction(args: argparse.Namespace) -> dict[str, Any]:
    """Shares in the top eigen-directions and top principal directions over time (``d = 16``)."""
    d = args.dd_dim
    U = orthogonal(d, args.seed + 1)
    X0 = uniform_sphere(args.dd_inits, args.dd_tokens, d, seed=args.seed + 2)
    n_save = int(args.horizon) + 1
    out: dict[str, Any] = {"d": d, "n": args.dd_tokens, "inits": args.dd_inits}
    for s in (0.5, -0.5):
        flow = CausalAttentionFlow(value_family(U, s), horizon=args.horizon, n_save=n_save,
                                   speed_tol=SPEED_TOL).fit(X0)
        tr = flow.trajectory_
        out[f"{s:+.1f}"] = {
            "times": flow.times_.tolist(),
            "top1_eig": subspace_fraction(tr, U[:, :1]).mean(-1).round(5).tolist(),
            "top2_eig": subspace_fraction(tr, U[:, :2]).mean(-1).round(5).tolist(),
            "top2_pca": principal_fraction(tr, 2).mean(-1).round(5).tolist(),
            **summarise(flow.final_, flow.speed_, U[:, 0]),
        }
        if s > 0:  # run 0's tokens on (u1, u2), [S, n, 2], for the plot
            out[f"{s:+.1f}"]["example_projection"] = (tr[:, 0] @ U[:, :2]).round(4).tolist()
    return out


def time_dependent(args: argparse.Namespace, U: np.ndarray, X0: torch.Tensor) -> list[dict[str, Any]]:
    """Time-dependent ``V(t)`` and ``Q(t)``: the eigenvectors stay fixed, so ``u_1`` is still the target."""
    d = U.shape[0]
    cases = [
        ("V(t) = V_0.5 + 0.3 sin(t) I", lambda t: value_family(U, 0.5) + 0.3 * np.sin(t) * np.eye(d), None,
         "[0.2, 0.8]"),
        ("V(t) = V_-0.5 + 0.3 sin(t) I", lambda t: value_family(U, -0.5) + 0.3 * np.sin(t) * np.eye(d), None,
         "[-0.8, -0.2]"),
        ("V(t) = V_0.1 + 0.5 sin(t) I", lambda t: value_family(U, 0.1) + 0.5 * np.sin(t) * np.eye(d), None,
         "[-0.4, 0.6]"),
        ("V = V_0.5, Q(t) = (1 + 0.5 sin(t/3)) I", value_family(U, 0.5),
         lambda t: (1 + 0.5 * np.sin(t / 3)) * np.eye(d), "0.5"),
    ]
    rows = []
    for name, V, Q, lam in tqdm(cases, desc="time-dependent"):
        flow = CausalAttentionFlow(V, Q=Q, horizon=args.horizon, n_save=2, speed_tol=SPEED_TOL).fit(X0)
        rows.append({"case": name, "lambda_max(t)": lam, **summarise(flow.final_, flow.speed_, U[:, 0])})
    return rows


def gqa_planted(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Planted-spectrum GQA layers (dim 16, 4 query heads, 2 key/value heads) over the same ``s`` sweep."""
    D, H, G = 16, 4, 2
    r = G * D // H
    U = orthogonal(D, args.seed + 3)
    X0 = uniform_sphere(args.gqa_inits, args.tokens, D, seed=args.seed + 4)
    n_steps = int(round(args.horizon / args.gqa_step))
    rows = []
    for qk in tqdm([None, 4.0], desc="GQA planted (qk)"):
        for s in args.s_values:
            torch.manual_seed(args.seed)
            layer = plant_value_spectrum(CausalSelfAttention(D, H, 0.0, n_kv_heads=G),
                                         s - np.linspace(0.0, 1.6, r), U[:, :r], qk_beta=qk)
            run = GQALayerDynamics(n_steps=n_steps, step=args.gqa_step, n_save=2, speed_tol=SPEED_TOL)
            run.fit(layer, X0)
            rows.append({"qk": "PyTorch init" if qk is None else f"planted, qk_beta={qk:g}", "s": s,
                         "lambda_max": run.lambda_max_, **summarise(run.final_, run.speed_, U[:, 0])})
    return rows


def gqa_default(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Default-initialised GQA layers (biases zeroed), iterated with the real residual step ``h = 1``."""
    rows = []
    configs = [(16, 4, 2), (64, 8, 2)]
    for D, H, G in tqdm(configs, desc="GQA default init"):
        X0 = uniform_sphere(args.gqa_inits, args.tokens, D, seed=args.seed + 5)
        for seed in range(args.gqa_layers):
            torch.manual_seed(seed)
            layer = CausalSelfAttention(D, H, 0.0, n_kv_heads=G)
            run = GQALayerDynamics(n_steps=args.gqa_default_steps, step=1.0, n_save=2, speed_tol=SPEED_TOL)
            run.fit(layer, X0)
            w, P = top_eigendirections(run.value_matrix_, 1)
            real_top = P.shape[1] == 1
            row = {"dim": D, "n_heads": H, "n_kv_heads": G, "layer_seed": seed, "lambda_max": run.lambda_max_,
                   "top_eig_imag": float(np.abs(w[0].imag)), "top_real": real_top,
                   "plane_share": float(subspace_fraction(run.final_, P).mean()),
                   **summarise(run.final_, run.speed_, P[:, 0])}
            if not real_top:  # a complex pair: "aligned with an eigenvector" does not apply
                row["aligned"] = row["two_clusters"] = float("nan")
            rows.append(row)
    return rows


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        x = 0.0 if abs(x) < 1e-12 else x
        return "—" if np.isnan(x) else f"{x:.3g}" if abs(x) < 1e-2 and x != 0 else f"{x:.2f}"
    return str(x)


def table(rows: list[dict[str, Any]], cols: list[str]) -> list[str]:
    """Markdown table of ``cols`` over ``rows``."""
    lines = ["| " + " | ".join(cols) + " |", "|" + "---:|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(r[c]) for c in cols) + " |" for r in rows]
    return lines


def markdown(payload: dict[str, Any]) -> str:
    """All tables of the run."""
    a = payload["settings"]
    ph_cols = ["beta", "lambda_max", "aligned", "two_clusters", "n_clusters", "converged", "speed_median"]
    lines = [f"Command: `{payload['command']}`", "",
             f"**Phase diagram (ODE)**: d={a['d']}, n={a['tokens']} tokens, {a['inits']} random "
             f"initialisations per row, Q=K=I, V_s = U diag(s - linspace(0, 1.6, d)) U^T, horizon "
             f"t={a['horizon']:g} (Dormand-Prince 5(4), rtol=1e-7, atol=1e-9). aligned: all tokens within "
             "0.05 rad of ±u1; two_clusters: aligned with both signs present; n_clusters: single-linkage "
             "clusters at 0.05 rad; converged: final largest token speed < 1e-4.", ""]
    lines += table(payload["phase"], ph_cols)
    dd = payload["dimension_deduction"]
    lines += ["", f"**Dimension deduction**: d={dd['d']}, n={dd['n']}, {dd['inits']} initialisations; "
              "mean share of the tokens in the top-1 / top-2 eigen-directions of V and in the top-2 "
              "principal directions of the token cloud.", "",
              "| lambda_max | t | top-1 eig | top-2 eig | top-2 PCA |",
              "|---:|---:|---:|---:|---:|"]
    for key in ("+0.5", "-0.5"):
        r = dd[key]
        for t in (0, 1, 2, 5, 10, 20, 50, 100, 200):
            if t <= r["times"][-1]:
                i = int(np.argmin(np.abs(np.asarray(r["times"]) - t)))
                lines.append(f"| {key} | {r['times'][i]:g} | {r['top1_eig'][i]:.3f} | "
                             f"{r['top2_eig'][i]:.3f} | {r['top2_pca'][i]:.3f} |")
    lines += ["", "**Time-dependent parameters** (d, n, initialisations and horizon as in the phase "
              "diagram, beta=1):", ""]
    lines += table(payload["time_dependent"], ["case", "lambda_max(t)", "aligned", "two_clusters",
                                               "n_clusters", "converged"])
    lines += ["", f"**GQA layers, planted V_eff** (`CausalSelfAttention(16, n_heads=4, n_kv_heads=2)`, "
              f"V_eff of rank 8, {a['gqa_inits']} initialisations of n={a['tokens']} tokens, projected Euler "
              f"step h={a['gqa_step']:g} then renormalisation, {int(round(a['horizon'] / a['gqa_step']))} "
              "applications; s is the top planted eigenvalue, lambda_max(V_eff) = max(s, 0)):", ""]
    lines += table(payload["gqa_planted"], ["qk", "s", "lambda_max", "aligned", "two_clusters", "n_clusters",
                                            "converged", "pca2"])
    lines += ["", "**GQA layers, PyTorch default initialisation** (biases zeroed, h=1: the residual "
              f"update, then renormalisation; {a['gqa_default_steps']} applications). top_real: the top "
              "eigenvalue of V_eff is real (else a complex pair with imaginary part top_eig_imag); "
              "plane_share: mean share of the final tokens in the top eigen-direction (or the pair's plane); "
              "pca2: top-2 principal share.", ""]
    lines += table(payload["gqa_default"], ["dim", "n_heads", "n_kv_heads", "layer_seed", "lambda_max",
                                            "top_real", "top_eig_imag", "aligned", "two_clusters",
                                            "n_clusters", "converged", "plane_share", "pca2"])
    return "\n".join(lines) + "\n"


def plot(payload: dict[str, Any]) -> None:
    """Phase diagram, cluster counts, dimension deduction, and one run projected on (u1, u2)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(18, 4.2))
    ax = axes[0]
    for beta, color in zip(payload["settings"]["betas"], ["C0", "C1", "C4"]):
        rows = [r for r in payload["phase"] if r["beta"] == beta]
        lam = [r["lambda_max"] for r in rows]
        ax.plot(lam, [r["aligned"] for r in rows], "o-", color=color, label=f"ODE β={beta:g}: aligned ±u1")
        ax.plot(lam, [r["two_clusters"] for r in rows], "s--", color=color,
                label=f"ODE β={beta:g}: both signs")
    rows = [r for r in payload["gqa_planted"] if r["qk"] != "PyTorch init"]
    ax.plot([r["s"] for r in rows], [r["aligned"] for r in rows], "^-", color="C2",
            label="GQA layer: aligned")
    ax.plot([r["s"] for r in rows], [r["two_clusters"] for r in rows], "v--", color="C2",
            label="GQA layer: both signs")
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel("λ_max(V)  (GQA: top planted eigenvalue s)")
    ax.set_ylabel("fraction of initialisations")
    ax.set_title("two-cluster limit vs λ_max")
    ax.legend(fontsize=7)
    ax = axes[1]
    for beta, color in zip(payload["settings"]["betas"], ["C0", "C1", "C4"]):
        rows = [r for r in payload["phase"] if r["beta"] == beta]
        ax.plot([r["lambda_max"] for r in rows], [r["n_clusters"] for r in rows], "o-", color=color,
                label=f"ODE β={beta:g}")
    ax.plot([r["s"] for r in payload["gqa_planted"] if r["qk"] != "PyTorch init"],
            [r["n_clusters"] for r in payload["gqa_planted"] if r["qk"] != "PyTorch init"], "^-", color="C2",
            label="GQA layer")
    ax.axvline(0, color="grey", lw=0.8)
    ax.set_xlabel("λ_max(V)")
    ax.set_ylabel(f"mean clusters (n = {payload['settings']['tokens']} tokens)")
    ax.set_title("clusters at the horizon")
    ax.legend(fontsize=7)
    ax = axes[2]
    dd = payload["dimension_deduction"]
    for key, style in (("+0.5", "-"), ("-0.5", ":")):
        r = dd[key]
        t = np.asarray(r["times"])[1:]
        ax.plot(t, r["top1_eig"][1:], style, color="C0", label=f"λ_max={key}: top-1 eig")
        ax.plot(t, r["top2_eig"][1:], style, color="C1", label=f"λ_max={key}: top-2 eig")
        ax.plot(t, r["top2_pca"][1:], style, color="C3", label=f"λ_max={key}: top-2 PCA")
    ax.set_xscale("log")
    ax.set_xlabel("t")
    ax.set_ylabel("mean share of |x|²")
    ax.set_title(f"dimension deduction (d={dd['d']})")
    ax.legend(fontsize=7)
    ax = axes[3]
    proj = np.asarray(dd["+0.5"]["example_projection"])  # [S, n, 2]
    for k in range(proj.shape[1]):
        ax.plot(proj[:, k, 0], proj[:, k, 1], lw=0.8)
        ax.plot(proj[-1, k, 0], proj[-1, k, 1], "ko", ms=3)
    ax.add_patch(plt.Circle((0, 0), 1, fill=False, color="grey", lw=0.5))
    ax.set_aspect("equal")
    ax.set_xlabel("⟨x, u1⟩")
    ax.set_ylabel("⟨x, u2⟩")
    ax.set_title(f"one run, λ_max=+0.5, d={dd['d']}: tokens on (u1, u2)")
    fig.tight_layout()
    save_figure(fig, PLOT, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: tiny batches and horizon; prints the tables, writes no files")
    parser.add_argument("--inits", type=int, default=128, help="random initialisations per phase-diagram row")
    parser.add_argument("--tokens", type=int, default=12)
    parser.add_argument("--d", type=int, default=5)
    parser.add_argument("--horizon", type=float, default=200.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--plot-only", action="store_true", help="redraw the plot from the existing JSON")
    args = parser.parse_args(argv)
    if args.plot_only:
        plot(json.loads((RESULTS / "attention_clusters.json").read_text()))
        print(f"wrote {PLOT}")
        return 0
    args.betas = [1.0, 4.0]
    args.s_values = [-1.0, -0.75, -0.5, -0.25, -0.1, 0.0, 0.1, 0.25, 0.5, 0.75, 1.0]
    args.dd_dim, args.dd_tokens, args.dd_inits = 16, 16, 64
    args.gqa_inits, args.gqa_step, args.gqa_layers, args.gqa_default_steps = 64, 0.25, 4, 2000
    if args.quick:
        args.inits, args.horizon, args.no_plot = 8, 20.0, True
        args.s_values = [-0.5, 0.5]
        args.dd_inits, args.gqa_inits, args.gqa_layers, args.gqa_default_steps = 4, 4, 1, 50
    torch.set_num_threads(1)
    U = orthogonal(args.d, args.seed)
    X0 = uniform_sphere(args.inits, args.tokens, args.d, seed=args.seed)
    started = time.perf_counter()
    payload: dict[str, Any] = {
        "command": "python -m benchmarks.attention_clusters" + (" --quick" if args.quick else ""),
        "seed": args.seed,
        "settings": {"d": args.d, "tokens": args.tokens, "inits": args.inits, "horizon": args.horizon,
                     "betas": args.betas, "s_values": args.s_values, "angle_tol": ANGLE_TOL,
                     "cluster_threshold": THRESHOLD, "speed_tol": SPEED_TOL, "rtol": 1e-7, "atol": 1e-9,
                     "gqa_inits": args.gqa_inits, "gqa_step": args.gqa_step,
                     "gqa_default_steps": args.gqa_default_steps},
    }
    payload["phase"] = phase_diagram(args, U, X0)
    payload["dimension_deduction"] = dimension_deduction(args)
    payload["time_dependent"] = time_dependent(args, U, X0)
    payload["gqa_planted"] = gqa_planted(args)
    payload["gqa_default"] = gqa_default(args)
    payload["total_seconds"] = time.perf_counter() - started
    md = markdown(payload)
    if not args.quick:
        js, out = write_results("attention_clusters", payload, md)
        print(f"wrote {js} and {out}")
    if not args.no_plot:
        plot(payload)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
