"""The abstraction map between a low-level and a high-level SCM: a variable partition plus value maps.

Every low-level variable must be accounted for in exactly one of three ways, because each
is a different claim the CAE tests differently:

* in the **cell** of a high-level variable ``X`` (``cells[X]``): summarised by ``X``
  through the value map ``value_maps[X]``; interventions on ``X`` are carried out on it;
* **unmapped** (the set Phi): claimed *causally inert* for the explanation. The
  faithfulness test perturbs these variables and checks that the high-level prediction
  still holds; an explanation that leaves out a variable the outputs depend on fails it;
* **internal**: part of the mechanism between mapped variables (the gates inside an
  adder, the hidden units of an MLP); left to run naturally, never intervened on, and
  not claimed inert (this is the official CAE package's ``internal_variables``).

Cells must be disjoint. :meth:`Abstraction.check` enforces all of this with one error
that names the offending variables and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from causal_ext.abstraction.scm import SCM
from causal_ext.abstraction.valuemaps import ValueMap


class Abstraction:
    """Partition of the low-level variables plus value maps (module docstring).

    Args:
        cells: ``{high-level variable: [low-level variables]}``.
        value_maps: ``{high-level variable: ValueMap}`` (same keys as ``cells``).
        unmapped: low-level variables claimed causally inert (Phi).
        internal: low-level variables that are part of a mapped mechanism.
    """

    def __init__(self, cells: Mapping[str, Sequence[str]], value_maps: Mapping[str, ValueMap],
                 unmapped: Sequence[str] = (), internal: Sequence[str] = ()) -> None:
        self.cells = {k: list(v) for k, v in cells.items()}
        self.value_maps = dict(value_maps)
        self.unmapped = list(unmapped)
        self.internal = list(internal)
        for name, maps in (("cells", self.cells), ("value_maps", self.value_maps)):
            if not maps:
                raise ValueError(f"Abstraction: {name} is empty; map at least one high-level variable.")
        if set(self.cells) != set(self.value_maps):
            raise ValueError(f"Abstraction: cells and value_maps must have the same keys; only in cells: "
                             f"{sorted(set(self.cells) - set(self.value_maps))}, only in value_maps: "
                             f"{sorted(set(self.value_maps) - set(self.cells))}.")
        for k, m in self.value_maps.items():
            if not isinstance(m, ValueMap):
                raise TypeError(f"Abstraction: value_maps['{k}'] is {type(m).__name__}, not a ValueMap.")
        for k, cell in self.cells.items():
            if not cell:
                raise ValueError(f"Abstraction: the cell of '{k}' is empty.")

    def check(self, low: SCM, high: SCM) -> None:
        """Raise ``ValueError`` unless this map fits ``low`` and ``high`` (module docstring rules)."""
        hv, lv = set(high.variables), set(low.variables)
        if set(self.cells) != hv:
            raise ValueError(f"Abstraction: every high-level variable needs a cell; missing "
                             f"{sorted(hv - set(self.cells))}, unknown {sorted(set(self.cells) - hv)}.")
        seen: dict[str, str] = {}
        for k, cell in self.cells.items():
            for m in cell:
                if m not in lv:
                    raise ValueError(f"Abstraction: the cell of '{k}' names '{m}', which is not a variable "
                                     f"of the low-level model {low.name}.")
                if m in seen:
                    raise ValueError(f"Abstraction: '{m}' is in the cells of both '{seen[m]}' and '{k}'; "
                                     "cells must be disjoint.")
                seen[m] = k
        for label, group in (("unmapped", self.unmapped), ("internal", self.internal)):
            for m in group:
                if m not in lv:
                    raise ValueError(f"Abstraction: {label} names '{m}', which is not a low-level variable.")
                if m in seen:
                    raise ValueError(f"Abstraction: '{m}' is listed both as {label} and as {seen[m]}; each "
                                     "low-level variable belongs to exactly one cell, the unmapped set or "
                                     "the internal set.")
                seen[m] = label
        missing = [m for m in low.variables if m not in seen]
        if missing:
            raise ValueError(f"Abstraction: low-level variables {missing} are in no cell; name them in "
                             "`unmapped` (claimed causally inert: the faithfulness test perturbs them) or in "
                             "`internal` (part of a mapped mechanism: never intervened on).")

    def abstract(self, name: str, state: Mapping[str, np.ndarray]) -> np.ndarray:
        """Value of high-level ``name`` for a low-level state ``{variable: [n, ...]}``."""
        return np.asarray(self.value_maps[name].abstract([state[m] for m in self.cells[name]]))

    def ground(self, name: str, values: np.ndarray, low: SCM,
               rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Low-level values ``{cell variable: [n, ...]}`` realising high-level ``name = values``."""
        cell = self.cells[name]
        shapes = [tuple(low.domain(m).shape) for m in cell]
        out = self.value_maps[name].ground(np.asarray(values), shapes, rng)
        if len(out) != len(cell):
            raise ValueError(f"Abstraction: the value map of '{name}' grounded {len(out)} arrays for a cell "
                             f"of {len(cell)} variables.")
        return dict(zip(cell, out))


__all__ = ["Abstraction"]
