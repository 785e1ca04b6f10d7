"""Compiled CPU kernel for the evaluator's hot loop: per row, how many scores are ``>=`` each target score
(``>`` for the targets flagged strict: held-out disliked items, which rank before the items they tie with).

torch needs two passes per target (a comparison written to a buffer, then a sum), each over the whole row;
this kernel makes one fused pass per target over a row that stays in cache, with no buffer, and sums the row
for the finite check in the same call. Measured on 1,024 x 20,001 float32 scores with five targets per row
(``benchmarks/eval_vs_ranx.py``'s shape, 2-vCPU machine): 5.9 ms on one thread against torch's 18 ms, 3-5 ms
on two against 19.

The kernel is compiled by numba on first use (about one second, cached on disk afterwards) and releases the
GIL, so :func:`count_greater_equal` splits rows over ``torch.get_num_threads()`` Python threads: no numba
threading layer is involved, which keeps it safe under ``fork``, in several Python threads at once and next
to torch's OpenMP pool. When numba cannot be imported, or ``RECFRAME_NUMBA=0`` is set, :func:`available`
is False and the evaluator uses its torch path; both give identical counts (tested).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch
from torch import Tensor

try:  # numba is a declared dependency, but the evaluator must keep working without it
    import numba
except ImportError:  # pragma: no cover - exercised only where numba is missing
    numba = None

SUPPORTED_DTYPES = (torch.float32, torch.float64)
# Below this many scores a call is too small to be worth splitting over threads.
_MIN_ELEMENTS_PER_THREAD = 1 << 18

if numba is not None:

    # "reassoc" lets the row sum vectorise; no flag that assumes finite values is set, so NaN and inf
    # still propagate into the sum and compare as IEEE says (NaN >= x is False, as in torch).
    @numba.njit(nogil=True, cache=True, fastmath={"reassoc"})
    def _count_rows(scores, thresholds, strict, counts, row_sums):  # pragma: no cover - compiled
        n_rows, n_cols = scores.shape
        n_targets = thresholds.shape[1]
        for r in range(n_rows):
            row = scores[r]
            total = row.dtype.type(0)
            for j in range(1, n_cols):  # column 0 is padding: not part of the finite check
                total += row[j]
            row_sums[r] = total
            for i in range(n_targets):
                threshold = thresholds[r, i]
                count = 0
                if strict[r, i]:
                    for j in range(n_cols):
                        count += row[j] > threshold
                else:
                    for j in range(n_cols):
                        count += row[j] >= threshold
                counts[r, i] = count


def available(scores: Tensor) -> bool:
    """Whether :func:`count_greater_equal` can take ``scores`` (CPU, float32/float64, numba importable)."""
    return (numba is not None and os.environ.get("RECFRAME_NUMBA", "1") != "0"
            and scores.device.type == "cpu" and scores.dtype in SUPPORTED_DTYPES)


def count_greater_equal(
    scores: Tensor, thresholds: Tensor, strict: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """``(counts, row_sums)``: ``counts[r, i] = #{j : scores[r, j] >= thresholds[r, i]}`` over every column,
    or ``#{j : scores[r, j] > thresholds[r, i]}`` where ``strict[r, i]`` (optional ``[B, T]`` bool) is True
    (int64 ``[B, T]``), and ``row_sums[r]`` the sum of ``scores[r, 1:]`` in the scores' dtype (non-finite
    whenever the row holds NaN or +/-inf, or, rarely, when a huge finite sum overflows).

    Requires :func:`available`. ``thresholds`` is cast to the scores' dtype.
    """
    data = scores.detach().contiguous().numpy()
    limits = thresholds.detach().to(scores.dtype).contiguous().numpy()
    if strict is None:
        flags = np.zeros(limits.shape, dtype=np.bool_)
    else:
        flags = strict.detach().to(device="cpu", dtype=torch.bool).contiguous().numpy()
    n_rows = data.shape[0]
    counts = np.zeros((n_rows, limits.shape[1]), dtype=np.int64)
    row_sums = np.zeros(n_rows, dtype=data.dtype)
    n_threads = max(1, min(torch.get_num_threads(), data.size // _MIN_ELEMENTS_PER_THREAD, n_rows))
    if n_threads == 1:
        _count_rows(data, limits, flags, counts, row_sums)
    else:
        bounds = np.linspace(0, n_rows, n_threads + 1).astype(int)
        parts = [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        with ThreadPoolExecutor(n_threads) as pool:
            list(pool.map(lambda s: _count_rows(data[s], limits[s], flags[s], counts[s], row_sums[s]), parts))
    return torch.from_numpy(counts), torch.from_numpy(row_sums)
