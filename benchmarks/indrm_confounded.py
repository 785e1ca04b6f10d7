"""IndRM, RESIT and FCI under hidden confounding among the candidate parents: parent recovery over many seeds.

Run from the repository root::

    python -m benchmarks.indrm_confounded                 # 10 seeds x 2 settings (9 min, shared 2 cores)
    python -m benchmarks.indrm_confounded --seeds 2       # smoke run (prints, writes nothing)
    python -m benchmarks.indrm_confounded --indrm-only --seeds 10 --n 2000   # IndRM alone at n = 2000

IndRM's distinguishing claim is that it finds the parents of a target ``Y`` under
an additive-noise model for ``Y`` alone, with hidden confounding allowed among the
*other* variables. The simulation (one random nonlinear SCM per seed; ``H1, H2``
hidden, everything else observed; ``s`` the confounding strength)::

    H1, H2 ~ N(0, 1)                                (hidden)
    X1 = s f1(H1) + N1          X3 = s f3(H1) + N3  (X1, X3 confounded by H1)
    X2 = s f2(H2) + N2          X4 = s f4(H2) + g4(X3) + N4   (X2, X4 confounded by H2)
    Y  = g1(X1) + g2(X2) + N_Y                       (parents {X1, X2}; no H enters Y)
    X5 = g5(Y) + N5             X6 = g6(Y) + g64(X4) + N6     (children of Y)

Every ``f`` and ``g`` is a random ``a tanh(b x) + c x`` (``|a|`` in [1, 2], ``b`` in
[0.5, 2], ``c`` in [-0.5, 0.5], random signs); noises are Gaussian with standard
deviation drawn in [0.3, 0.6] (Y's 0.4). With ``s = 0`` there is no hidden
confounding (a control); with ``s = 1.5`` the non-parents X3 and X4 are strongly
dependent on the parents through latent variables, so every method that assumes
causal sufficiency over the observed variables works outside its assumptions.

Methods, each given the 7 observed variables (n rows):

* IndRM (:class:`causal_ext.parents.IndRM`), package defaults (spline regressor,
  5-fold cross-fitting, HSIC gamma test at alpha 0.05, exhaustive search over the
  6 candidates). Parents: ``parents_``; ``identified_`` is reported. A second row,
  "IndRM minus reversible", drops from ``parents_`` the members its own reverse
  check flags (``reversible_``: variables that fit as well as children of Y) — the
  reading of IndRM's output its docstring asks for when ``identified_`` is False.
* RESIT (Peters et al. 2014), lingam 1.13.0 in its own venv (lingam pins
  scipy<=1.13.1, the project has a newer scipy): random forest of depth 4, lingam's
  pruning level 0.01 — the settings of :mod:`benchmarks.indrm_sachs` — but 30 trees
  instead of 100 (``--resit-trees``; 100 took over a minute per data set on the
  shared 2-core machine). Parents of Y: row Y of its adjacency matrix.
* FCI (causal-learn), which allows latent confounders: Fisher-z test (the only one
  affordable on 40 data sets here; it is linear, so it sees the monotone part of
  the dependences only) and the randomized conditional independence test RCIT
  (nonlinear), both at alpha 0.05. FCI returns a PAG; a *definite* parent is an
  edge ``X -> Y`` (tail at X), a *possible* parent also counts ``X o-> Y``.

Scores per data set, against the true parents {X1, X2}: exact recovery (found set
== true set), precision, recall, and the share of data sets in which a confounded
non-parent (X3 or X4) or a child (X5 or X6) is returned as a parent. Writes
``benchmarks/results/indrm_confounded.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from benchmarks.common import write_results
from benchmarks.indrm_sachs import LINGAM_REQUIREMENT, PEER_SCRIPT, precision_recall
from benchmarks.peer_env import peer_python, run_peer
from causal_ext.parents import IndRM

TARGET = "Y"
TRUE_PARENTS = frozenset({"X1", "X2"})
CONFOUNDED = frozenset({"X3", "X4"})
CHILDREN = frozenset({"X5", "X6"})
COLUMNS = ["X1", "X2", "X3", "X4", "Y", "X5", "X6"]
STRENGTHS = (0.0, 1.5)


def _mechanism(rng: np.random.Generator):
    """A random ``a tanh(b x) + c x`` (see the module docstring)."""
    a = rng.uniform(1.0, 2.0) * rng.choice([-1.0, 1.0])
    b = rng.uniform(0.5, 2.0)
    c = rng.uniform(-0.5, 0.5)
    return lambda x: a * np.tanh(b * x) + c * x


def simulate(n: int, strength: float, seed: int) -> pd.DataFrame:
    """One data set of the confounded SCM (observed columns only; module docstring)."""
    rng = np.random.default_rng(seed)
    f = {k: _mechanism(rng) for k in ("f1", "f2", "f3", "f4", "g1", "g2", "g4", "g5", "g6", "g64")}
    sd = {k: rng.uniform(0.3, 0.6) for k in ("X1", "X2", "X3", "X4", "X5", "X6")}

    def noise(name: str) -> np.ndarray:
        return (0.4 if name == TARGET else sd[name]) * rng.standard_normal(n)

    h1, h2 = rng.standard_normal(n), rng.standard_normal(n)
    x1 = strength * f["f1"](h1) + noise("X1")
    x2 = strength * f["f2"](h2) + noise("X2")
    x3 = strength * f["f3"](h1) + noise("X3")
    x4 = strength * f["f4"](h2) + f["g4"](x3) + noise("X4")
    y = f["g1"](x1) + f["g2"](x2) + noise(TARGET)
    x5 = f["g5"](y) + noise("X5")
    x6 = f["g6"](y) + f["g64"](x4) + noise("X6")
    return pd.DataFrame({"X1": x1, "X2": x2, "X3": x3, "X4": x4, "Y": y, "X5": x5, "X6": x6})[COLUMNS]


def run_indrm(df: pd.DataFrame, seed: int) -> dict[str, Any]:
    """IndRM's parents of Y among the six other columns (package defaults)."""
    cands = [c for c in df.columns if c != TARGET]
    model = IndRM(random_state=seed).fit(df[cands], df[TARGET].to_numpy())
    names = model.feature_names_in_
    reversible = [names[i] for i in model.reversible_]
    return {"parents": list(model.parent_names_), "identified": bool(model.identified_),
            "all_rejected": bool(model.all_rejected_), "reversible": reversible,
            "competing_sets": [[names[i] for i in s] for s in model.competing_sets_],
            "parents_not_reversible": [p for p in model.parent_names_ if p not in reversible]}


def run_resit(python: Path, df: pd.DataFrame, seed: int, trees: int) -> dict[str, Any]:
    """RESIT (lingam peer venv) on all observed columns; Y's parents from its adjacency row."""
    with tempfile.TemporaryDirectory(prefix="indrm-confounded-") as tmp:
        path = Path(tmp) / "data.csv"
        df.to_csv(path, index=False)
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        res = run_peer(python, PEER_SCRIPT, [str(path), "--seed", str(seed), "--n-estimators", str(trees)],
                       timeout=900, env=env)
    names, adj = res["names"], np.asarray(res["adjacency"])
    row = names.index(TARGET)
    return {"parents": [names[j] for j in np.flatnonzero(adj[row])], "lingam_version": res["lingam_version"]}


def run_fci(df: pd.DataFrame, test: str, alpha: float) -> dict[str, Any]:
    """causal-learn FCI: definite (``X -> Y``) and possible (also ``X o-> Y``) parents of Y."""
    from causallearn.search.ConstraintBased.FCI import fci

    names = list(df.columns)
    t = names.index(TARGET)
    graph, _ = fci(df.to_numpy(), independence_test_method=test, alpha=alpha, show_progress=False,
                   verbose=False)
    g = graph.graph  # g[t, i] == 1: arrowhead at Y on edge i-Y; g[i, t]: mark at i (-1 tail, 2 circle)
    definite = [names[i] for i in range(len(names)) if i != t and g[t, i] == 1 and g[i, t] == -1]
    possible = [names[i] for i in range(len(names)) if i != t and g[t, i] == 1 and g[i, t] in (-1, 2)]
    return {"parents": definite, "possible": possible}


def _score(found: list[str]) -> dict[str, Any]:
    f = set(found)
    precision, recall = precision_recall(f, set(TRUE_PARENTS))
    return {"exact": f == TRUE_PARENTS, "precision": precision, "recall": recall,
            "confounded_fp": bool(f & CONFOUNDED), "child_fp": bool(f & CHILDREN), "n_found": len(f)}


def summarise(scores: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean over data sets (precision over those where something was found)."""
    prec = [s["precision"] for s in scores if s["precision"] is not None]
    return {"datasets": len(scores), "exact": float(np.mean([s["exact"] for s in scores])),
            "precision": float(np.mean(prec)) if prec else None,
            "recall": float(np.mean([s["recall"] for s in scores])),
            "confounded_fp": float(np.mean([s["confounded_fp"] for s in scores])),
            "child_fp": float(np.mean([s["child_fp"] for s in scores])),
            "mean_found": float(np.mean([s["n_found"] for s in scores]))}


METHODS = ("IndRM", "IndRM minus reversible", "RESIT", "FCI fisherz (definite)", "FCI fisherz (possible)",
           "FCI rcit (definite)", "FCI rcit (possible)")


def markdown(results: dict[str, Any], command: str) -> str:
    """One table: rows = setting x method."""
    lines = [
        "## Parents of Y under hidden confounding among the candidates (IndRM vs RESIT vs FCI)",
        "",
        f"Command: `{command}` — {results['seeds']} seeds per setting, n = {results['n']}, wall time "
        f"{results['wall_time_s'] / 60:.1f} min. True parents {{X1, X2}}; X3, X4 are non-parents confounded "
        "with them through hidden H1, H2 when s > 0 (X4 is also a parent of the child X6); X5, X6 are "
        "children of Y. s = confounding strength (0: none).",
        "",
        "| setting | method | exact recovery | precision | recall | non-parent X3/X4 returned "
        "| child X5/X6 returned | mean set size | seconds / data set |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, setting in results["settings"].items():
        for method, summ in setting["summary"].items():
            prec = "-" if summ["precision"] is None else f"{summ['precision']:.2f}"
            run = method.split(" (")[0].replace(" minus reversible", "")
            lines.append(f"| {label} | {method} | {summ['exact']:.2f} | {prec} | {summ['recall']:.2f} "
                         f"| {summ['confounded_fp']:.2f} | {summ['child_fp']:.2f} | {summ['mean_found']:.2f} "
                         f"| {setting['seconds'][run]:.1f} |")
    ident = {label: s["indrm_identified"] for label, s in results["settings"].items()}
    lines += ["", "Shares over data sets; precision averages the data sets where the method returned a "
              "non-empty set. FCI's 'definite' parents are edges X -> Y of its PAG, 'possible' adds X o-> Y. "
              "IndRM reported identified_ = True in " + ", ".join(f"{v:.2f} ({k})" for k, v in ident.items())
              + " of the data sets."]
    return "\n".join(lines) + "\n"


def run_setting(strength: float, seeds: list[int], n: int, python: Path | None, alpha: float,
                trees: int) -> dict[str, Any]:
    """All methods on every seed of one confounding strength (IndRM only when ``python`` is None)."""
    runs = ["IndRM"] if python is None else ["IndRM", "RESIT", "FCI fisherz", "FCI rcit"]
    per_seed, seconds = [], dict.fromkeys(runs, 0.0)
    for seed in seeds:
        df = simulate(n, strength, seed)
        row: dict[str, Any] = {"seed": seed}
        for name in runs:
            t = time.perf_counter()
            if name == "IndRM":
                row[name] = run_indrm(df, seed)
            elif name == "RESIT":
                row[name] = run_resit(python, df, seed, trees)
            else:
                np.random.seed(seed)  # RCIT draws its random features from numpy's global generator
                row[name] = run_fci(df, name.split()[1], alpha)
            seconds[name] += time.perf_counter() - t
        per_seed.append(row)
        print(f"s={strength} seed={seed}: " + "; ".join(f"{m}={sorted(row[m]['parents'])}" for m in runs),
              flush=True)
    found = {m: [r[m]["parents"] for r in per_seed] for m in runs if not m.startswith("FCI")}
    found["IndRM minus reversible"] = [r["IndRM"]["parents_not_reversible"] for r in per_seed]
    for m in runs:
        if m.startswith("FCI"):
            found[f"{m} (definite)"] = [r[m]["parents"] for r in per_seed]
            found[f"{m} (possible)"] = [r[m]["possible"] for r in per_seed]
    summary = {m: summarise([_score(f) for f in found[m]]) for m in METHODS if m in found}
    return {"strength": strength, "per_seed": per_seed, "summary": summary,
            "seconds": {k: v / len(seeds) for k, v in seconds.items()},
            "indrm_identified": float(np.mean([r["IndRM"]["identified"] for r in per_seed]))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10, help="data sets per setting")
    parser.add_argument("--n", type=int, default=500, help="rows per data set")
    parser.add_argument("--alpha", type=float, default=0.05, help="level of IndRM's and FCI's tests")
    parser.add_argument("--resit-trees", type=int, default=30, help="trees of RESIT's random forest")
    parser.add_argument("--indrm-only", action="store_true",
                        help="IndRM alone (e.g. at a larger --n); writes indrm_confounded_indrm_n{N}")
    ns = parser.parse_args(argv)
    python = None if ns.indrm_only else peer_python("lingam", [LINGAM_REQUIREMENT])
    start = time.perf_counter()
    with threadpool_limits(limits=1):
        settings = {f"s = {s}": run_setting(s, list(range(ns.seeds)), ns.n, python, ns.alpha, ns.resit_trees)
                    for s in STRENGTHS}
    wall = time.perf_counter() - start
    flags = [f"--seeds {ns.seeds}", f"--n {ns.n}", f"--alpha {ns.alpha}"]
    flags += ["--indrm-only"] if ns.indrm_only else [f"--resit-trees {ns.resit_trees}"]
    default = (ns.seeds, ns.n, ns.alpha, ns.resit_trees, ns.indrm_only) == (10, 500, 0.05, 30, False)
    command = " ".join(["python -m benchmarks.indrm_confounded", *([] if default else flags)])
    results = {"command": command, "seeds": ns.seeds, "n": ns.n, "alpha": ns.alpha, "wall_time_s": wall,
               "resit_trees": ns.resit_trees, "true_parents": sorted(TRUE_PARENTS),
               "lingam": LINGAM_REQUIREMENT, "settings": settings}
    md = markdown(results, command)
    print(md)
    if ns.seeds < 5:  # a smoke run never overwrites the committed results
        return 0
    js, out = write_results(f"indrm_confounded_indrm_n{ns.n}" if ns.indrm_only else "indrm_confounded",
                            results, md)
    print(f"wrote {js} and {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
