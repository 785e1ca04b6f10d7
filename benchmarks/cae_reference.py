"""Cross-check of our CAE against the official ``causal-abstraction-eval`` package on shared systems.

Run::

    python -m benchmarks.cae_reference             # about a minute on one core
    python -m benchmarks.cae_reference --samples 60 --seeds 1   # smoke run

What the package (1.1.0, import name ``causal_abstraction``) defines: a low-level model
interface (``LowLevelModel.forward_with_interventions``), a high-level SCM (``CausalGraph``),
the coarse-graining map (``CoarseGrainingMap``: cells of micro-variables, ``internal_variables``,
and Phi = everything else), value maps (``ValueMap.abstract`` / ``ground`` with per-label
``Subspace`` specs), samplers (``TopDownSampler`` = CAE_down, ``BottomUpSampler`` = CAE_up,
``CombinedFaithfulnessSampler`` adding the Phi perturbation as one extra intervention target)
and an engine that pools both paths' outcomes per high-level variable and scores them with a
distance (``metric="mse"``: ``tanh`` of the raw pooled MSE, averaged over variables). The
wheel ships *no* benchmark systems (they live in the authors' repository), so "systems both
define" here means: our systems, handed to the package through thin adapters that change
nothing about them (our simulators as its ``LowLevelModel``, our mechanisms as its
``CausalGraph`` equations, our value maps behind its ``ValueMap``, our variable domains as its
sampling ``Subspace`` / ``distribution``). The package then does its own intervention sampling,
grounding, Phi perturbation, path traversal and scoring.

Systems: the deterministic ones whose unmapped-variable perturbation means the same in both
libraries (adder, heat, GRN: the package overwrites Boolean Phi wires with random bits, as our
domains do, and continuous ones with Gaussian noise; our heater domain is uniform on [0, 1],
the package's draw is ``N(0, 1)`` with ``phi_noise_std=1``; both switch the heater on). The
transformer is left out because the package's Phi noise is isotropic in the 6-d residual
stream, while our head domains are the heads' OV images, so the two would test different
claims; the stochastic systems are left out because the package's high-level models are
deterministic unless given per-node noise, which ours express differently.

The checks: for every system, condition and variant (down/up, with/without faithfulness),
(1) *sign*: both CAEs are zero, or both positive (tolerance 1e-9); (2) *ordering*: every pair
of conditions of a system is ordered the same way by both (Kendall concordance, ties counted
as agreeing only when both tie). Writes ``benchmarks/results/cae_reference.{json,md}``.

The package is imported in-process when installed (its pins fit the project environment);
otherwise it runs in its own venv under ``benchmarks/.venvs/`` (:mod:`benchmarks.peer_env`),
with this same file as the peer script.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

REFERENCE = "causal-abstraction-eval==1.1.0"
SYSTEMS = ("adder", "heat", "grn")
VARIANTS = {"CAE_down_nf": ("top_down", False), "CAE_up_nf": ("bottom_up", False),
            "CAE_down": ("top_down", True), "CAE_up": ("bottom_up", True)}
TOL = 1e-9
ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------------- ours
def our_scores(system: str, condition: str, n: int, seed: int) -> dict[str, float]:
    """Our MSE CAE of one condition in the four variants."""
    from causal_ext.abstraction import CausalAbstractionError, systems

    case = systems.build(system, condition)
    out = {}
    for faithful in (False, True):
        est = CausalAbstractionError(n_interventions=n, faithful=faithful, distances=("mse",), max_targets=2,
                                     seed=seed).fit(case.low, case.high, case.abstraction)
        for name, (direction, f) in VARIANTS.items():
            if f == faithful:
                out[name] = est.scores_[direction]["mse"]
    return out


# ------------------------------------------------------------------------------ the package
def _reference_objects(case: Any) -> tuple[Any, ...]:
    """The package's schema, map, value map, low-level and high-level model for one of our cases."""
    import causal_abstraction as ca

    low, high, abst = case.low, case.high, case.abstraction
    probe = np.random.default_rng(0)
    shapes = {v: tuple(low.domain(v).shape) for v in low.variables}
    dtypes = {v: low.domain(v).sample(1, probe).dtype for v in low.variables}
    size = {v: int(np.prod(s)) for v, s in shapes.items()}

    def kind(v: str) -> type:
        if dtypes[v].kind in "iub" and set(np.unique(low.domain(v).sample(64, probe))) <= {0, 1}:
            return bool
        return float

    schema = ca.MicroVariableSchema([ca.Variable(v, shape=(size[v],), dtype=kind(v)) for v in low.variables])
    cg = ca.CoarseGrainingMap(schema, {k: list(c) for k, c in abst.cells.items()},
                              internal_variables=list(abst.internal))

    class DomainSubspace(ca.Subspace):
        """Samples one of our domains (several, concatenated flat) in the package's subspace API."""

        def __init__(self, domains: list[Any]) -> None:
            self.domains = domains
            super().__init__(sum(int(np.prod(d.shape)) for d in domains))

        def sample(self, shape, rng=None):
            rng = rng if rng is not None else np.random.default_rng()
            n = shape[0]
            return np.concatenate([np.asarray(d.sample(n, rng), dtype=float).reshape(n, -1)
                                   for d in self.domains], axis=1)

        def contains(self, x):
            return np.ones(np.atleast_2d(x).shape[0], dtype=bool)

        def volume(self):
            return 1.0

    class Adapter(ca.ValueMap):
        """Our value maps behind the package's per-sample ``abstract`` / ``ground``."""

        def abstract(self, name, micro_values):
            cell = abst.cells[name]
            flat = np.asarray(micro_values, dtype=float).reshape(-1)
            parts, at = [], 0
            for m in cell:
                part = flat[at:at + size[m]].reshape((1, *shapes[m])).astype(dtypes[m])
                parts.append(part)
                at += size[m]
            val = np.asarray(abst.value_maps[name].abstract(parts))[0]
            return val.item() if val.size == 1 else val

        def ground(self, name, label, rng=None):
            rng = rng if rng is not None else np.random.default_rng()
            macro = np.asarray(label)[None, ...]
            parts = abst.value_maps[name].ground(macro, [shapes[m] for m in abst.cells[name]], rng)
            return np.concatenate([np.asarray(p, dtype=float).reshape(-1) for p in parts])

    specs = {k: {0: DomainSubspace([low.domain(m) for m in cell])} for k, cell in abst.cells.items()}
    vm = Adapter(cg, specs)

    class Simulator(ca.LowLevelModel):
        """Our low-level SCM as the package's low-level model."""

        def forward_with_interventions(self, input_state, interventions, rng=None):
            rng = rng if rng is not None else np.random.default_rng()
            batch = max(np.atleast_2d(np.asarray(v)).shape[0] for v in interventions.values())
            do = {}
            for v, x in interventions.items():
                if isinstance(x, list):
                    raise NotImplementedError("partial (index) writes are not used by these systems")
                arr = np.asarray(x).reshape(batch, -1).reshape((batch, *shapes[v]))
                do[v] = arr.astype(dtypes[v]) if dtypes[v].kind in "iub" else arr.astype(float)
            state = low.simulate(do, n=batch, rng=rng)
            return ca.SystemState({v: np.asarray(a, dtype=float).reshape(batch, -1)
                                   for v, a in state.items()})

    hl_dtypes = {v: high.domain(v).sample(1, probe).dtype for v in high.variables}
    graph = ca.CausalGraph()
    for nd in high.nodes:
        for j, out in enumerate(nd.outputs):
            dom = nd.domains[j]
            extra: dict[str, Any] = {}
            values = getattr(dom, "values", None)
            if values is not None and dom.shape == ():
                extra["distribution"] = {v.item(): float(p) for v, p in zip(values, dom.probs)}
            else:
                extra["domain"] = DomainSubspace([dom])
            if nd.fn is None:
                graph.add_variable(out, lambda: None, **extra)
                continue

            def equation(_nd=nd, _j=j, **parents):
                args = [np.asarray(parents[p]).astype(hl_dtypes[p])[None, ...] for p in _nd.parents]
                res = _nd.fn(*args)
                res = res if len(_nd.outputs) > 1 else (res,)
                val = np.asarray(res[_j])[0]
                return val.item() if val.size == 1 else val

            graph.add_variable(out, equation, parents=list(nd.parents), **extra)
    return schema, cg, vm, Simulator(), graph


def reference_scores(system: str, condition: str, n: int, seed: int) -> dict[str, float]:
    """The package's MSE CAE of one of our conditions in the four variants."""
    import logging

    import causal_abstraction as ca

    from causal_ext.abstraction import systems

    case = systems.build(system, condition)
    _, cg, vm, low, graph = _reference_objects(case)
    cfg = ca.EvaluationConfig(metric="mse", seed=seed, phi_noise_std=1.0, logging_level=logging.ERROR)
    engine = ca.EvaluationEngine(graph, low, vm, cg, cfg)
    b = engine.builder
    tasks = [ca.StandardTasks.score(b, sampler=sampler(vm), name=name, include_faithfulness=faithful)
             for name, (sampler, faithful) in {
                 "CAE_down_nf": (ca.TopDownSampler, False), "CAE_up_nf": (ca.BottomUpSampler, False),
                 "CAE_down": (ca.TopDownSampler, True), "CAE_up": (ca.BottomUpSampler, True)}.items()]
    import contextlib
    import io

    with contextlib.redirect_stderr(io.StringIO()):  # the package's tqdm bars
        res = engine.run_tasks(tasks, n_samples=n, batch_size=10, max_interventions=2)
    return {k: float(v) for k, v in res.summary().items()}


def _peer_main(spec: dict[str, Any]) -> None:
    sys.path.insert(0, str(ROOT))
    out = {f"{s}/{c}/{seed}": reference_scores(s, c, spec["samples"], seed)
           for s, c in spec["jobs"] for seed in spec["seeds"]}
    print(json.dumps(out))


# --------------------------------------------------------------------------------- compare
def concordance(a: dict[str, float], b: dict[str, float]) -> float:
    """Share of condition pairs ordered alike by ``a`` and ``b`` (a tie agrees only with a tie)."""
    pairs = list(combinations(sorted(a), 2))
    if not pairs:
        return 1.0

    def order(x: dict[str, float], p: str, q: str) -> int:
        d = x[p] - x[q]
        return 0 if abs(d) <= TOL else (1 if d > 0 else -1)

    return float(np.mean([order(a, p, q) == order(b, p, q) for p, q in pairs]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200, help="interventions per task (both libraries)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--peer-venv", action="store_true",
                        help="run the package in its own venv even when it is importable here")
    parser.add_argument("--peer", default=None, help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.peer is not None:
        _peer_main(json.loads(ns.peer))
        return 0

    start = time.perf_counter()
    from benchmarks.common import write_results
    from causal_ext.abstraction import systems

    jobs = [(s, c) for s in SYSTEMS for c in systems.conditions(s)]
    seeds = list(range(ns.seeds))
    try:
        if ns.peer_venv:
            raise ImportError("--peer-venv")
        import causal_abstraction

        where = f"in-process ({causal_abstraction.__version__})"
        theirs = {f"{s}/{c}/{seed}": reference_scores(s, c, ns.samples, seed)
                  for s, c in jobs for seed in seeds}
    except ImportError:
        from benchmarks.peer_env import peer_python, run_peer

        python = peer_python("cae-eval", [REFERENCE])
        where = f"peer venv ({REFERENCE})"
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        theirs = run_peer(python, Path(__file__), ["--peer", json.dumps(
            {"samples": ns.samples, "seeds": seeds, "jobs": jobs})], timeout=3600, env=env)
    ours = {f"{s}/{c}/{seed}": our_scores(s, c, ns.samples, seed) for s, c in jobs for seed in seeds}

    mean = {lib: {f"{s}/{c}": {v: float(np.mean([res[f"{s}/{c}/{seed}"][v] for seed in seeds]))
                               for v in VARIANTS} for s, c in jobs}
            for lib, res in (("ours", ours), ("reference", theirs))}
    sign = {key: {v: (mean["ours"][key][v] > TOL) == (mean["reference"][key][v] > TOL) for v in VARIANTS}
            for key in mean["ours"]}
    order = {s: {v: concordance({c: mean["ours"][f"{s}/{c}"][v] for c in systems.conditions(s)},
                                {c: mean["reference"][f"{s}/{c}"][v] for c in systems.conditions(s)})
                 for v in VARIANTS} for s in SYSTEMS}
    wall = time.perf_counter() - start
    command = "python -m benchmarks.cae_reference"
    n_sign = sum(x for row in sign.values() for x in row.values())
    lines = ["### CAE against the official causal-abstraction-eval package\n",
             f"Command: `{command}` (wall time {wall:.0f} s; reference run {where}). {ns.samples} "
             f"interventions per task, batch 10 in the package, at most 2 targets, {ns.seeds} seeds (means "
             "shown); MSE distance (ours: squared gap over pooled variance; the package: tanh of the raw "
             "pooled MSE), so values differ in scale and only sign and ordering are compared.", "",
             "| system/condition | " + " | ".join(f"{v} ours | {v} ref" for v in VARIANTS)
             + " | sign agrees |",
             "|---|" + "---:|---:|" * len(VARIANTS) + ":-:|"]
    for key in mean["ours"]:
        cells = [f"{mean['ours'][key][v]:.3g} | {mean['reference'][key][v]:.3g}" for v in VARIANTS]
        lines.append(f"| {key} | " + " | ".join(cells) + f" | {'✓' if all(sign[key].values()) else '✗'} |")
    lines += ["", f"Sign agreement: {n_sign}/{len(sign) * len(VARIANTS)} (condition, variant) cells. "
              "Ordering of conditions within a system (share of condition pairs ordered alike):", "",
              "| system | " + " | ".join(VARIANTS) + " |", "|---|" + "---:|" * len(VARIANTS)]
    for s in SYSTEMS:
        lines.append(f"| {s} | " + " | ".join(f"{order[s][v]:.2f}" for v in VARIANTS) + " |")
    md = "\n".join(lines) + "\n"
    js, out = write_results("cae_reference", {
        "command": command, "reference": REFERENCE, "where": where, "samples": ns.samples, "seeds": seeds,
        "ours": ours, "reference_scores": theirs, "mean": mean, "sign": sign, "ordering": order,
        "wall_seconds": wall}, md)
    print(md)
    print(f"wrote {js} and {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
