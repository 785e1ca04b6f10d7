"""Causal Abstraction Error on six systems with valid and invalid (contrastive) abstractions.

Run::

    python -m benchmarks.cae_systems                 # full run (about two minutes on one core)
    python -m benchmarks.cae_systems --seeds 2 --repeats 4 --no-plot   # smoke run

Systems (:mod:`causal_ext.abstraction.systems`): ripple-carry adder, predator-prey agents vs
Lotka-Volterra, 1-D heat equation coarse-graining, Ising chain with block spins, gene-regulatory
network, compiled transformer circuit; each has a valid explanation and two invalid ones (one that
changes input-output behaviour, and for all but Ising one that only an intervention on an unmapped
variable can expose).

For every system, condition and seed the script fits the CAE with and without the faithfulness
perturbations (both directions, MSE / Jensen-Shannon / MMD, ``--interventions`` sampled
interventions, the system's replicate count), the observational baselines (output correlation,
mutual information, on ``--interventions`` sampled inputs) and interchange-intervention accuracy
(:mod:`causal_ext.abstraction.interchange`, ``--interventions`` base/source pairs per aligned
variable), the standard alignment measure of causal-abstraction work, reported as ``1 - IIA``. A
metric *discriminates* an invalid condition when its score is above the valid condition's on every
seed pair (AUROC = 1 over seeds; ties count half). The convergence study refits the faithful MSE CAE
``--repeats`` times with ``max(ns)`` interventions and re-scores prefixes of ``n`` interventions:
the plot shows how often an ``n``-intervention CAE ranks each invalid condition above the valid one
(independent repeats paired), and the relative error to the largest-``n`` mean.

Writes ``benchmarks/results/cae_systems.{json,md}`` and ``docs/img/cae_convergence.png``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from benchmarks.common import RESULTS, save_figure, write_results
from causal_ext.abstraction import (
    CausalAbstractionError,
    InterchangeInterventionAccuracy,
    ObservationalBaselines,
    convergence_curve,
    systems,
)

PLOT = Path(__file__).resolve().parent.parent / "docs" / "img" / "cae_convergence.png"
DISTANCES = ("mse", "js", "mmd")
NS = (2, 3, 5, 10, 20, 30, 50, 100, 200)
FAMILIES = {  # column key -> (family, label)
    "cae_f_mse": ("causal, faithful", "CAE (MSE)"),
    "cae_f_mse_down": ("causal, faithful", "CAE↓ (MSE)"),
    "cae_f_mse_up": ("causal, faithful", "CAE↑ (MSE)"),
    "cae_f_js": ("causal, faithful", "CAE (JS)"),
    "cae_f_mmd": ("causal, faithful", "CAE (MMD)"),
    "cae_nf_mse": ("causal, no faithfulness", "CAE (MSE)"),
    "cae_nf_js": ("causal, no faithfulness", "CAE (JS)"),
    "cae_nf_mmd": ("causal, no faithfulness", "CAE (MMD)"),
    "corr": ("observational", "1 - output correlation"),
    "mi": ("information-theoretic", "1 - normalised MI"),
    "iia": ("interchange intervention", "1 - IIA"),
}


def run_case(case: systems.Case, seed: int, n: int) -> dict[str, float]:
    """Every metric of one condition for one seed."""
    reps = case.settings.get("n_replicates", 1)
    out: dict[str, float] = {}
    for tag, faithful in (("f", True), ("nf", False)):
        est = CausalAbstractionError(n_interventions=n, faithful=faithful, n_replicates=reps, seed=seed)
        est.fit(case.low, case.high, case.abstraction)
        for d in DISTANCES:
            out[f"cae_{tag}_{d}"] = est.cae_[d]
            out[f"cae_{tag}_{d}_down"] = est.scores_["top_down"][d]
            out[f"cae_{tag}_{d}_up"] = est.scores_["bottom_up"][d]
    base = ObservationalBaselines(n_samples=n, n_replicates=reps, seed=seed).fit(case.low, case.high,
                                                                                   case.abstraction)
    out["corr"] = base.correlation_error_
    out["mi"] = base.mutual_information_error_
    iia = InterchangeInterventionAccuracy(n_pairs=n, n_replicates=reps, seed=seed)
    out["iia"] = 1.0 - iia.fit(case.low, case.high, case.abstraction).iia_
    return out


def auroc(valid: list[float], invalid: list[float]) -> float:
    """P(invalid > valid) over all seed pairs, ties counted half."""
    v, w = np.asarray(valid)[:, None], np.asarray(invalid)[None, :]
    return float(((w > v) + 0.5 * (w == v)).mean())


def discrimination(records: dict[str, dict[str, list[dict[str, float]]]], valid_of: dict[str, str]
                   ) -> dict[str, dict[str, float]]:
    """``{system/condition: {metric: AUROC against the system's valid condition}}`` for invalid conditions."""
    out: dict[str, dict[str, float]] = {}
    for system, conds in records.items():
        ref = conds[valid_of[system]]
        for cond, recs in conds.items():
            if cond in valid_of.values() or systems.build(system, cond).valid:
                continue
            out[f"{system}/{cond}"] = {k: auroc([r[k] for r in ref], [r[k] for r in recs]) for k in FAMILIES}
    return out


def convergence(seed: int, repeats: int, ns: tuple[int, ...]) -> dict[str, Any]:
    """Faithful MSE CAE on prefixes of ``ns`` interventions, per system and condition."""
    out: dict[str, Any] = {}
    for system in tqdm(list(systems.SYSTEMS), desc="convergence"):
        out[system] = {}
        for k, cond in enumerate(systems.conditions(system)):
            case = systems.build(system, cond)
            # a different seed block per condition, so valid and invalid repeats are independent
            curve = convergence_curve(case.low, case.high, case.abstraction, ns, n_repeats=repeats,
                                      seed=seed + 100 * k, n_replicates=case.settings.get("n_replicates", 1))
            out[system][cond] = {"valid": case.valid, **curve.to_dict(),
                                 "relative_error": {r: v.tolist() for r, v in curve.relative_error().items()}}
    return out


def ranking_accuracy(conv: dict[str, Any]) -> dict[str, dict[str, list[float]]]:
    """Per system and invalid condition: share of repeats with invalid CAE above valid CAE, by n."""
    out: dict[str, dict[str, list[float]]] = {}
    for system, conds in conv.items():
        valid = conds["valid"]["values"]
        out[system] = {}
        for cond, c in conds.items():
            if c["valid"]:
                continue
            acc = []
            for i in range(len(c["ns"])):
                pairs = [(np.asarray(c["values"][r][i]) > np.asarray(valid[r][i])).mean()
                         for r in c["values"]]
                acc.append(float(np.mean(pairs)))
            out[system][cond] = acc
    return out


def markdown(summary: dict[str, dict[str, dict[str, float]]], disc: dict[str, dict[str, float]],
             acc: dict[str, dict[str, list[float]]], ns: list[int], header: str) -> str:
    """The benchmark table, the discrimination table and the convergence table."""
    cols = ["cae_f_mse_down", "cae_f_mse_up", "cae_f_js", "cae_f_mmd", "cae_nf_mse", "corr", "mi", "iia"]
    names = ["CAE↓ faithful (MSE)", "CAE↑ faithful (MSE)", "CAE faithful (JS)", "CAE faithful (MMD)",
             "CAE no faithfulness (MSE)", "1 - output corr.", "1 - NMI", "1 - IIA"]
    lines = [header, "", "| system | condition | valid | " + " | ".join(names) + " |",
             "|---|---|:-:|" + "---:|" * len(cols)]
    for key, stats in summary.items():
        system, cond = key.split("/")
        ok = "✓" if systems.build(system, cond).valid else "✗"
        cells = [f"{stats[c]['mean']:.3f} ± {stats[c]['std']:.3f}" for c in cols]
        lines.append(f"| {system} | {cond} | {ok} | " + " | ".join(cells) + " |")
    lines += ["", "Mean ± std over seeds. CAE columns: the mean over directions unless marked ↓ (top-down) "
              "or ↑ (bottom-up); all columns are errors (0 = the explanation matches).", "",
              "**Which metric families discriminate valid from invalid** (AUROC over seed pairs against the "
              "system's valid condition; ✓ = 1.0, i.e. every invalid score above every valid one):", "",
              "| invalid condition | " + " | ".join(f"{FAMILIES[k][1]} [{FAMILIES[k][0]}]" for k in FAMILIES)
              + " |", "|---|" + ":-:|" * len(FAMILIES)]
    for key, row in disc.items():
        lines.append(f"| {key} | " + " | ".join("✓" if row[k] == 1.0 else f"{row[k]:.2f}" for k in FAMILIES)
                     + " |")
    totals = {k: sum(row[k] == 1.0 for row in disc.values()) for k in FAMILIES}
    lines.append("| **discriminated** | " + " | ".join(f"**{totals[k]}/{len(disc)}**" for k in FAMILIES)
                 + " |")
    lines += ["", "**Interventions to converge** (faithful MSE CAE, both directions): share of independent "
              "repeats in which an n-intervention CAE ranks the invalid condition above the valid one.", "",
              "| invalid condition | " + " | ".join(f"n={n}" for n in ns) + " |", "|---|" + "---:|" * len(ns)]
    for system, conds in acc.items():
        for cond, a in conds.items():
            lines.append(f"| {system}/{cond} | " + " | ".join(f"{x:.2f}" for x in a) + " |")
    return "\n".join(lines) + "\n"


def plot(conv: dict[str, Any], acc: dict[str, dict[str, list[float]]]) -> None:
    """Ranking accuracy and relative error of the faithful MSE CAE against the number of interventions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 5.2))
    colours = plt.get_cmap("tab20").colors
    styles = dict(zip(acc, ["-", "--", "-.", ":", "-", "--"]))
    k = 0
    for system, conds in acc.items():
        for cond, a in conds.items():
            ns = conv[system][cond]["ns"]
            kw = {"marker": "o", "ms": 3, "color": colours[(2 * k) % 20 + (k // 10) % 2],
                  "ls": styles[system], "label": f"{system}/{cond}"}
            axes[0].plot(ns, a, **kw)
            rel = conv[system][cond]["relative_error"]
            axes[1].plot(ns, np.mean([rel[r] for r in rel], axis=0), **kw)
            k += 1
    for ax in axes:
        ax.set_xscale("log")
        ax.axvline(30, color="grey", ls="--", lw=1)
        ax.set_xlabel("sampled interventions n")
    axes[0].set_ylabel("P(CAE invalid > CAE valid)")
    axes[0].set_ylim(0.2, 1.03)
    axes[0].set_title("invalid ranked above valid (independent repeats)")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("mean |CAE_n - ref| / ref")
    axes[1].set_title("relative error of the invalid conditions (ref: mean at the largest n)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=7, frameon=False)
    fig.suptitle("Faithful CAE (MSE) against the number of sampled interventions (dashed: n = 30)")
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    save_figure(fig, PLOT, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds per condition for the table")
    parser.add_argument("--interventions", type=int, default=100, help="interventions (and inputs) per fit")
    parser.add_argument("--repeats", type=int, default=16, help="repeats per condition for convergence")
    parser.add_argument("--ns", type=int, nargs="+", default=list(NS), help="prefix sizes for convergence")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--plot-only", action="store_true", help="redraw the plot from the existing JSON")
    ns = parser.parse_args(argv)
    if ns.plot_only:
        payload = json.loads((RESULTS / "cae_systems.json").read_text())
        plot(payload["convergence"], payload["ranking_accuracy"])
        print(f"wrote {PLOT}")
        return 0
    start = time.perf_counter()
    records: dict[str, dict[str, list[dict[str, float]]]] = {}
    jobs = [(s, c) for s in systems.SYSTEMS for c in systems.conditions(s)]
    for system, cond in tqdm(jobs, desc="systems"):
        case = systems.build(system, cond)
        records.setdefault(system, {})[cond] = [run_case(case, seed, ns.interventions)
                                                for seed in range(ns.seeds)]
    summary = {f"{s}/{c}": {k: {"mean": float(np.mean([r[k] for r in recs])),
                                "std": float(np.std([r[k] for r in recs]))} for k in recs[0]}
               for s, conds in records.items() for c, recs in conds.items()}
    disc = discrimination(records, {s: "valid" for s in records})
    conv = convergence(1000, ns.repeats, tuple(ns.ns))
    acc = ranking_accuracy(conv)
    wall = time.perf_counter() - start
    command = "python -m benchmarks.cae_systems"
    header = (f"### Causal Abstraction Error: six systems, valid vs invalid abstractions\n\n"
              f"Command: `{command}` (total wall time {wall:.0f} s on one core). {ns.seeds} seeds per "
              f"condition, {ns.interventions} sampled interventions per direction (and {ns.interventions} "
              f"inputs for the baselines); faithful runs perturb the unmapped variables in half of the "
              f"interventions; at most one non-root high-level variable is intervened on at a time.")
    md = markdown(summary, disc, acc, list(ns.ns), header)
    config = {"seeds": ns.seeds, "interventions": ns.interventions, "repeats": ns.repeats, "ns": ns.ns,
              "phi_prob": 0.5, "max_targets": 1, "convergence_seed": 1000,
              "replicates": {s: systems.build(s).settings.get("n_replicates", 1) for s in systems.SYSTEMS}}
    js, out = write_results("cae_systems", {"command": command, "config": config, "wall_seconds": wall,
                                            "summary": summary, "discrimination": disc, "records": records,
                                            "convergence": conv, "ranking_accuracy": acc}, md)
    if not ns.no_plot:
        plot(conv, acc)
    print(md)
    print(f"wrote {js} and {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
