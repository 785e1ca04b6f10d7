"""Sampling the interventions a CAE averages over, in both directions, with optional Phi perturbations.

The intervention distribution (an open choice of the method; fixed here as in the
official ``causal-abstraction-eval`` package except where noted):

* **Inputs.** Every exogenous (root) high-level variable is set in every intervention:
  the high-level model has no other source for them, and the low-level system is driven
  through their cells.
* **Targets.** Each intervention also picks ``k ~ Uniform{0, ..., m}`` non-root
  high-level variables (``m = min(max_targets, pool size)``), uniformly without
  replacement from the pool (default: all non-root variables). ``k = 0`` rows are pure
  input-output checks; the others test internal mechanisms. Intervened variables are
  not scored for that intervention. (The package draws ``k`` from ``1..m`` over all
  variables, roots included; a drawn root is set anyway, so it mixes the same
  ``0..m`` non-root target counts with different weights.)
* **Top-down** (``CAE_down``): macro-values come from the high-level variables'
  domains; the low-level side gets a grounding ``tau^{-1}`` of them, drawn afresh for
  every replicate (the choice of preimage is part of the low-level path).
* **Bottom-up** (``CAE_up``): micro-values of the roots' and targets' cells come from
  the low-level variables' domains (one draw per intervention, shared by its replicates);
  the high-level side gets their abstraction ``tau``.
* **Faithfulness.** With probability ``phi_prob`` an intervention also overwrites
  every unmapped (Phi) low-level variable with a draw from its domain (the same for all
  replicates); the high-level side is untouched, since the explanation claims those
  variables are inert. Phi draws come from their own random stream, so a faithful and a
  non-faithful run with the same seed share every other draw. (The package by default
  makes Phi one more candidate target, so its rate depends on the pool size; a fixed
  rate is its ``phi_selection_prob`` option. It overwrites continuous Phi variables with
  Gaussian noise; here each variable's own domain says what a perturbation is.)

Rows are ``intervention * replicates + replicate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from causal_ext.abstraction.abstraction import Abstraction
from causal_ext.abstraction.scm import SCM, Clamp

DIRECTIONS = ("top_down", "bottom_up")


@dataclass
class InterventionBatch:
    """Matched interventions for both levels.

    Attributes:
        direction: ``top_down`` or ``bottom_up``.
        n: number of interventions.
        replicates: runs per intervention.
        high_do: clamps for the high-level model, rows ``n * replicates``.
        low_do: clamps for the low-level model, rows ``n * replicates``.
        targets: ``{high-level variable: bool [n]}``, true where it is intervened on.
        phi: ``bool [n]``, true where the unmapped variables are perturbed.
    """

    direction: str
    n: int
    replicates: int
    high_do: dict[str, Clamp]
    low_do: dict[str, Clamp]
    targets: dict[str, np.ndarray]
    phi: np.ndarray


def _tile(a: np.ndarray, r: int) -> np.ndarray:
    return np.repeat(np.asarray(a), r, axis=0)


def sample_interventions(low: SCM, high: SCM, abstraction: Abstraction, n: int, *, direction: str,
                         replicates: int = 1, max_targets: int = 1, phi_prob: float = 0.0,
                         phi_vars: Sequence[str] | None = None, target_pool: Sequence[str] | None = None,
                         seed: int | Sequence[int] | np.random.SeedSequence = 0) -> InterventionBatch:
    """Draw ``n`` interventions (module docstring for the distribution).

    Args:
        low, high, abstraction: the two models and the map between them (checked by the caller).
        n: number of interventions.
        direction: ``top_down`` or ``bottom_up``.
        replicates: runs per intervention (for stochastic models).
        max_targets: most non-root high-level variables intervened on at once.
        phi_prob: probability that an intervention perturbs the unmapped variables.
        phi_vars: the unmapped variables perturbed (default: all of ``abstraction.unmapped``).
        target_pool: the non-root variables that may be targeted (default: all).
        seed: seed for the draws.

    Raises:
        ValueError: bad direction, counts or probabilities, or a pool with unknown/root names.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction='{direction}'; use one of {DIRECTIONS}.")
    if n < 1 or replicates < 1 or max_targets < 0:
        raise ValueError(f"need n >= 1, replicates >= 1, max_targets >= 0 (got {n}, {replicates}, "
                         f"{max_targets}).")
    if not 0.0 <= phi_prob <= 1.0:
        raise ValueError(f"phi_prob={phi_prob} must lie in [0, 1].")
    roots = high.roots
    pool = [v for v in high.variables if v not in roots] if target_pool is None else list(target_pool)
    bad = [v for v in pool if v not in high.variables or v in roots]
    if bad:
        raise ValueError(f"target_pool: {bad} are unknown or exogenous high-level variables; the pool "
                         "holds the non-root variables that may be intervened on.")
    phis = list(abstraction.unmapped if phi_vars is None else phi_vars)
    unknown = [u for u in phis if u not in abstraction.unmapped]
    if unknown:
        raise ValueError(f"phi_vars: {unknown} are not unmapped variables of the abstraction.")

    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    s_targets, s_values, s_ground, s_phi = ss.spawn(4)
    rng_t, rng_v = np.random.default_rng(s_targets), np.random.default_rng(s_values)
    rng_g, rng_p = np.random.default_rng(s_ground), np.random.default_rng(s_phi)

    m = min(max_targets, len(pool))
    k = rng_t.integers(0, m + 1, size=n) if m > 0 else np.zeros(n, dtype=np.int64)
    rank = np.argsort(np.argsort(rng_t.random((n, len(pool))), axis=1), axis=1) if pool else np.zeros((n, 0))
    targets = {v: np.ones(n, dtype=bool) for v in roots}
    targets.update({v: rank[:, j] < k for j, v in enumerate(pool)})

    r = replicates
    high_do: dict[str, Clamp] = {}
    low_do: dict[str, Clamp] = {}
    for v in roots + pool:
        mask = targets[v]
        if not mask.any():
            continue
        row_mask = None if mask.all() else _tile(mask, r)
        if direction == "top_down":
            macro = high.domain(v).sample(n, rng_v)
            micro = abstraction.ground(v, _tile(macro, r), low, rng_g)
        else:
            micro1 = {c: low.domain(c).sample(n, rng_v) for c in abstraction.cells[v]}
            macro = abstraction.abstract(v, micro1)
            micro = {c: _tile(x, r) for c, x in micro1.items()}
        high_do[v] = Clamp(_tile(macro, r), row_mask)
        for c, x in micro.items():
            low_do[c] = Clamp(x, row_mask)

    phi = rng_p.random(n) < phi_prob if phis else np.zeros(n, dtype=bool)
    for u in phis:  # always drawn, so that phi_prob does not shift the other streams
        x = low.domain(u).sample(n, rng_p)
        low_do[u] = Clamp(_tile(x, r), _tile(phi, r))
    return InterventionBatch(direction, n, r, high_do, low_do, targets, phi)


__all__ = ["DIRECTIONS", "InterventionBatch", "sample_interventions"]
