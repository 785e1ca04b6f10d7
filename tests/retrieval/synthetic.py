"""Synthetic data and a brute-force reference for the retrieval tests."""

from __future__ import annotations

import numpy as np
import torch


def random_items(n_items: int, dim: int, seed: int = 0) -> np.ndarray:
    """``[n_items + 1, dim]`` float32 item matrix, row 0 = padding (zeros), like ``item_embeddings()``."""
    rng = np.random.default_rng(seed)
    items = rng.standard_normal((n_items + 1, dim)).astype(np.float32)
    items[0] = 0.0
    return items


def clustered(n: int, dim: int, n_clusters: int, seed: int, spread: float = 0.3) -> np.ndarray:
    """``n`` points around ``n_clusters`` Gaussian centres (the structure ANN indexes rely on)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_clusters, dim)).astype(np.float32)
    which = rng.integers(0, n_clusters, n)
    return (centres[which] + spread * rng.standard_normal((n, dim))).astype(np.float32)


def reference_top_k(queries: np.ndarray, items: np.ndarray, k: int,
                    exclude: list[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force top-k with torch: ``queries @ items.T``, padding column and excluded items at -inf."""
    scores = torch.from_numpy(queries) @ torch.from_numpy(items).T
    scores[:, 0] = -torch.inf
    for row, ids in enumerate(exclude or []):
        scores[row, torch.as_tensor(np.asarray(ids, dtype=np.int64))] = -torch.inf
    values, idx = torch.topk(scores, min(k, scores.shape[1]), dim=1)
    return idx.numpy(), values.numpy()
