"""Statistics of the benchmark: paired t-tests and bootstrap intervals between systems, Spearman's rho.

Pairs are per dialogue: two systems answered the same dialogues, so a metric's per-dialogue difference
removes the spread between dialogues. Dialogues where either value is undefined (NaN; e.g. Recovery
metrics of a dialogue without rejections) are dropped from that pair.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

__all__ = ["paired_ttest", "paired_bootstrap", "spearman"]


def _pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired values need equal shapes, got {a.shape} and {b.shape}.")
    ok = np.isfinite(a) & np.isfinite(b)
    return a[ok], b[ok]


def paired_ttest(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Student's paired t-test of ``mean(a - b) = 0`` (``scipy.stats.ttest_rel``, two-sided).

    Returns ``{"mean_diff", "t", "p", "n"}``; identical pairs give ``t = 0, p = 1``; fewer than two
    pairs give NaN ``t`` and ``p``.
    """
    a, b = _pairs(a, b)
    n = len(a)
    diff = a - b
    mean = float(diff.mean()) if n else math.nan
    if n < 2:
        return {"mean_diff": mean, "t": math.nan, "p": math.nan, "n": n}
    if np.all(diff == diff[0]):
        if diff[0] == 0:
            return {"mean_diff": 0.0, "t": 0.0, "p": 1.0, "n": n}
        return {"mean_diff": mean, "t": math.copysign(math.inf, mean), "p": 0.0, "n": n}
    res = sps.ttest_rel(a, b)
    return {"mean_diff": mean, "t": float(res.statistic), "p": float(res.pvalue), "n": n}


def paired_bootstrap(a: np.ndarray, b: np.ndarray, samples: int = 5000, seed: int = 0) -> list[float]:
    """95 % percentile interval of ``mean(a - b)`` over dialogues resampled with replacement."""
    a, b = _pairs(a, b)
    if len(a) == 0:
        return [math.nan, math.nan]
    diff = a - b
    rng = np.random.default_rng(seed)
    means = np.empty(samples)
    for start in range(0, samples, 500):  # bounded memory: 500 resamples at a time
        stop = min(samples, start + 500)
        means[start:stop] = diff[rng.integers(0, len(diff), (stop - start, len(diff)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return [float(low), float(high)]


def spearman(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Spearman's rank correlation (``scipy.stats.spearmanr``) over finite pairs: ``{"rho", "p", "n"}``."""
    x, y = _pairs(x, y)
    if len(x) < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return {"rho": math.nan, "p": math.nan, "n": len(x)}
    res = sps.spearmanr(x, y)
    return {"rho": float(res.statistic), "p": float(res.pvalue), "n": len(x)}
