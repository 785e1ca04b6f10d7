"""Interchange-intervention accuracy (IIA): the standard alignment measure of causal-abstraction work.

Geiger et al. ("Causal Abstractions of Neural Networks", NeurIPS 2021; "Inducing Causal Structure for
Interpretable Neural Networks", ICML 2022) judge an alignment between a high-level variable ``H`` and a set
of low-level variables (here ``H``'s cell) by **interchange interventions**: for a *base* input ``b`` and a
*source* input ``s``,

* the high-level model runs on ``b`` with ``H`` set to the value it takes on ``s``:
  ``y_H = High(b; do(H = H(s)))``;
* the low-level model runs on ``b`` with every variable of ``H``'s cell set to the values they take on
  ``s`` (the activations are copied, no value map is involved): ``y_L = Low(b; do(cell(H) = cell(H)(s)))``,
  and its outputs are abstracted by their value maps;
* the pair counts as a success when ``y_L`` equals ``y_H`` on every output variable.

``IIA = mean over pairs and aligned variables of 1[y_L == y_H]``. Choices the papers leave to the setting,
made here as the field does:

* Aligned variables: the high-level variables that are neither roots (inputs) nor sinks (outputs), the
  intermediate variables an explanation is about. A model without any is scored on its roots, where an
  interchange is a change of input and IIA is plain behavioural accuracy (reported as ``aligned="inputs"``).
* Inputs: every high-level root drawn from its domain and grounded into its cell by the value map, for base
  and source independently (as :func:`~causal_ext.abstraction.sampling.sample_interventions` draws inputs).
* Equality: discrete outputs must match exactly; continuous outputs are compared after the shared
  discretisation of the Jensen-Shannon distance (:func:`~causal_ext.abstraction.distances.discretize`,
  ``bins`` equal-width bins over the pooled values, per value dimension), the usual way to score a regression
  output by accuracy.
* Stochastic models: each pair runs ``n_replicates`` times on each path and the replicate means are compared.

IIA never perturbs the unmapped variables and copies raw activations, so it cannot see an explanation that
omits a causal pathway (the faithfulness failures of the CAE benchmark) nor a wrong value map on an
intermediate variable; it does see interventions on the aligned cells that the explanation gets wrong.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from causal_ext.abstraction.abstraction import Abstraction
from causal_ext.abstraction.distances import discretize
from causal_ext.abstraction.scm import SCM


def _tile(a: np.ndarray, r: int) -> np.ndarray:
    return np.repeat(np.asarray(a), r, axis=0)


def _replicate_mean(a: np.ndarray, n: int, r: int) -> np.ndarray:
    a = np.asarray(a, dtype=float).reshape(n, r, -1)
    return a.mean(axis=1)


def outputs_agree(high: np.ndarray, low: np.ndarray, bins: int = 10, max_categories: int = 32) -> np.ndarray:
    """Per-row agreement ``[n]`` of two output arrays ``[n, d]`` (exact if discrete, else shared bins)."""
    ok = np.ones(high.shape[0], dtype=bool)
    for j in range(high.shape[1]):
        ch, cl, _ = discretize(high[:, j], low[:, j], bins, max_categories)
        ok &= ch == cl
    return ok


class InterchangeInterventionAccuracy:
    """IIA of an abstraction (module docstring for the definition and choices).

    Args:
        n_pairs: (base, source) input pairs per aligned variable.
        n_replicates: runs per pair on each path (stochastic models).
        variables: the aligned high-level variables (default: the intermediate ones, else the roots).
        outputs: compared high-level variables (default: its non-root sinks).
        bins: bins per value dimension for continuous outputs.
        seed: seed of the draws.

    Attributes (after ``fit``):
        iia_: mean accuracy over aligned variables.
        per_variable_: ``{variable: accuracy}``.
        aligned_: ``"intermediate"`` or ``"inputs"`` (which variables were interchanged).
    """

    def __init__(self, n_pairs: int = 100, n_replicates: int = 1, variables: Sequence[str] | None = None,
                 outputs: Sequence[str] | None = None, bins: int = 10, seed: int = 0) -> None:
        self.n_pairs = n_pairs
        self.n_replicates = n_replicates
        self.variables = variables
        self.outputs = outputs
        self.bins = bins
        self.seed = seed

    def _aligned(self, high: SCM) -> tuple[list[str], str]:
        if self.variables is not None:
            bad = [v for v in self.variables if v not in high.variables]
            if bad:
                raise ValueError(f"variables: {bad} are not high-level variables of {high.name}.")
            return list(self.variables), "given"
        inner = [v for v in high.variables if v not in high.roots and v not in high.sinks]
        return (inner, "intermediate") if inner else (list(high.roots), "inputs")

    def fit(self, low: SCM, high: SCM, abstraction: Abstraction) -> InterchangeInterventionAccuracy:
        """Run the interchange interventions and score them."""
        if self.n_pairs < 1 or self.n_replicates < 1:
            raise ValueError(f"n_pairs={self.n_pairs} and n_replicates={self.n_replicates} must be >= 1.")
        abstraction.check(low, high)
        aligned, self.aligned_ = self._aligned(high)
        outputs = list(self.outputs) if self.outputs else [v for v in high.sinks if v not in high.roots]
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 17]))
        n, r = self.n_pairs, self.n_replicates
        self.per_variable_: dict[str, float] = {}
        for var in aligned:
            base_high, base_low = self._inputs(low, high, abstraction, rng)
            src_high, src_low = self._inputs(low, high, abstraction, rng)
            source_high = high.simulate(do=src_high, rng=rng)
            source_low = low.simulate(do=src_low, rng=rng)
            high_do = {**base_high, var: source_high[var]}
            low_do = {**base_low, **{m: source_low[m] for m in abstraction.cells[var]}}
            y_high = high.simulate(do=high_do, rng=rng)
            y_low = low.simulate(do=low_do, rng=rng)
            ok = np.ones(n, dtype=bool)
            for out in outputs:
                h = _replicate_mean(y_high[out], n, r)
                lo = _replicate_mean(abstraction.abstract(out, y_low), n, r)
                ok &= outputs_agree(h, lo, self.bins)
            self.per_variable_[var] = float(ok.mean())
        self.iia_ = float(np.mean(list(self.per_variable_.values())))
        return self

    def _inputs(self, low: SCM, high: SCM, abstraction: Abstraction, rng: np.random.Generator
                ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Root values ``[n * r, ...]`` of both models: drawn at the high level, grounded into the cells."""
        n, r = self.n_pairs, self.n_replicates
        high_do: dict[str, np.ndarray] = {}
        low_do: dict[str, np.ndarray] = {}
        for root in high.roots:
            macro = _tile(high.domain(root).sample(n, rng), r)
            high_do[root] = macro
            low_do.update(abstraction.ground(root, macro, low, rng))
        return high_do, low_do

    def report(self) -> dict[str, Any]:
        """JSON-able summary of the fit."""
        return {"iia": self.iia_, "per_variable": self.per_variable_, "aligned": self.aligned_,
                "n_pairs": self.n_pairs}


__all__ = ["InterchangeInterventionAccuracy", "outputs_agree"]
