"""Value domains: where a variable's values live and how to draw them.

A :class:`Domain` draws ``n`` values of one variable as an array ``[n, *shape]``.
Domains play three roles in a causal abstraction (see :mod:`~causal_ext.abstraction.cae`):

* the **natural distribution** of an exogenous variable (what the system does when nobody
  intervenes), given as a node's ``prior``;
* the **intervention distribution** of a high-level variable (top-down CAE samples macro
  interventions from it);
* the **support** of a low-level variable (bottom-up CAE samples micro interventions from
  it, and the faithfulness test draws perturbations of unmapped variables from it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import numpy as np


def _shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    out = tuple(int(s) for s in shape)
    if any(s < 1 for s in out):
        raise ValueError(f"shape={out}: every dimension must be >= 1.")
    return out


def _check_n(n: int) -> int:
    if int(n) < 1:
        raise ValueError(f"n={n}: the number of draws must be >= 1.")
    return int(n)


class Domain(ABC):
    """A set of values of one variable with a sampling distribution over it.

    Attributes:
        shape: shape of one value (``()`` for a scalar).
    """

    shape: tuple[int, ...] = ()

    @abstractmethod
    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` independent values, shape ``[n, *shape]``."""


class Categorical(Domain):
    """Each element drawn independently from ``values`` with probabilities ``probs`` (uniform by default).

    Args:
        values: the possible values of one element.
        probs: their probabilities (normalised; uniform when None).
        shape: shape of one value (elements are i.i.d.).
    """

    def __init__(self, values: Sequence[float], probs: Sequence[float] | None = None,
                 shape: int | Sequence[int] = ()) -> None:
        self.values = np.asarray(values)
        if self.values.ndim != 1 or len(self.values) == 0:
            raise ValueError("Categorical: values must be a non-empty 1-D sequence.")
        if probs is None:
            p = np.full(len(self.values), 1.0 / len(self.values))
        else:
            p = np.asarray(probs, dtype=float)
            if p.shape != self.values.shape or np.any(p < 0) or p.sum() <= 0:
                raise ValueError("Categorical: probs must be non-negative, one per value, with a positive "
                                 "sum.")
            p = p / p.sum()
        self.probs = p
        self.shape = _shape(shape)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        idx = rng.choice(len(self.values), size=(_check_n(n), *self.shape), p=self.probs)
        return self.values[idx]


class Bernoulli(Categorical):
    """0/1 integers with ``P(1) = p``, i.i.d. per element."""

    def __init__(self, p: float = 0.5, shape: int | Sequence[int] = ()) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Bernoulli: p={p} must lie in [0, 1].")
        super().__init__(np.array([0, 1]), [1.0 - p, p], shape)


class Uniform(Domain):
    """Uniform on ``[low, high]`` per element (``low``/``high`` broadcast to ``shape``)."""

    def __init__(self, low: float | np.ndarray, high: float | np.ndarray,
                 shape: int | Sequence[int] = ()) -> None:
        self.shape = _shape(shape)
        self.low = np.broadcast_to(np.asarray(low, dtype=float), self.shape)
        self.high = np.broadcast_to(np.asarray(high, dtype=float), self.shape)
        if np.any(self.high < self.low):
            raise ValueError("Uniform: high must be >= low.")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        u = rng.random((_check_n(n), *self.shape))
        return self.low + u * (self.high - self.low)


class Normal(Domain):
    """Independent Gaussians ``N(mean, std^2)`` per element."""

    def __init__(self, mean: float | np.ndarray = 0.0, std: float | np.ndarray = 1.0,
                 shape: int | Sequence[int] = ()) -> None:
        self.shape = _shape(shape)
        self.mean = np.broadcast_to(np.asarray(mean, dtype=float), self.shape)
        self.std = np.broadcast_to(np.asarray(std, dtype=float), self.shape)
        if np.any(self.std < 0):
            raise ValueError("Normal: std must be >= 0.")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.mean + self.std * rng.standard_normal((_check_n(n), *self.shape))


class Constant(Domain):
    """Always the same value (the natural state of a switched-off component, for instance)."""

    def __init__(self, value: float | np.ndarray) -> None:
        self.value = np.asarray(value)
        self.shape = self.value.shape

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.broadcast_to(self.value, (_check_n(n), *self.shape)).copy()


class Empirical(Domain):
    """Rows drawn with replacement from stored examples ``[m, *shape]`` (real inputs, for instance)."""

    def __init__(self, examples: np.ndarray) -> None:
        self.examples = np.asarray(examples)
        if self.examples.ndim < 1 or len(self.examples) == 0:
            raise ValueError("Empirical: examples must be a non-empty array [m, *shape].")
        self.shape = self.examples.shape[1:]

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.examples[rng.integers(0, len(self.examples), size=_check_n(n))].copy()


class FunctionDomain(Domain):
    """A custom sampler ``fn(n, rng) -> [n, *shape]`` (for structured supports such as agent sets).

    Args:
        fn: the sampler.
        shape: shape of one value (checked on every draw).
    """

    def __init__(self, fn: Callable[[int, np.random.Generator], np.ndarray],
                 shape: int | Sequence[int] = ()) -> None:
        self.fn = fn
        self.shape = _shape(shape)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        out = np.asarray(self.fn(_check_n(n), rng))
        if out.shape != (n, *self.shape):
            raise ValueError(f"FunctionDomain: the sampler returned shape {out.shape}, expected "
                             f"{(n, *self.shape)}.")
        return out


__all__ = ["Bernoulli", "Categorical", "Constant", "Domain", "Empirical", "FunctionDomain", "Normal",
           "Uniform"]
