"""Benchmark systems: valid and invalid (contrastive) abstractions of small complex systems.

Each module defines a low-level model, one or more high-level explanations, the
abstraction between them and a ``build(condition)`` returning a
:class:`~causal_ext.abstraction.systems.base.Case`:

========================  =================================  =========================================
system                    regime                             invalid conditions
========================  =================================  =========================================
``adder``                 discrete, static                   ``wrong_gate``, ``inverted_explanation``,
                                                             ``inverted_internal``
``lotka_volterra``        counts, stochastic, dynamical      ``no_interaction``, ``ageing``
``heat``                  continuous, dynamical              ``wrong_diffusivity``, ``hidden_heater``
``ising``                 discrete, stochastic, equilibrium  ``independent_blocks``, ``antiferromagnetic``
``grn``                   discrete, dynamical                ``wrong_sign``, ``mirna``
``transformer``           neural, static                     ``wrong_threshold``, ``backup_head``
========================  =================================  =========================================

The last invalid condition of each system except Ising is *faithfulness-only*: every
intervention on the mapped variables commutes, and only perturbing an unmapped variable
(which the explanation claims is inert) reveals the error. The adder's
``inverted_explanation`` keeps input-output behaviour but gets an internal variable wrong:
interventions expose it, observational metrics cannot. The adder also has a second valid
condition, ``inverted_remapped``.
"""

from __future__ import annotations

from types import ModuleType

from causal_ext.abstraction.systems import adder, grn, heat, ising, lotka_volterra, transformer
from causal_ext.abstraction.systems.base import Case

SYSTEMS: dict[str, ModuleType] = {"adder": adder, "lotka_volterra": lotka_volterra, "heat": heat,
                                  "ising": ising, "grn": grn, "transformer": transformer}


def conditions(system: str) -> tuple[str, ...]:
    """Conditions of ``system``; the first is ``valid``."""
    return _module(system).CONDITIONS


def build(system: str, condition: str = "valid") -> Case:
    """The :class:`Case` of ``system`` under ``condition``."""
    return _module(system).build(condition)


def _module(system: str) -> ModuleType:
    if system not in SYSTEMS:
        raise ValueError(f"system '{system}' is unknown; use one of {sorted(SYSTEMS)}.")
    return SYSTEMS[system]


__all__ = ["SYSTEMS", "Case", "build", "conditions"]
