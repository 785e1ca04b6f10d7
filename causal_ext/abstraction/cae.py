"""Causal Abstraction Error (CAE): how far a high-level explanation is from the system it explains.

For a low-level SCM ``M``, a high-level SCM ``E`` and an abstraction ``tau``
(:class:`~causal_ext.abstraction.abstraction.Abstraction`), the CAE is the expected
distance between the two ways round the commuting diagram over sampled interventions
``iota``:

    CAE = E_iota [ mean over scored X of  D( E_iota(X),  tau_X( M_{tau^{-1}(iota)} ) ) ]

where ``E_iota(X)`` is the high-level model's outcome of ``X`` under ``iota`` and the
second argument is the low-level outcome under the matched intervention, abstracted.
The scored variables of an intervention are the high-level variables it does not set
(roots are always set); ``outputs`` restricts them further. An intervention with nothing
left to score is dropped. ``D`` is one of the distances of
:mod:`~causal_ext.abstraction.distances` (MSE, Jensen-Shannon, MMD).

*Directions.* Bottom-up (``CAE_up``) draws micro-interventions on the targets' cells
and lifts them with ``tau``; top-down (``CAE_down``) draws macro-interventions from the
high-level domains and grounds them with ``tau^{-1}`` (see
:mod:`~causal_ext.abstraction.sampling`). Both are reported; the headline ``cae_`` is
their mean, and a valid abstraction must be close to 0 in both.

*Faithfulness.* The faithful CAE mixes in, with probability ``phi_prob``, a
perturbation of every unmapped variable (each redrawn from its low-level domain) while
the high-level side is left alone; an explanation that leaves out a variable the
outputs depend on is then penalised. ``faithful=False`` gives the ablation with no such
perturbations. :class:`FaithfulnessTest` runs the perturbations on their own, one unmapped
variable at a time, and reports which one leaks.

*Replicates.* Stochastic models run each intervention ``n_replicates`` times on both
sides; ``D`` compares the replicate samples (their means for MSE, their distributions for
Jensen-Shannon and MMD).

The functional core is :func:`run_paths` (outcomes of both paths for a batch of
interventions) and :func:`score_outcomes` (per-intervention distances);
:class:`CausalAbstractionError` is the estimator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from causal_ext.abstraction.abstraction import Abstraction
from causal_ext.abstraction.distances import Distance, get_distance
from causal_ext.abstraction.sampling import DIRECTIONS, InterventionBatch, sample_interventions
from causal_ext.abstraction.scm import SCM


@dataclass
class Outcomes:
    """Both paths' outcomes of the scored high-level variables for a batch of interventions.

    Attributes:
        direction: how the interventions were drawn.
        high: ``{variable: [n, r, d]}`` high-level outcomes (values flattened to ``d``).
        low: ``{variable: [n, r, d]}`` abstracted low-level outcomes.
        scored: ``{variable: bool [n]}``, true where the variable was not intervened on.
        phi: ``bool [n]``, true where the unmapped variables were perturbed.
    """

    direction: str
    high: dict[str, np.ndarray]
    low: dict[str, np.ndarray]
    scored: dict[str, np.ndarray]
    phi: np.ndarray

    @property
    def n(self) -> int:
        """Number of interventions."""
        return len(self.phi)

    def head(self, n: int) -> Outcomes:
        """The first ``n`` interventions (i.i.d. draws, so a valid smaller sample)."""
        return Outcomes(self.direction, {k: v[:n] for k, v in self.high.items()},
                        {k: v[:n] for k, v in self.low.items()}, {k: v[:n] for k, v in self.scored.items()},
                        self.phi[:n])

    def select(self, rows: np.ndarray) -> Outcomes:
        """The interventions where ``rows`` (bool ``[n]``) is true."""
        return Outcomes(self.direction, {k: v[rows] for k, v in self.high.items()},
                        {k: v[rows] for k, v in self.low.items()},
                        {k: v[rows] for k, v in self.scored.items()}, self.phi[rows])


def _split(a: np.ndarray, n: int, r: int) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    return a.reshape(n, r, -1)


def run_paths(low: SCM, high: SCM, abstraction: Abstraction, batch: InterventionBatch, *,
              outputs: Sequence[str] | None = None,
              seed: int | Sequence[int] | np.random.SeedSequence = 0) -> Outcomes:
    """Run the high-level model and the low-level model on ``batch``; abstract the low-level state.

    Args:
        low, high, abstraction: the models and the map.
        batch: matched interventions (:func:`~causal_ext.abstraction.sampling.sample_interventions`).
        outputs: high-level variables to score (default: every non-root variable).
        seed: seed of the two models' own randomness (independent streams per level).
    """
    names = [v for v in high.variables if v not in high.roots] if outputs is None else list(outputs)
    bad = [v for v in names if v not in high.variables or v in high.roots]
    if bad:
        raise ValueError(f"outputs: {bad} are unknown or exogenous high-level variables; outputs are scored "
                         "non-root high-level variables.")
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    s_high, s_low = ss.spawn(2)
    rows = batch.n * batch.replicates
    hv = high.simulate(batch.high_do, rows, np.random.default_rng(s_high))
    lv = low.simulate(batch.low_do, rows, np.random.default_rng(s_low))
    n, r = batch.n, batch.replicates
    return Outcomes(
        direction=batch.direction,
        high={v: _split(hv[v], n, r) for v in names},
        low={v: _split(abstraction.abstract(v, lv), n, r) for v in names},
        scored={v: ~batch.targets[v] for v in names},
        phi=batch.phi.copy(),
    )


def score_outcomes(outcomes: Outcomes,
                   distance: str | Distance = "mse") -> tuple[np.ndarray, dict[str, float]]:
    """Per-intervention CAE contributions and per-variable means.

    Returns:
        (scores ``[n]``: mean distance over the variables scored at each intervention, NaN
        where none is; ``{variable: mean distance over the interventions scoring it}``).
    """
    dist = get_distance(distance)
    total = np.zeros(outcomes.n)
    count = np.zeros(outcomes.n)
    by_var: dict[str, float] = {}
    for v, mask in outcomes.scored.items():
        if not mask.any():
            continue
        d = np.asarray(dist(outcomes.high[v][mask], outcomes.low[v][mask]), dtype=float)
        total[mask] += d
        count[mask] += 1
        by_var[v] = float(d.mean())
    with np.errstate(invalid="ignore", divide="ignore"):
        scores = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return scores, by_var


def _mean_se(x: np.ndarray) -> tuple[float, float]:
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return float("nan"), float("nan")
    se = float(x.std(ddof=1) / np.sqrt(len(x))) if len(x) > 1 else 0.0
    return float(x.mean()), se


class CausalAbstractionError:
    """The CAE of an abstraction, in both directions, for several distances (module docstring).

    Args:
        n_interventions: sampled interventions per direction (the abstract reports ~30 suffice).
        directions: any of ``top_down``, ``bottom_up``.
        distances: names in :data:`~causal_ext.abstraction.distances.DISTANCES` or callables.
        faithful: mix perturbations of the unmapped variables into the interventions.
        phi_prob: probability of such a perturbation per intervention (faithful only).
        max_targets: most non-root high-level variables intervened on at once.
        n_replicates: runs per intervention (> 1 for stochastic models).
        outputs: high-level variables to score (default: all non-root ones).
        seed: seed of every draw; a faithful and a non-faithful fit with the same seed share
            all draws but the perturbations.

    Attributes (after ``fit``):
        scores_: ``{direction: {distance: CAE}}``.
        se_: ``{direction: {distance: standard error over interventions}}``.
        cae_: ``{distance: mean of the directions' CAE}``.
        by_variable_: ``{direction: {distance: {variable: mean distance}}}``.
        phi_split_: ``{direction: {distance: {"perturbed": CAE, "unperturbed": CAE}}}`` over the
            interventions with and without perturbed unmapped variables (NaN when there are none).
        per_intervention_: ``{direction: {distance: [n] scores}}``.
        outcomes_: ``{direction: Outcomes}``.
    """

    def __init__(self, n_interventions: int = 30, directions: Sequence[str] = DIRECTIONS,
                 distances: Sequence[str | Distance] = ("mse", "js", "mmd"), faithful: bool = True,
                 phi_prob: float = 0.5, max_targets: int = 1, n_replicates: int = 1,
                 outputs: Sequence[str] | None = None, seed: int = 0) -> None:
        self.n_interventions = n_interventions
        self.directions = tuple(directions)
        self.distances = tuple(distances)
        self.faithful = faithful
        self.phi_prob = phi_prob
        self.max_targets = max_targets
        self.n_replicates = n_replicates
        self.outputs = None if outputs is None else list(outputs)
        self.seed = seed

    def _validate(self) -> None:
        bad = [d for d in self.directions if d not in DIRECTIONS]
        if bad or not self.directions:
            raise ValueError(f"directions={list(self.directions)}; use a non-empty subset of {DIRECTIONS}.")
        if not self.distances:
            raise ValueError("distances is empty; name at least one of mse, js, mmd.")
        for d in self.distances:
            get_distance(d)
        if self.n_interventions < 2:
            raise ValueError(f"n_interventions={self.n_interventions}; use at least 2 (the distances need a "
                             "pooled scale).")

    @staticmethod
    def distance_name(d: str | Distance) -> str:
        """The key a distance is reported under."""
        return d if isinstance(d, str) else getattr(d, "__name__", repr(d))

    def fit(self, low: SCM, high: SCM, abstraction: Abstraction) -> CausalAbstractionError:
        """Sample interventions, run both paths, score them (attributes in the class docstring)."""
        self._validate()
        abstraction.check(low, high)
        self.scores_: dict[str, dict[str, float]] = {}
        self.se_: dict[str, dict[str, float]] = {}
        self.by_variable_: dict[str, dict[str, dict[str, float]]] = {}
        self.phi_split_: dict[str, dict[str, dict[str, float]]] = {}
        self.per_intervention_: dict[str, dict[str, np.ndarray]] = {}
        self.outcomes_: dict[str, Outcomes] = {}
        for direction in self.directions:
            ss = np.random.SeedSequence([self.seed, DIRECTIONS.index(direction)])
            s_int, s_run = ss.spawn(2)
            batch = sample_interventions(low, high, abstraction, self.n_interventions, direction=direction,
                                         replicates=self.n_replicates, max_targets=self.max_targets,
                                         phi_prob=self.phi_prob if self.faithful else 0.0, seed=s_int)
            out = run_paths(low, high, abstraction, batch, outputs=self.outputs, seed=s_run)
            self.outcomes_[direction] = out
            self._score(direction, out)
        self.cae_ = {self.distance_name(d): float(np.mean([self.scores_[r][self.distance_name(d)]
                                                           for r in self.directions]))
                     for d in self.distances}
        return self

    def _score(self, direction: str, out: Outcomes) -> None:
        self.scores_[direction], self.se_[direction] = {}, {}
        self.by_variable_[direction], self.phi_split_[direction] = {}, {}
        self.per_intervention_[direction] = {}
        for d in self.distances:
            name = self.distance_name(d)
            per, by_var = score_outcomes(out, d)
            self.per_intervention_[direction][name] = per
            self.scores_[direction][name], self.se_[direction][name] = _mean_se(per)
            self.by_variable_[direction][name] = by_var
            self.phi_split_[direction][name] = {
                "perturbed": _mean_se(per[out.phi])[0] if out.phi.any() else float("nan"),
                "unperturbed": _mean_se(per[~out.phi])[0] if (~out.phi).any() else float("nan")}

    def score_head(self, n: int) -> dict[str, dict[str, float]]:
        """CAE recomputed on the first ``n`` interventions of the fitted sample (for convergence curves)."""
        return {r: {self.distance_name(d): _mean_se(score_outcomes(o.head(n), d)[0])[0]
                    for d in self.distances}
                for r, o in self.outcomes_.items()}

    def report(self) -> dict[str, Any]:
        """JSON-able summary of the fit."""
        return {"cae": self.cae_, "scores": self.scores_, "se": self.se_, "by_variable": self.by_variable_,
                "phi_split": self.phi_split_, "n_interventions": self.n_interventions,
                "faithful": self.faithful, "phi_prob": self.phi_prob if self.faithful else 0.0,
                "max_targets": self.max_targets, "n_replicates": self.n_replicates, "seed": self.seed}


class FaithfulnessTest:
    """Perturb each unmapped variable on its own and check that the high-level prediction stays valid.

    For every unmapped variable ``u`` (and for all of them together) the test draws the
    same ``n_interventions`` interventions twice, with common random numbers: once as is,
    once with ``u`` overwritten by a draw from its low-level domain in every intervention.
    The *leakage* of ``u`` is the increase of the CAE, ``CAE(perturbed) - CAE(as is)``;
    an explanation passes when every leakage is at most ``tolerance``.

    Args:
        n_interventions: interventions per check.
        distance: the CAE distance.
        direction: ``top_down`` or ``bottom_up``.
        max_targets: most non-root high-level variables intervened on at once.
        n_replicates: runs per intervention.
        tolerance: largest leakage that passes.
        outputs: high-level variables to score.
        seed: seed of the draws.

    Attributes (after ``fit``):
        baseline_: CAE without perturbation.
        leakage_: ``{unmapped variable or "all": CAE increase}``.
        passed_: whether every leakage is at most ``tolerance``.
    """

    def __init__(self, n_interventions: int = 30, distance: str | Distance = "mse",
                 direction: str = "top_down", max_targets: int = 1, n_replicates: int = 1,
                 tolerance: float = 0.05, outputs: Sequence[str] | None = None, seed: int = 0) -> None:
        self.n_interventions = n_interventions
        self.distance = distance
        self.direction = direction
        self.max_targets = max_targets
        self.n_replicates = n_replicates
        self.tolerance = tolerance
        self.outputs = outputs
        self.seed = seed

    def _cae(self, low: SCM, high: SCM, abstraction: Abstraction, phi_vars: Sequence[str],
             phi_prob: float) -> float:
        ss = np.random.SeedSequence([self.seed, 7])
        s_int, s_run = ss.spawn(2)
        batch = sample_interventions(low, high, abstraction, self.n_interventions, direction=self.direction,
                                     replicates=self.n_replicates, max_targets=self.max_targets,
                                     phi_prob=phi_prob, phi_vars=phi_vars, seed=s_int)
        out = run_paths(low, high, abstraction, batch, outputs=self.outputs, seed=s_run)
        return _mean_se(score_outcomes(out, self.distance)[0])[0]

    def fit(self, low: SCM, high: SCM, abstraction: Abstraction) -> FaithfulnessTest:
        """Run the checks (attributes in the class docstring)."""
        abstraction.check(low, high)
        get_distance(self.distance)
        phis = list(abstraction.unmapped)
        self.baseline_ = self._cae(low, high, abstraction, phis, 0.0)
        self.leakage_: dict[str, float] = {}
        for u in phis:
            self.leakage_[u] = self._cae(low, high, abstraction, [u], 1.0) - self.baseline_
        if phis:
            self.leakage_["all"] = self._cae(low, high, abstraction, phis, 1.0) - self.baseline_
        self.passed_ = bool(all(v <= self.tolerance for v in self.leakage_.values()))
        return self

    def report(self) -> dict[str, Any]:
        """JSON-able summary of the fit."""
        return {"baseline": self.baseline_, "leakage": self.leakage_, "passed": self.passed_,
                "tolerance": self.tolerance, "direction": self.direction,
                "n_interventions": self.n_interventions}


__all__ = ["CausalAbstractionError", "FaithfulnessTest", "Outcomes", "run_paths", "score_outcomes"]
