"""Polynomial feature maps for fitting force fields from trajectories."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations_with_replacement

import numpy as np

__all__ = ["PolynomialBasis"]


@dataclass(frozen=True)
class PolynomialBasis:
    """All monomials of the coordinates up to total ``degree``, constant included (``degree=1``: ``1, x_i``).

    A force field ``F(x) = W^T phi(x)`` in this span is linear in the coefficients ``W``, so it is fitted by
    least squares and every estimator built on it reduces to per-path sufficient statistics.
    """

    degree: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.degree, int | np.integer) or self.degree < 1:
            raise ValueError(f"degree must be an integer >= 1, got {self.degree!r}")

    def exponents(self, dim: int) -> list[tuple[int, ...]]:
        """Index tuples of the monomials (``()`` is the constant)."""
        out: list[tuple[int, ...]] = []
        for k in range(self.degree + 1):
            out.extend(combinations_with_replacement(range(dim), k))
        return out

    def size(self, dim: int) -> int:
        """Number of features for ``dim`` coordinates."""
        return len(self.exponents(dim))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Features of ``x`` ``(..., dim)``: shape ``(..., size(dim))``."""
        x = np.asarray(x, dtype=float)
        cols = [np.prod(x[..., list(idx)], axis=-1) if idx else np.ones(x.shape[:-1])
                for idx in self.exponents(x.shape[-1])]
        return np.stack(cols, axis=-1)
