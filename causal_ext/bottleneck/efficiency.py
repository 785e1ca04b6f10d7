"""Monte Carlo over replicates: bias and variance of effect estimators on a known scenario.

Every replicate draws one sample and applies every estimator to it (common
random numbers), so variance ratios between strategies are estimated far more
precisely than the variances themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from causal_ext.bottleneck.scenarios import Scenario

__all__ = ["ArmSummary", "monte_carlo", "summarize"]

Estimator = Callable[[dict[str, np.ndarray]], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class ArmSummary:
    """Monte Carlo summary of one estimator, averaged over the coordinates of the effect.

    Attributes:
        variance: mean over coordinates of the across-replicate variance of the estimate.
        mean_stderr_sq: mean over replicates and coordinates of the reported ``stderr**2``
            (should match ``variance`` when the standard errors are calibrated).
        mean_abs_bias: mean over coordinates of ``|mean estimate - truth|``.
        max_bias_z: max over coordinates of ``|mean - truth| / (sd / sqrt(reps))``
            (about ``N(0, 1)``-sized per coordinate when unbiased).
        coverage: fraction of replicate-coordinates with ``|estimate - truth| <= 1.96 stderr``.
        reps: number of replicates.
    """

    variance: float
    mean_stderr_sq: float
    mean_abs_bias: float
    max_bias_z: float
    coverage: float
    reps: int


def monte_carlo(scenario: Scenario, n: int, reps: int, estimators: Mapping[str, Estimator],
                seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Run each estimator on ``reps`` samples of size ``n``.

    ``estimators`` maps a name to a function of the role-keyed sample returning
    ``(effect, stderr)``. Returns name -> ``(estimates, stderrs)``, each
    ``(reps, *effect.shape)``.
    """
    if reps < 2 or n < 2:
        raise ValueError(f"need reps >= 2 and n >= 2; got reps={reps}, n={n}")
    rng = np.random.default_rng(seed)
    out: dict[str, tuple[list, list]] = {name: ([], []) for name in estimators}
    for _ in range(reps):
        data = scenario.sample(n, rng)
        for name, estimate in estimators.items():
            effect, stderr = estimate(data)
            out[name][0].append(effect)
            out[name][1].append(stderr)
    return {name: (np.stack(e), np.stack(s)) for name, (e, s) in out.items()}


def summarize(estimates: np.ndarray, stderrs: np.ndarray, truth: np.ndarray) -> ArmSummary:
    """Summarise ``(reps, ...)`` estimates against the true effect (see :class:`ArmSummary`)."""
    reps = estimates.shape[0]
    mean, sd = estimates.mean(axis=0), estimates.std(axis=0, ddof=1)
    bias = mean - truth
    return ArmSummary(
        variance=float(np.mean(sd ** 2)),
        mean_stderr_sq=float(np.mean(stderrs ** 2)),
        mean_abs_bias=float(np.mean(np.abs(bias))),
        max_bias_z=float(np.max(np.abs(bias) / (sd / np.sqrt(reps)))),
        coverage=float(np.mean(np.abs(estimates - truth) <= 1.96 * stderrs)),
        reps=reps,
    )
