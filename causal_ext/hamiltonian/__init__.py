"""Hamiltonian causal models (HCMs) and entropy production as a causal observable (the HCM method).

A trajectory-level causal model: an immutable Hamiltonian (:mod:`~causal_ext.hamiltonian.systems`) in a
Langevin environment (friction and thermal noise), driven by intervenable control forces
(:mod:`~causal_ext.hamiltonian.controls`); :class:`HamiltonianCausalModel` simulates its path law (underdamped
or overdamped) and ``model.do(u)`` is the intervention. Causal effects are discrepancies between
interventional path laws (:mod:`~causal_ext.hamiltonian.effects`: Girsanov path KL, path likelihood ratios,
and the endpoint and cumulative ATEs for comparison). Entropy production is estimated from trajectories
(:mod:`~causal_ext.hamiltonian.entropy`: path KL between forward and time-reversed paths, from a fitted drift
or from transition statistics; :mod:`~causal_ext.hamiltonian.tur`: the thermodynamic-uncertainty lower bound)
and in closed form for linear systems (:mod:`~causal_ext.hamiltonian.linear`).
"""

from causal_ext.hamiltonian.basis import PolynomialBasis
from causal_ext.hamiltonian.controls import (
    ConstantForce,
    Control,
    FeedbackControl,
    LinearFeedback,
    NoControl,
    PotentialControl,
    SumControl,
    TimeDependentForce,
    rotational,
)
from causal_ext.hamiltonian.effects import (
    EffectEstimate,
    cumulative_ate,
    difference_in_means,
    endpoint_ate,
    path_kl,
    path_log_likelihood_ratio,
)
from causal_ext.hamiltonian.entropy import PathKLEntropyProduction, TransitionKLEntropyProduction
from causal_ext.hamiltonian.linear import (
    LinearSystem,
    linear_entropy_production,
    stationary_moments,
    transition_reversal_kl_rate,
)
from causal_ext.hamiltonian.model import HamiltonianCausalModel, Trajectories
from causal_ext.hamiltonian.systems import (
    Hamiltonian,
    LangevinBath,
    PotentialHamiltonian,
    QuadraticHamiltonian,
)
from causal_ext.hamiltonian.tur import TURBound, tur_bound

__all__ = [
    "PolynomialBasis",
    "ConstantForce", "Control", "FeedbackControl", "LinearFeedback", "NoControl", "PotentialControl",
    "SumControl", "TimeDependentForce", "rotational",
    "EffectEstimate", "cumulative_ate", "difference_in_means", "endpoint_ate", "path_kl",
    "path_log_likelihood_ratio",
    "PathKLEntropyProduction", "TransitionKLEntropyProduction",
    "LinearSystem", "linear_entropy_production", "stationary_moments", "transition_reversal_kl_rate",
    "HamiltonianCausalModel", "Trajectories",
    "Hamiltonian", "LangevinBath", "PotentialHamiltonian", "QuadraticHamiltonian",
    "TURBound", "tur_bound",
]
