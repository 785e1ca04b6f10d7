"""Stress test of the stability claim: normalised reachability penalty against unnormalised ``exp(S)``.

Run::

    python -m benchmarks.temporal_priors_stress --seeds 4    # the documented run (about 12 minutes)
    python -m benchmarks.temporal_priors_stress --seeds 1    # smoke (part 2 on one dataset per size)

The priors' claim (partial-order temporal discovery) is that a static ``exp(S)`` path-prohibition
penalty is unstable on cyclic summary graphs (repeated walks accumulate) while the
normalised one is not. Two parts:

1. **Penalty on a near-cycle.** A long chain ``0 -> 1 -> ... -> d-1`` of weight ``w``
   and one weak back edge ``d-1 -> 0`` of weight 0.05 (closing a cycle of length
   ``d``), with the prior ``0 < d-1``: the back edge is the violation and the chain is
   true. For ``d`` in {20, 40} and ``w`` from 0.5 to 1000, the table gives the spectral
   radius ``lambda(S)``, the penalty ``P``, its gradient on the back edge and the
   largest gradient on a chain edge, for the normalised resolvent (the default) and
   the unnormalised ``exp(S) - I``. A gradient larger on the true chain than on the
   back edge means the optimiser is pushed to cut true edges.
2. **Learner on d >= 20 SVAR data.** DYNOTEARS (:mod:`causal_ext.temporal.dynotears`)
   with priors on SVAR(2) series with d = 20 and 30 variables, dense graphs with many
   backward lagged edges (cyclic summary graphs), raw scale, n = 1000; 25 % of the
   true orderings as priors. Reported per variant: largest ``lambda(S)`` of the raw
   optimiser output, prior violations before the final pruning, SHD of the summary
   graph, final penalty, whether the augmented Lagrangian ended feasible, function
   evaluations and seconds.

Writes ``benchmarks/results/temporal_priors_stress.{json,md}``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from typing import Any

import numpy as np

from benchmarks.common import write_results
from causal_ext.temporal import DYNOTEARS, sample_order_priors, simulate_svar
from causal_ext.temporal.dynotears import threshold_and_repair
from causal_ext.temporal.graphs import prior_violations, summary_weights, transitive_closure
from causal_ext.temporal.metrics import structure_metrics
from causal_ext.temporal.priors import order_penalty_and_grad, prior_mask

VARIANTS: dict[str, dict[str, Any]] = {
    "normalised resolvent": {"reachability": "resolvent", "margin": 0.1},
    "unnormalised exp": {"reachability": "expm", "margin": None},
}
BACK = 0.05


def near_cycle(d: int, w: float) -> np.ndarray:
    """Chain ``0 -> ... -> d-1`` of weight ``w`` closed into a cycle by a back edge of weight ``BACK``."""
    S = np.zeros((d, d))
    S[np.arange(d - 1), np.arange(1, d)] = w
    S[d - 1, 0] = BACK
    return S


def penalty_rows(dims: list[int], weights: list[float]) -> list[dict[str, Any]]:
    """Part 1: penalty and gradients on the near-cycle for every size, weight and variant."""
    rows = []
    for d in dims:
        mask = prior_mask(np.array([[0, d - 1]]), d)
        chain = (np.arange(d - 1), np.arange(1, d))
        for w in weights:
            S = near_cycle(d, w)
            row: dict[str, Any] = {"d": d, "w": w, "lambda": float(np.max(np.abs(np.linalg.eigvals(S))))}
            for name, v in VARIANTS.items():
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    P, G = order_penalty_and_grad(S, mask, v["reachability"], v["margin"])
                row[name] = {"P": P, "grad_back": float(G[d - 1, 0]),
                             "grad_chain_max": float(np.max(np.abs(G[chain]))),
                             "finite": bool(np.isfinite(P) and np.all(np.isfinite(G)))}
            rows.append(row)
    return rows


def learner_rows(dims: list[int], seeds: int, n: int) -> list[dict[str, Any]]:
    """Part 2: DYNOTEARS with each variant on dense cyclic SVAR(2) data (raw scale)."""
    rows = []
    for d in dims:
        for seed in range(seeds):
            sim = simulate_svar(d, 2, n, seed=seed, w_edges=1.5 * d, a_edges=d, backward_fraction=0.4)
            priors = sample_order_priors(sim.W, sim.A, 0.25, np.random.default_rng(10_000 + seed))
            cyclic = bool(np.any(np.diag(transitive_closure(summary_weights(sim.W, sim.A)))))
            for name, v in VARIANTS.items():
                model = DYNOTEARS(p=2, **v)
                try:
                    model.fit(sim.X, priors)
                except (FloatingPointError, ValueError, np.linalg.LinAlgError) as exc:
                    rows.append({"d": d, "seed": seed, "variant": name,
                                 "error": f"{type(exc).__name__}: {exc}"})
                    continue
                S_raw = summary_weights(model.W_raw_, model.A_raw_)
                W0, A0, _, _ = threshold_and_repair(model.W_raw_, model.A_raw_, model.w_threshold,
                                                    model.a_threshold, np.zeros((0, 2), dtype=int))
                m = structure_metrics(sim.W, sim.A, model.W_, model.A_, priors)
                last = model.history_[-1]
                rows.append({
                    "d": d, "seed": seed, "variant": name, "n_priors": len(priors), "true_cyclic": cyclic,
                    "lambda_raw": float(np.max(np.abs(np.linalg.eigvals(S_raw)))),
                    "violations_before_pruning": len(prior_violations(summary_weights(W0, A0), priors)),
                    "pruned_edges": len(model.pruned_edges_), "shd_summary": m["shd_summary"],
                    "f1_summary": m["f1_summary"], "penalty": model.order_penalty_, "h": model.h_,
                    "rho_p": last["rho_p"], "feasible": bool(model.order_penalty_ <= model.p_tol),
                    "n_outer": model.n_outer_, "n_evals": model.n_evals_, "fit_s": model.fit_seconds_})
                print({k: round(x, 4) if isinstance(x, float) else x for k, x in rows[-1].items()},
                      flush=True)
    return rows


def markdown(pen: list[dict[str, Any]], learn: list[dict[str, Any]], command: str, wall: float) -> str:
    """Both tables."""
    lines = ["## Temporal priors: stability of the normalised penalty against unnormalised exp(S)", "",
             f"Command: `{command}` (wall time {wall:.0f} s).", "",
             f"### Penalty on a near-cycle (chain of weight w, back edge {BACK}, prior 0 < d-1)", "",
             "| d | w | λ(S) | resolvent P | resolvent ∂P/∂back | resolvent max ∂P/∂chain | exp P | "
             "exp ∂P/∂back | exp max ∂P/∂chain |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in pen:
        a, b = r["normalised resolvent"], r["unnormalised exp"]
        lines.append(f"| {r['d']} | {r['w']:g} | {r['lambda']:.2f} | {a['P']:.3g} | {a['grad_back']:.3g} | "
                     f"{a['grad_chain_max']:.3g} | {b['P']:.3g} | {b['grad_back']:.3g} | "
                     f"{b['grad_chain_max']:.3g} |")
    lines += ["", "### DYNOTEARS with priors on dense cyclic SVAR(2) data (raw scale)", "",
              "| d | seed | variant | priors | λ(S) of raw output | violations before pruning | pruned | "
              "SHD summary | F1 summary | final P | feasible | evals | s |",
              "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in learn:
        if "error" in r:
            lines.append(f"| {r['d']} | {r['seed']} | {r['variant']} | | | error: {r['error']} |"
                         + " |" * 7)
            continue
        lines.append(f"| {r['d']} | {r['seed']} | {r['variant']} | {r['n_priors']} | {r['lambda_raw']:.2f} | "
                     f"{r['violations_before_pruning']} | {r['pruned_edges']} | {r['shd_summary']} | "
                     f"{r['f1_summary']:.3f} | {r['penalty']:.2g} | {'yes' if r['feasible'] else 'no'} | "
                     f"{r['n_evals']} | {r['fit_s']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2, help="datasets per size in part 2")
    parser.add_argument("--dims", type=int, nargs="+", default=[20, 30], help="variables in part 2")
    parser.add_argument("--n", type=int, default=1000)
    ns = parser.parse_args(argv)
    if ns.seeds < 1 or min(ns.dims) < 20:
        parser.error("--seeds must be >= 1 and every --dims value >= 20 (the stress case is about d >= 20)")
    start = time.perf_counter()
    pen = penalty_rows([20, 40], [0.5, 1, 2, 5, 10, 15, 20, 50, 100, 1000])
    learn = learner_rows(ns.dims, ns.seeds, ns.n)
    wall = time.perf_counter() - start
    command = "python -m benchmarks.temporal_priors_stress"
    command += "" if ns.seeds == 2 else f" --seeds {ns.seeds}"
    md = markdown(pen, learn, command, wall)
    js, out = write_results("temporal_priors_stress", {"command": command, "seeds": list(range(ns.seeds)),
                                                       "dims": ns.dims, "n": ns.n, "back_edge": BACK,
                                                       "wall_seconds": wall, "penalty": pen,
                                                       "learner": learn}, md)
    print(md)
    print(f"wrote {js} and {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
