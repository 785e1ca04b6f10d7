"""Synthetic item features with planted clusters for the tokenizer tests."""

from __future__ import annotations

import numpy as np


def planted(n: int = 300, k: int = 8, d: int = 16, spread: float = 0.15, seed: int = 0,
            equal: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(features [n + 1, d] with a zero padding row, true cluster per item [n])``.

    Cluster centres are random unit vectors; items are centre + ``spread`` * N(0, I/d)
    (clusters of equal size with ``equal=True``, otherwise uniform random labels).
    """
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((k, d))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    labels = np.repeat(np.arange(k), n // k) if equal else rng.integers(0, k, n)
    labels = rng.permutation(labels)
    x = centres[labels] + spread * rng.standard_normal((len(labels), d)) / np.sqrt(d)
    return np.vstack([np.zeros((1, d)), x]).astype(np.float32), labels
