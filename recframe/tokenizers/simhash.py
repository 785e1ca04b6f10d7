"""SimHash semantic IDs (random-hyperplane LSH; Charikar, 2002), the training-free IDs of FLASH.

``n_levels * bits_per_level`` random hyperplanes ``w_j ~ N(0, I_d)`` give one sign bit each,
``bit_j(x) = 1 if <w_j, x> >= 0 else 0``; consecutive groups of ``bits_per_level`` bits form one
level's code, most significant bit first, so level ``l`` has ``2 ** bits_per_level`` codes. Two
vectors at angle ``theta`` agree on each bit with probability ``1 - theta / pi``, so nearer
vectors (in angle) share more bits.

Choice left open by FLASH's abstract, and what is done here: ``center=True`` (default) subtracts
the mean item vector (learned in ``fit``, stored as ``mean_``) before hashing. Sentence-encoder
embeddings share a common direction (anisotropy), so raw hyperplanes through the origin put most
items on one side and many bits carry little information; centring makes the bits balanced.
``center=False`` is textbook SimHash. The projection is drawn from
``numpy.random.default_rng(seed)`` as a ``[d, n_levels * bits_per_level]`` standard-normal matrix
(``projection_``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from recframe.tokenizers.base import SIDTokenizer, check_positive_int


def simhash_bits(x: np.ndarray, projection: np.ndarray) -> np.ndarray:
    """Sign bits ``[n, n_bits]`` (uint8): 1 where ``x @ projection >= 0``."""
    return (np.asarray(x, dtype=np.float64) @ np.asarray(projection, dtype=np.float64) >= 0).astype(np.uint8)


def bits_to_codes(bits: np.ndarray, bits_per_level: int) -> np.ndarray:
    """Group bits ``[n, L * b]`` into ``L`` codes of ``b`` bits each, most significant bit first."""
    n, total = bits.shape
    if total % bits_per_level:
        raise ValueError(f"{total} bits do not split into levels of bits_per_level={bits_per_level}.")
    weights = 1 << np.arange(bits_per_level - 1, -1, -1, dtype=np.int64)
    return bits.reshape(n, total // bits_per_level, bits_per_level).astype(np.int64) @ weights


def simhash_codes(x: np.ndarray, projection: np.ndarray, bits_per_level: int) -> np.ndarray:
    """SimHash codes ``[n, L]`` of the rows of ``x`` under a fixed ``projection [d, L * b]``."""
    return bits_to_codes(simhash_bits(x, projection), bits_per_level)


class SimHashTokenizer(SIDTokenizer):
    """Random-hyperplane SimHash tokenizer (FLASH's semantic IDs).

    Args:
        n_levels: number of levels ``L``.
        bits_per_level: bits per level ``b`` (``2 ** b`` codes per level; at most 30).
        center: subtract the mean item vector before hashing (module docstring).
        seed: seed of the random hyperplanes.

    Fitted attributes: ``projection_`` (``[d, L * b]`` float64), ``mean_`` (``[d]``), ``table_``.
    """

    name = "simhash"

    def __init__(self, n_levels: int = 3, bits_per_level: int = 8, *, center: bool = True,
                 seed: int = 0) -> None:
        self.n_levels = check_positive_int("n_levels", n_levels)
        self.bits_per_level = check_positive_int("bits_per_level", bits_per_level)
        if self.bits_per_level > 30:
            raise ValueError(f"bits_per_level must be <= 30 (2**b codes per level); got {bits_per_level}.")
        self.center = bool(center)
        self.seed = check_positive_int("seed", seed, minimum=0)

    @property
    def codebook_sizes(self) -> tuple[int, ...]:
        return (2 ** self.bits_per_level,) * self.n_levels

    def _settings(self) -> dict[str, Any]:
        return {"n_levels": self.n_levels, "bits_per_level": self.bits_per_level, "center": self.center,
                "seed": self.seed}

    def _fit_codes(self, items: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        rng = np.random.default_rng(self.seed)
        self.projection_ = rng.standard_normal((items.shape[1], self.n_levels * self.bits_per_level))
        self.mean_ = items.astype(np.float64).mean(0) if self.center else np.zeros(items.shape[1])
        bits = simhash_bits(items - self.mean_, self.projection_)
        return bits_to_codes(bits, self.bits_per_level), {"bit_balance": bits.mean(0).tolist()}

    def _encode(self, vectors: np.ndarray) -> np.ndarray:
        return simhash_codes(vectors - self.mean_, self.projection_, self.bits_per_level)
