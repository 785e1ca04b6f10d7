"""Observational and information-theoretic baselines the CAE is compared with.

Both look only at *observational* behaviour: inputs (the high-level roots) are drawn from
their domains and grounded, nothing inside either model is intervened on, no unmapped
variable is perturbed, and only the output variables (default: the high-level sinks) are
compared, per input, as the replicate mean of each path. Errors are oriented like the
CAE (0 = perfect):

* :func:`output_correlation_error`: ``1 - r``, with ``r`` the Pearson correlation between
  the high-level and the abstracted low-level outputs over the sampled inputs, averaged
  over output variables and value dimensions. In [0, 2]. A dimension that is constant on
  both paths counts as ``r = 1`` when the constants agree and 0 otherwise; constant on one
  path only, ``r = 0``.
* :func:`mutual_information_error`: ``1 - NMI``, with ``NMI = I(H; L) / sqrt(H(H) H(L))``
  the normalised mutual information between the two paths' outputs, discretised as in the
  Jensen-Shannon distance (:func:`~causal_ext.abstraction.distances.discretize`). In [0, 1].
  Two constants score 0 if equal and 1 otherwise. NMI is blind to relabelling, so an
  explanation that predicts ``not y`` for ``y`` scores 0.

Neither can see an error that leaves input-output behaviour intact (a wrong internal
variable, an unmapped pathway), which is what the benchmark shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from causal_ext.abstraction.abstraction import Abstraction
from causal_ext.abstraction.cae import Outcomes, run_paths
from causal_ext.abstraction.distances import discretize
from causal_ext.abstraction.sampling import sample_interventions
from causal_ext.abstraction.scm import SCM


def observational_outcomes(low: SCM, high: SCM, abstraction: Abstraction, n: int, *,
                           outputs: Sequence[str] | None = None, n_replicates: int = 1,
                           seed: int = 0) -> Outcomes:
    """Outputs of both paths for ``n`` inputs drawn top-down, with no other intervention."""
    abstraction.check(low, high)
    ss = np.random.SeedSequence([seed, 11])
    s_int, s_run = ss.spawn(2)
    batch = sample_interventions(low, high, abstraction, n, direction="top_down", replicates=n_replicates,
                                 max_targets=0, phi_prob=0.0, seed=s_int)
    names = list(outputs) if outputs else [v for v in high.sinks if v not in high.roots]
    return run_paths(low, high, abstraction, batch, outputs=names, seed=s_run)


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    sa, sb = a.std(), b.std()
    if sa < 1e-12 and sb < 1e-12:
        return 1.0 if np.allclose(a, b) else 0.0
    if sa < 1e-12 or sb < 1e-12:
        return 0.0
    return float(np.clip(np.corrcoef(a, b)[0, 1], -1.0, 1.0))


def output_correlation_error(outcomes: Outcomes) -> float:
    """``1 - mean Pearson r`` between the paths' outputs (module docstring)."""
    rs = []
    for v in outcomes.high:
        hm, lm = outcomes.high[v].mean(1), outcomes.low[v].mean(1)
        rs.extend(_pearson(hm[:, j], lm[:, j]) for j in range(hm.shape[1]))
    return float(1.0 - np.mean(rs))


def _entropy(counts: np.ndarray) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def normalised_mutual_information(a: np.ndarray, b: np.ndarray, bins: int = 10,
                                  max_categories: int = 32) -> float:
    """``I(a; b) / sqrt(H(a) H(b))`` of two paired samples after shared discretisation."""
    ca, cb, k = discretize(np.asarray(a, dtype=float), np.asarray(b, dtype=float), bins, max_categories)
    joint = np.zeros((k, k))
    np.add.at(joint, (ca, cb), 1.0)
    ha, hb = _entropy(joint.sum(1)), _entropy(joint.sum(0))
    if ha < 1e-12 and hb < 1e-12:
        return 1.0 if np.array_equal(ca, cb) else 0.0
    if ha < 1e-12 or hb < 1e-12:
        return 0.0
    mi = ha + hb - _entropy(joint.ravel())
    return float(np.clip(mi / np.sqrt(ha * hb), 0.0, 1.0))


def mutual_information_error(outcomes: Outcomes, bins: int = 10, max_categories: int = 32) -> float:
    """``1 - mean NMI`` between the paths' outputs (module docstring)."""
    vals = []
    for v in outcomes.high:
        hm, lm = outcomes.high[v].mean(1), outcomes.low[v].mean(1)
        vals.extend(normalised_mutual_information(hm[:, j], lm[:, j], bins, max_categories)
                    for j in range(hm.shape[1]))
    return float(1.0 - np.mean(vals))


class ObservationalBaselines:
    """Output correlation and mutual information of an abstraction (module docstring).

    Args:
        n_samples: sampled inputs.
        n_replicates: runs per input (stochastic models).
        outputs: compared high-level variables (default: its sinks).
        bins: bins for continuous outputs (MI).
        seed: seed of the draws.

    Attributes (after ``fit``):
        correlation_error_: ``1 - r``.
        mutual_information_error_: ``1 - NMI``.
    """

    def __init__(self, n_samples: int = 100, n_replicates: int = 1, outputs: Sequence[str] | None = None,
                 bins: int = 10, seed: int = 0) -> None:
        self.n_samples = n_samples
        self.n_replicates = n_replicates
        self.outputs = outputs
        self.bins = bins
        self.seed = seed

    def fit(self, low: SCM, high: SCM, abstraction: Abstraction) -> ObservationalBaselines:
        """Sample inputs, run both paths, compute both errors."""
        if self.n_samples < 2:
            raise ValueError(f"n_samples={self.n_samples}; correlations need at least 2 inputs.")
        out = observational_outcomes(low, high, abstraction, self.n_samples, outputs=self.outputs,
                                     n_replicates=self.n_replicates, seed=self.seed)
        self.correlation_error_ = output_correlation_error(out)
        self.mutual_information_error_ = mutual_information_error(out, self.bins)
        return self

    def report(self) -> dict[str, Any]:
        """JSON-able summary of the fit."""
        return {"correlation_error": self.correlation_error_,
                "mutual_information_error": self.mutual_information_error_, "n_samples": self.n_samples}


__all__ = ["ObservationalBaselines", "mutual_information_error", "normalised_mutual_information",
           "observational_outcomes", "output_correlation_error"]
