"""Quality statistics of a semantic-ID assignment.

Over the real items (no padding row), per level ``l`` with ``K_l`` codes:

* **codebook usage** = ``|{codes used at level l}| / K_l``;
* **perplexity** = ``exp(H_l)`` with ``H_l = -sum_k p_k log p_k`` the (natural-log) entropy of the
  empirical code distribution ``p_k = #{items with code k at level l} / n``; it ranges from 1 (all
  items on one code) to ``min(n, K_l)`` (codes used uniformly);
* **collision rate** (whole path, before disambiguation) = fraction of items whose path is shared
  with at least one other item.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from recframe.tokenizers.collisions import path_groups


def codebook_usage(codes: np.ndarray, codebook_sizes: Sequence[int]) -> list[float]:
    """Fraction of the codes used at each level."""
    codes = np.asarray(codes)
    return [len(np.unique(codes[:, level])) / int(size) for level, size in enumerate(codebook_sizes)]


def perplexity(codes: np.ndarray) -> list[float]:
    """``exp(entropy)`` of the code distribution at each level (natural log)."""
    codes = np.asarray(codes)
    out = []
    for level in range(codes.shape[1]):
        _, counts = np.unique(codes[:, level], return_counts=True)
        p = counts / counts.sum()
        out.append(float(np.exp(-(p * np.log(p)).sum())))
    return out


def collision_rate(codes: np.ndarray) -> float:
    """Fraction of items whose full path is shared with another item."""
    _, size = path_groups(codes)
    return float((size > 1).mean()) if len(size) else 0.0


def sid_stats(semantic_codes: np.ndarray, codebook_sizes: Sequence[int], disambiguation_size: int
              ) -> dict[str, Any]:
    """All statistics of a fit, from the pre-disambiguation codes ``[n_items, L_sem]``.

    ``codebook_sizes`` are the semantic levels' sizes; ``disambiguation_size`` is the size of the
    appended level (0 when none was needed).
    """
    group, size = path_groups(semantic_codes)
    return {
        "codebook_usage": codebook_usage(semantic_codes, codebook_sizes),
        "perplexity": perplexity(semantic_codes),
        "collision_rate": collision_rate(semantic_codes),
        "n_unique_paths": int(group.max()) + 1 if len(group) else 0,
        "n_colliding_items": int((size > 1).sum()),
        "max_collision_group": int(size.max()) if len(size) else 0,
        "disambiguated": disambiguation_size > 0,
        "disambiguation_size": int(disambiguation_size),
    }
