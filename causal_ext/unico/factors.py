"""Discrete factors and exact variable elimination (sum-product) on numpy arrays.

A :class:`Factor` is a non-negative array with one named axis per variable. :func:`eliminate`
multiplies a list of factors and sums out every variable not kept, one variable at a time in a
greedy min-weight order (the variable whose elimination creates the smallest factor goes first),
each step one ``numpy.einsum`` over the factors that mention the variable. The result is exact up
to floating-point rounding: no sampling and no approximation anywhere.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Factor", "eliminate"]

_LETTERS = string.ascii_letters


@dataclass(frozen=True, eq=False)
class Factor:
    """A non-negative table over named variables.

    Attributes:
        variables: axis names, one per axis of ``values``.
        values: the table.
    """

    variables: tuple[str, ...]
    values: np.ndarray

    def __post_init__(self) -> None:
        if len(self.variables) != np.ndim(self.values) or len(set(self.variables)) != len(self.variables):
            raise ValueError(
                f"a factor needs one distinct variable name per axis; got {self.variables} for "
                f"shape {np.shape(self.values)}."
            )

    def reduce(self, evidence: Mapping[str, int]) -> Factor:
        """Slice the axes of the variables in ``evidence`` at their observed index (and drop them)."""
        idx = tuple(evidence[v] if v in evidence else slice(None) for v in self.variables)
        return Factor(tuple(v for v in self.variables if v not in evidence), np.asarray(self.values)[idx])


def _einsum(factors: Sequence[Factor], keep: Sequence[str]) -> Factor:
    names = sorted({v for f in factors for v in f.variables} | set(keep))
    if len(names) > len(_LETTERS):
        raise ValueError(
            f"an elimination step spans {len(names)} variables; at most {len(_LETTERS)} are "
            "supported (the network's treewidth is too large for exact inference here)."
        )
    letter = {v: _LETTERS[i] for i, v in enumerate(names)}
    spec = (
        ",".join("".join(letter[v] for v in f.variables) for f in factors)
        + "->"
        + "".join(letter[v] for v in keep)
    )
    values = np.einsum(spec, *[f.values for f in factors], optimize=len(factors) > 2)
    return Factor(tuple(keep), values)


def _weight(pool: Sequence[Factor], sizes: dict[str, int], var: str) -> float:
    """Size of the factor that eliminating ``var`` creates (the greedy min-weight heuristic)."""
    scope = {u for f in pool if var in f.variables for u in f.variables}
    return float(np.prod([sizes[u] for u in scope - {var}]))


def eliminate(factors: Sequence[Factor], keep: Sequence[str]) -> Factor:
    """``sum over all other variables of the product of factors``, as a factor over ``keep`` (in order).

    Args:
        factors: the factors (e.g. CPTs already reduced by the evidence).
        keep: variables to keep; each must appear in some factor.

    Returns:
        The unnormalised marginal over ``keep``; with an empty ``keep`` a 0-d factor (the total mass).
    """
    keep = tuple(keep)
    pool = list(factors)
    present = {v for f in pool for v in f.variables}
    missing = [v for v in keep if v not in present]
    if missing:
        raise ValueError(f"cannot keep {missing}: no factor mentions them.")
    sizes: dict[str, int] = {}
    for f in pool:
        for v, n in zip(f.variables, np.shape(f.values)):
            sizes[v] = n
    to_go = present - set(keep)
    while to_go:
        var = min(sorted(to_go), key=lambda v, fs=pool: _weight(fs, sizes, v))
        touching = [f for f in pool if var in f.variables]
        rest = [f for f in pool if var not in f.variables]
        scope = [u for u in sorted({u for f in touching for u in f.variables}) if u != var]
        pool = rest + [_einsum(touching, scope)]
        to_go.discard(var)
    if not pool:
        return Factor((), np.asarray(1.0))
    return _einsum(pool, keep)
