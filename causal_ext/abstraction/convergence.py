"""How many sampled interventions the CAE needs: estimates on growing prefixes of one sample.

Interventions are i.i.d., so the first ``n`` of a sample of ``N`` are a sample of ``n``. For
each of ``n_repeats`` seeds, :func:`convergence_curve` fits one
:class:`~causal_ext.abstraction.cae.CausalAbstractionError` with ``max(ns)`` interventions
and re-scores its first ``n`` for every ``n`` in ``ns`` (the distance's pooled scale is
recomputed on the prefix, as a fit with ``n`` interventions would). The spread over seeds at
each ``n`` is the sampling error of an ``n``-intervention CAE.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from causal_ext.abstraction.abstraction import Abstraction
from causal_ext.abstraction.cae import CausalAbstractionError
from causal_ext.abstraction.scm import SCM


@dataclass
class ConvergenceCurve:
    """CAE estimates by number of interventions.

    Attributes:
        ns: the prefix sizes.
        values: ``{direction: [len(ns), n_repeats]}`` estimates.
        distance: the distance used.
    """

    ns: list[int]
    values: dict[str, np.ndarray]
    distance: str

    def mean(self) -> dict[str, np.ndarray]:
        """Mean estimate per ``n`` and direction."""
        return {r: v.mean(1) for r, v in self.values.items()}

    def relative_error(self) -> dict[str, np.ndarray]:
        """Mean ``|estimate - ref| / ref`` per ``n``; ``ref`` is the mean estimate at the largest ``n``."""
        out = {}
        for r, v in self.values.items():
            ref = float(v[-1].mean())
            out[r] = np.abs(v - ref).mean(1) / ref if ref > 0 else np.abs(v - ref).mean(1)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {"ns": self.ns, "distance": self.distance,
                "values": {r: v.tolist() for r, v in self.values.items()}}


def convergence_curve(low: SCM, high: SCM, abstraction: Abstraction, ns: Sequence[int], *,
                      n_repeats: int = 20, distance: str = "mse", seed: int = 0,
                      **cae_kwargs: Any) -> ConvergenceCurve:
    """CAE estimates for each prefix size in ``ns`` over ``n_repeats`` seeds (module docstring).

    ``cae_kwargs`` go to :class:`~causal_ext.abstraction.cae.CausalAbstractionError`
    (``faithful``, ``n_replicates``, ``directions``, ...).
    """
    ns = sorted(int(n) for n in ns)
    if not ns or ns[0] < 2:
        raise ValueError(f"ns={ns}: give prefix sizes of at least 2.")
    if n_repeats < 1:
        raise ValueError(f"n_repeats={n_repeats} must be >= 1.")
    values: dict[str, np.ndarray] = {}
    for rep in range(n_repeats):
        est = CausalAbstractionError(n_interventions=ns[-1], distances=(distance,), seed=seed + rep,
                                     **cae_kwargs)
        est.fit(low, high, abstraction)
        for i, n in enumerate(ns):
            for r, scores in est.score_head(n).items():
                values.setdefault(r, np.zeros((len(ns), n_repeats)))[i, rep] = scores[distance]
    return ConvergenceCurve(ns, values, distance)


__all__ = ["ConvergenceCurve", "convergence_curve"]
