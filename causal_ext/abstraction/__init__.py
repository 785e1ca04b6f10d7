"""Causal Abstraction Error (CAE): is a high-level causal explanation valid for a low-level system?

Standalone, numpy only:

* :class:`SCM` (:mod:`~causal_ext.abstraction.scm`) describes both levels; value
  :mod:`~causal_ext.abstraction.domains` say where variables live;
* :class:`Abstraction` (:mod:`~causal_ext.abstraction.abstraction`) is the map between
  them: a partition of the low-level variables into cells, unmapped (claimed inert) and
  internal variables, plus :mod:`~causal_ext.abstraction.valuemaps`;
* :class:`CausalAbstractionError` (:mod:`~causal_ext.abstraction.cae`) is the metric, in both
  directions, faithful or not, with pluggable :mod:`~causal_ext.abstraction.distances`
  (MSE, Jensen-Shannon, MMD); :class:`FaithfulnessTest` checks the unmapped variables one
  by one; :func:`convergence_curve` measures how many interventions it needs;
* :class:`ObservationalBaselines` (:mod:`~causal_ext.abstraction.baselines`): output
  correlation and mutual information, for comparison;
* :mod:`~causal_ext.abstraction.systems`: the benchmark of valid and invalid abstractions.

The recframe callback lives in :mod:`causal_ext.abstraction.callback` (imported on its own,
so this package does not need torch).
"""

from causal_ext.abstraction.abstraction import Abstraction
from causal_ext.abstraction.baselines import (
    ObservationalBaselines,
    mutual_information_error,
    observational_outcomes,
    output_correlation_error,
)
from causal_ext.abstraction.cae import (
    CausalAbstractionError,
    FaithfulnessTest,
    Outcomes,
    run_paths,
    score_outcomes,
)
from causal_ext.abstraction.convergence import ConvergenceCurve, convergence_curve
from causal_ext.abstraction.distances import DISTANCES, get_distance, js, mmd, mse
from causal_ext.abstraction.domains import (
    Bernoulli,
    Categorical,
    Constant,
    Domain,
    Empirical,
    FunctionDomain,
    Normal,
    Uniform,
)
from causal_ext.abstraction.interchange import InterchangeInterventionAccuracy, outputs_agree
from causal_ext.abstraction.sampling import InterventionBatch, sample_interventions
from causal_ext.abstraction.scm import SCM, Clamp
from causal_ext.abstraction.valuemaps import (
    BitsToInt,
    Count,
    FunctionMap,
    Identity,
    Majority,
    Mean,
    Projection,
    Threshold,
    ValueMap,
)

__all__ = [
    "InterchangeInterventionAccuracy",
    "outputs_agree",
    "DISTANCES", "SCM", "Abstraction", "Bernoulli", "BitsToInt", "Categorical", "CausalAbstractionError",
    "Clamp", "Constant", "ConvergenceCurve", "Count", "Domain", "Empirical", "FaithfulnessTest",
    "FunctionDomain", "FunctionMap", "Identity", "InterventionBatch", "Majority", "Mean", "Normal",
    "ObservationalBaselines", "Outcomes", "Projection", "Threshold", "Uniform", "ValueMap",
    "convergence_curve", "get_distance", "js", "mmd", "mse", "mutual_information_error",
    "observational_outcomes", "output_correlation_error", "run_paths", "sample_interventions",
    "score_outcomes",
]
