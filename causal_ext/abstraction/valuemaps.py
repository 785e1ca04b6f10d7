"""Value maps: how the micro-values of one cell become a macro-value (``abstract``) and back (``ground``).

A causal abstraction pairs every high-level variable ``X`` with a *cell*, the list of
low-level variables it summarises, and a value map ``tau_X``. ``abstract`` is ``tau_X``
itself (applied row-wise to the cell's arrays); ``ground`` samples a micro-state of the
cell that ``abstract`` maps back to the given macro-value, i.e. a draw from
``tau_X^{-1}(x)``. Grounding is how a top-down (high-level) intervention is carried out
in the low-level system, so *which* preimage a map draws is part of the abstraction's
claim; each map below states its rule.

Every map receives the cell's arrays in the cell's order (``[n, *shape_j]`` each) and
returns ``[n, *macro_shape]``; ``ground`` returns one array per cell variable.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import numpy as np


class ValueMap(ABC):
    """``tau_X`` between a cell of micro-variables and one macro-variable (module docstring)."""

    @abstractmethod
    def abstract(self, micro: Sequence[np.ndarray]) -> np.ndarray:
        """Macro-values ``[n, ...]`` of the cell's micro-values."""

    @abstractmethod
    def ground(self, macro: np.ndarray, shapes: Sequence[tuple[int, ...]],
               rng: np.random.Generator) -> list[np.ndarray]:
        """One micro-state of the cell per row, mapping back to ``macro`` (``shapes``: the cell's shapes)."""


def _one(micro: Sequence[np.ndarray], who: str) -> np.ndarray:
    if len(micro) != 1:
        raise ValueError(f"{who} summarises exactly one micro-variable; its cell has {len(micro)}.")
    return np.asarray(micro[0])


class Identity(ValueMap):
    """The macro-value is the micro-value (a cell of one variable, same shape)."""

    def abstract(self, micro: Sequence[np.ndarray]) -> np.ndarray:
        return _one(micro, "Identity").copy()

    def ground(self, macro, shapes, rng):
        return [np.broadcast_to(np.asarray(macro), (len(macro), *shapes[0])).copy()]


class BitsToInt(ValueMap):
    """Binary wires (scalars, value > 0.5 is a 1, least significant first) to the integer they encode.

    Grounding writes the binary expansion (exact inverse; logic levels 0/1).
    """

    def abstract(self, micro):
        bits = np.stack([np.asarray(m).reshape(len(m)) > 0.5 for m in micro], axis=1)
        return (bits * (1 << np.arange(bits.shape[1]))).sum(1).astype(np.int64)

    def ground(self, macro, shapes, rng):
        v = np.asarray(macro).astype(np.int64).reshape(len(macro))
        if np.any(v < 0) or np.any(v >= (1 << len(shapes))):
            raise ValueError(f"BitsToInt: values must lie in [0, {(1 << len(shapes)) - 1}] for {len(shapes)} "
                             "wires.")
        return [((v >> j) & 1).reshape((len(v), *s)) for j, s in enumerate(shapes)]


class Mean(ValueMap):
    """The mean of one vector-valued micro-variable (a block of cells, say).

    Grounding: every element set to the macro-value (a flat profile, the preimage with no
    structure the macro-value does not state), plus, when ``jitter > 0``, zero-mean
    Gaussian noise of that standard deviation (centred so the mean is exact).
    """

    def __init__(self, jitter: float = 0.0) -> None:
        if jitter < 0:
            raise ValueError("Mean: jitter must be >= 0.")
        self.jitter = jitter

    def abstract(self, micro):
        x = _one(micro, "Mean").astype(float)
        return x.reshape(len(x), -1).mean(1)

    def ground(self, macro, shapes, rng):
        m = np.asarray(macro, dtype=float).reshape(len(macro))
        out = np.broadcast_to(m.reshape((-1,) + (1,) * len(shapes[0])), (len(m), *shapes[0])).copy()
        if self.jitter > 0:
            noise = rng.normal(0.0, self.jitter, out.shape)
            out += noise - noise.reshape(len(m), -1).mean(1).reshape((-1,) + (1,) * len(shapes[0]))
        return [out]


class Count(ValueMap):
    """The number of 1s in one 0/1 vector (alive flags of agent slots).

    Grounding: that many 1s in slots chosen uniformly at random (agents are exchangeable
    under this map). Counts are rounded and clipped to ``[0, slots]``.
    """

    def abstract(self, micro):
        x = _one(micro, "Count")
        return (x.reshape(len(x), -1) > 0.5).sum(1).astype(float)

    def ground(self, macro, shapes, rng):
        slots = int(np.prod(shapes[0]))
        c = np.clip(np.rint(np.asarray(macro, dtype=float).reshape(len(macro))), 0, slots).astype(np.int64)
        order = np.argsort(rng.random((len(c), slots)), axis=1)
        ranks = np.empty_like(order)
        np.put_along_axis(ranks, order, np.arange(slots)[None, :].repeat(len(c), 0), axis=1)
        return [(ranks < c[:, None]).astype(np.int64).reshape((len(c), *shapes[0]))]


class Majority(ValueMap):
    """The sign of the sum of one +-1 vector of odd length (a majority-rule block spin).

    Grounding: a configuration drawn uniformly among those with the given majority.
    """

    def abstract(self, micro):
        x = _one(micro, "Majority")
        if x.reshape(len(x), -1).shape[1] % 2 == 0:
            raise ValueError("Majority: blocks must have an odd number of spins (no ties).")
        return np.sign(x.reshape(len(x), -1).sum(1)).astype(np.int64)

    def ground(self, macro, shapes, rng):
        b = int(np.prod(shapes[0]))
        if b % 2 == 0:
            raise ValueError("Majority: blocks must have an odd number of spins (no ties).")
        configs = np.array(list(itertools.product([-1, 1], repeat=b)))
        s = np.asarray(macro).reshape(len(macro))
        if not np.all(np.isin(s, (-1, 1))):
            raise ValueError("Majority: macro-values must be -1 or +1.")
        pos, neg = configs[configs.sum(1) > 0], configs[configs.sum(1) < 0]
        pick = rng.integers(0, len(pos), size=len(s))  # len(pos) == len(neg) by symmetry
        out = np.where((s > 0)[:, None], pos[pick], neg[pick])
        return [out.reshape((len(s), *shapes[0])).astype(np.int64)]


class Projection(ValueMap):
    """``scale * <v, direction> + offset`` of one vector (a feature read off an activation).

    Grounding: the vector on the direction's line whose projection gives the macro-value
    (zero in the orthogonal complement, the part the macro-variable does not describe).
    """

    def __init__(self, direction: Sequence[float], scale: float = 1.0, offset: float = 0.0) -> None:
        w = np.asarray(direction, dtype=float)
        if w.ndim != 1 or not np.any(w):
            raise ValueError("Projection: direction must be a non-zero vector.")
        if scale == 0:
            raise ValueError("Projection: scale must be non-zero.")
        self.direction, self.scale, self.offset = w, float(scale), float(offset)

    def abstract(self, micro):
        x = _one(micro, "Projection").astype(float)
        return self.scale * (x.reshape(len(x), -1) @ self.direction) + self.offset

    def ground(self, macro, shapes, rng):
        m = (np.asarray(macro, dtype=float).reshape(len(macro)) - self.offset) / self.scale
        w = self.direction / float(self.direction @ self.direction)
        return [(m[:, None] * w[None, :]).reshape((len(m), *shapes[0]))]


class Threshold(ValueMap):
    """1 where the scalar micro-value exceeds ``threshold``, else 0 (a logit read as a decision).

    Grounding: ``threshold + margin`` for 1 and ``threshold - margin`` for 0.
    """

    def __init__(self, threshold: float = 0.0, margin: float = 1.0) -> None:
        if margin <= 0:
            raise ValueError("Threshold: margin must be > 0.")
        self.threshold, self.margin = float(threshold), float(margin)

    def abstract(self, micro):
        x = _one(micro, "Threshold").astype(float)
        return (x.reshape(len(x)) > self.threshold).astype(np.int64)

    def ground(self, macro, shapes, rng):
        v = np.asarray(macro).reshape(len(macro)) > 0.5
        out = np.where(v, self.threshold + self.margin, self.threshold - self.margin)
        return [np.broadcast_to(out.reshape((-1,) + (1,) * len(shapes[0])), (len(v), *shapes[0])).copy()]


class FunctionMap(ValueMap):
    """A value map from callables ``abstract_fn(micro) -> macro`` and ``ground_fn(macro, shapes, rng)``."""

    def __init__(self, abstract_fn: Callable[[Sequence[np.ndarray]], np.ndarray],
                 ground_fn: Callable[[np.ndarray, Sequence[tuple[int, ...]], np.random.Generator],
                                     list[np.ndarray]]) -> None:
        self.abstract_fn, self.ground_fn = abstract_fn, ground_fn

    def abstract(self, micro):
        return np.asarray(self.abstract_fn(micro))

    def ground(self, macro, shapes, rng):
        return list(self.ground_fn(macro, shapes, rng))


__all__ = ["BitsToInt", "Count", "FunctionMap", "Identity", "Majority", "Mean", "Projection", "Threshold",
           "ValueMap"]
