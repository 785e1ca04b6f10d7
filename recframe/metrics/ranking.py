"""Pure tensor functions for full-ranking evaluation: ranks of held-out items and per-user metrics.

Conventions (shared by the whole :mod:`recframe.metrics` package)
------------------------------------------------------------------
* Items carry dense ids ``1..n_items``; id/column ``0`` is padding and is never ranked.
* ``scores`` is a ``[B, n_items + 1]`` float tensor, one row per user of the chunk.
* ``targets`` is a padded ``[B, T]`` LongTensor of held-out items (``0`` = pad) and ``labels`` the
  matching ``[B, T]`` integer tensor (+1 liked, -1 disliked, 0 unknown rating).
* ``seen`` is an optional padded ``[B, S]`` LongTensor of items to mask (``0`` = pad). Masked items are
  excluded from the ranking (as if their score were ``-inf``). **A held-out item is never masked**, even
  when it also appears in ``seen``.
* A target id repeated within one row counts once: the first occurrence (and its label) is kept and later
  copies are treated as padding.

Eligible items of a row are the columns ``1..n_items`` that are not masked. The 0-based rank ``r_t`` of a
held-out item ``t`` is the number of eligible items ranked before it, where ties are broken
*pessimistically*, the worst case for every metric at once. Among items with equal scores the order is
(``disliked_ties="first"``, the default):

1. held-out disliked items (label -1), so a tie can only push a disliked item *up* (bad for signed metrics);
2. eligible non-held-out (unobserved) items;
3. held-out items with unknown label (0);
4. held-out liked items (+1), so a tie can only push a liked item *down*;

and, inside one group of held-out items, by item id ascending. With ``disliked_ties="last"`` group 1 moves
after group 2 (every held-out item ranks after every unobserved item with its score): the worst case when
disliked held-out items are *relevant*, as for the standard metrics under ``relevance="all"``. Hence the
ranks of the held-out items of a row are distinct.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from recframe.metrics import cpu_kernels

STANDARD_METRICS: tuple[str, ...] = ("recall", "hr", "ndcg", "mrr", "precision", "map")
"""Per-user standard metrics computed by :func:`standard_metrics` (``item_coverage`` is corpus-level)."""


RANK_STRATEGIES: tuple[str, ...] = ("auto", "sort", "compare")
DISLIKED_TIES: tuple[str, ...] = ("first", "last")
"""Where held-out disliked items go among equal scores (see the module docstring)."""
# "auto": up to this many targets per row, streaming comparisons beat one full sort per row (measured on CPU:
# 2-7x faster at 64 targets for 1.7k and 20k items; the sort wins from ~128 targets on 1.7k items).
_COMPARE_MAX_TARGETS = 64
# Scores per block of rows and per torch thread in the streaming CPU passes (4 MiB of float32 each).
# Measured on 20k x 20k (benchmarks/eval_vs_ranx.py): 2 MiB blocks made 2 threads slower than 1 (thousands
# of parallel regions too small to split); 4 MiB per thread: 1 thread -1 to -9 %, 2 threads -36 to -47 %.
_CPU_BLOCK_ELEMENTS = 1 << 20


class NonFiniteScoresError(ValueError):
    """A model produced NaN or +/-inf scores for real items (columns ``1..n_items``)."""


def check_finite_scores(scores: Tensor, model_name: str = "model") -> None:
    """Raise :class:`NonFiniteScoresError` if any score in columns ``1..n_items`` is NaN or +/-inf.

    The check runs on all real items *before* masking, so a non-finite score is never silently counted as a
    hit or a miss. Column 0 (padding) is ignored. The message names ``model_name`` and how many users and
    entries are affected.
    """
    items = scores[:, 1:]
    # Fast path: the float32 sum of finite scores is finite unless it overflows; NaN/inf always propagate.
    if bool(torch.isfinite(items.sum(dtype=torch.float32))):
        return
    bad = ~torch.isfinite(items)
    if bool(bad.any()):
        n_entries = int(bad.sum())
        n_users = int(bad.any(dim=1).sum())
        n_nan = int(torch.isnan(items).sum())
        raise NonFiniteScoresError(
            f"model {model_name!r} produced non-finite scores: {n_entries} entries"
            f" ({n_nan} NaN, {n_entries - n_nan} +/-inf) for {n_users} of {scores.shape[0]} user(s) in this"
            " chunk; fix the model (e.g. lower the learning rate, check for division by zero / log(0))"
        )


def eligible_mask(n_cols: int, targets: Tensor, seen: Tensor | None = None) -> Tensor:
    """Boolean ``[B, n_cols]`` mask of the items that take part in the ranking.

    Column 0 is never eligible, items in ``seen`` are not eligible, and held-out ``targets`` are always
    eligible (the held-out rule wins over ``seen``).
    """
    mask = torch.ones(targets.shape[0], n_cols, dtype=torch.bool, device=targets.device)
    if seen is not None and seen.numel() > 0:
        mask.scatter_(1, seen, False)
    mask.scatter_(1, targets, True)
    mask[:, 0] = False
    return mask


def dedup_targets(targets: Tensor) -> tuple[Tensor, Tensor]:
    """Mark the valid (non-pad, first-occurrence) targets of each row.

    Returns ``(valid, id_perm)`` where ``valid`` is a ``[B, T]`` bool mask and ``id_perm`` the stable
    permutation that sorts each row of ``targets`` by item id (reused by :func:`target_ranks`).
    """
    ids_sorted, id_perm = torch.sort(targets, dim=1, stable=True)
    dup_sorted = torch.zeros_like(targets, dtype=torch.bool)
    dup_sorted[:, 1:] = (ids_sorted[:, 1:] == ids_sorted[:, :-1]) & (ids_sorted[:, 1:] > 0)
    dup = torch.zeros_like(dup_sorted).scatter_(1, id_perm, dup_sorted)
    return (targets > 0) & ~dup, id_perm


def target_ranks(
    scores: Tensor,
    targets: Tensor,
    labels: Tensor,
    seen: Tensor | None = None,
    model_name: str = "model",
    strategy: str = "auto",
    disliked_ties: str = "first",
) -> tuple[Tensor, Tensor]:
    """Pessimistic 0-based ranks of the held-out items among the eligible items of each row.

    ``r_t = #{eligible non-held-out j : s_j >= s_t} + #{held-out u ordered before t}``, where held-out items
    are ordered by (score desc, label asc, item id asc); with ``disliked_ties="first"`` (default) a held-out
    disliked ``t`` counts only ``s_j > s_t``, so it ranks before the unobserved items it ties with. See the
    module docstring for the rules.

    Counting the non-held-out items scoring ``>= s_t`` uses ``strategy``: ``"sort"`` sorts each masked row
    once and calls ``torch.searchsorted`` (``O(n log n)`` per row), ``"compare"`` compares every column with
    each target score (``O(T n)``) and subtracts the few excluded columns (padding, seen and held-out items),
    so no masked copy of ``scores`` is made; on CPU it streams over cache-sized blocks of rows. ``"auto"``
    picks ``"compare"`` for ``T <= 64``. Both are exact. The held-out items are ordered among themselves with
    three ``[B, T]`` sorts; no ``[B, T, n_items]`` tensor is built.

    Returns ``(ranks, valid)``: ``ranks`` is an int64 ``[B, T]`` tensor (``n_items + 1`` for padding and
    duplicate entries, which is larger than any real rank) and ``valid`` the ``[B, T]`` bool mask of real
    targets. Raises :class:`NonFiniteScoresError` on NaN/inf scores.
    """
    if strategy not in RANK_STRATEGIES:
        raise ValueError(f"strategy must be one of {list(RANK_STRATEGIES)}, got {strategy!r}")
    if disliked_ties not in DISLIKED_TIES:
        raise ValueError(f"disliked_ties must be one of {list(DISLIKED_TIES)}, got {disliked_ties!r}")
    n_cols = scores.shape[1]
    if strategy == "auto":
        strategy = "compare" if targets.shape[1] <= _COMPARE_MAX_TARGETS and n_cols < 2**24 else "sort"
    if strategy == "sort":
        check_finite_scores(scores, model_name)
    valid, perm = dedup_targets(targets)
    target_scores = scores.gather(1, targets).masked_fill(~valid, float("-inf"))
    # strict[b, t]: count only the unobserved items scoring strictly above t (a disliked t goes first)
    strict = valid & (labels == -1) if disliked_ties == "first" else None

    # Order the held-out items by (score desc, label asc, id asc) with stable sorts on the minor keys first.
    _, p_label = torch.sort(labels.gather(1, perm), dim=1, stable=True)
    perm = perm.gather(1, p_label)
    _, p_score = torch.sort(target_scores.gather(1, perm), dim=1, descending=True, stable=True)
    perm = perm.gather(1, p_score)
    arange = torch.arange(targets.shape[1], device=targets.device).expand_as(targets)
    position = torch.empty_like(perm).scatter_(1, perm, arange)

    if strategy == "compare":
        n_greater_equal = _count_all_greater_equal(scores, target_scores, model_name, strict)
        n_greater_equal -= _count_excluded_greater_equal(scores, target_scores, targets, seen, strict)
    else:
        others = eligible_mask(n_cols, targets, seen)
        others.scatter_(1, targets, False)
        sorted_scores = torch.sort(scores.masked_fill(~others, float("-inf")), dim=1).values
        target_scores = target_scores.contiguous()
        n_greater_equal = n_cols - torch.searchsorted(sorted_scores, target_scores, side="left")
        if strict is not None and bool(strict.any()):
            n_greater = n_cols - torch.searchsorted(sorted_scores, target_scores, side="right")
            n_greater_equal = torch.where(strict, n_greater, n_greater_equal)

    ranks = (n_greater_equal + position).masked_fill(~valid, n_cols)
    return ranks, valid


def _block_rows(scores: Tensor) -> int:
    """Rows per block of the streaming passes over ``scores``: 4 MiB per torch thread on CPU, else all."""
    if scores.device.type != "cpu":
        return max(1, scores.shape[0])
    return max(1, _CPU_BLOCK_ELEMENTS * torch.get_num_threads() // max(1, scores.shape[1]))


def _count_all_greater_equal(
    scores: Tensor, target_scores: Tensor, model_name: str, strict: Tensor | None = None
) -> Tensor:
    """``[B, T]`` int64 counts of the columns of ``scores`` (all of them) that are ``>=`` each target score,
    or ``>`` it where ``strict`` (``[B, T]`` bool, optional) is True.

    On CPU with float32/float64 scores this is the compiled kernel of :mod:`recframe.metrics.cpu_kernels`
    (one fused pass per target, rows split over torch's thread count); otherwise the torch path below.
    Each comparison writes 0/1 into a reused float buffer and is summed (float sums of 0/1 are exact below
    ``2**24`` columns; float64 is used above). Reusing one buffer per cache-sized block of rows avoids
    allocating (and page-faulting) a fresh ``[B, n_items + 1]`` tensor per comparison, which dominated the
    cost. The same pass sums each block to run the finite check of :func:`check_finite_scores` without a
    second read of ``scores``. Strict targets of a column cost one more pass (``==``, subtracted) on the
    torch path only.
    """
    if cpu_kernels.available(scores):
        counts, row_sums = cpu_kernels.count_greater_equal(scores, target_scores, strict)
        if not bool(torch.isfinite(row_sums).all()):
            check_finite_scores(scores, model_name)
        return counts
    batch, n_cols = scores.shape
    n_targets = target_scores.shape[1]
    dtype = torch.float32 if n_cols < 2**24 else torch.float64
    rows = min(_block_rows(scores), max(1, batch))
    counts = torch.zeros(batch, n_targets, dtype=dtype, device=scores.device)
    buffer = torch.empty(rows, n_cols, dtype=dtype, device=scores.device)
    block_sums = []
    for start in range(0, batch, rows):
        block = scores[start : start + rows]
        ones = buffer[: block.shape[0]]
        block_sums.append(block[:, 1:].sum(dtype=torch.float32))
        for i in range(n_targets):
            threshold = target_scores[start : start + rows, i : i + 1]
            torch.ge(block, threshold, out=ones)
            counts[start : start + rows, i] = ones.sum(dim=1)
            if strict is not None and bool(strict[start : start + rows, i].any()):
                torch.eq(block, threshold, out=ones)
                equal = ones.sum(dim=1)
                counts[start : start + rows, i] -= torch.where(strict[start : start + rows, i], equal, 0)
    # A finite float32 block sum proves the block finite; otherwise the exact check decides (and raises).
    if block_sums and not bool(torch.isfinite(torch.stack(block_sums)).all()):
        check_finite_scores(scores, model_name)
    return counts.to(torch.long)


def _count_excluded_greater_equal(
    scores: Tensor, target_scores: Tensor, targets: Tensor, seen: Tensor | None, strict: Tensor | None = None
) -> Tensor:
    """``[B, T]`` counts of the distinct excluded columns (padding 0, seen and held-out items) ``>=`` each
    target score (``>`` where ``strict``); subtracted from :func:`_count_all_greater_equal` this leaves the
    eligible non-held-out items."""
    parts = [targets.new_zeros(targets.shape[0], 1), targets]
    if seen is not None and seen.numel() > 0:
        parts.append(seen.to(targets.dtype))
    excluded = torch.sort(torch.cat(parts, dim=1), dim=1).values
    first = torch.ones_like(excluded, dtype=torch.bool)
    first[:, 1:] = excluded[:, 1:] != excluded[:, :-1]
    excluded_scores = scores.gather(1, excluded)
    hits = excluded_scores[:, None, :] >= target_scores[:, :, None]
    if strict is not None:
        hits &= (excluded_scores[:, None, :] > target_scores[:, :, None]) | ~strict[:, :, None]
    hits &= first[:, None, :]
    return hits.sum(dim=2)


def topk_items(scores: Tensor, eligible: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Top-``k`` eligible items of each row with :func:`torch.topk` (ties broken by topk's own order).

    Returns ``(items, ok)``, both ``[B, min(k, n_cols)]``; ``ok`` is False where a row has fewer than ``k``
    eligible items (those slots hold masked items and must be ignored).
    """
    k = min(k, scores.shape[1])
    _, items = torch.topk(scores.masked_fill(~eligible, float("-inf")), k, dim=1, sorted=True)
    ok = eligible.gather(1, items)
    return items, ok


def masked_topk(scores: Tensor, targets: Tensor, seen: Tensor | None, k: int) -> tuple[Tensor, Tensor]:
    """Top-``k`` eligible items per row for the evaluator: :func:`recframe.metrics.topk.masked_top_k`.

    ``seen`` items are excluded, held-out ``targets`` kept, the padding column never returned. Returns
    ``(items, ok)``, both ``[B, min(k, n_items)]``; ``ok`` is False in the slots of rows with fewer than ``k``
    eligible items. NaN/inf scores of real items raise :class:`NonFiniteScoresError`.
    """
    from recframe.metrics.topk import masked_top_k

    top = masked_top_k(scores, k, exclude=seen, keep=targets)
    return top.items, top.valid


def ideal_dcg_table(max_k: int, device: torch.device | str | None = None) -> Tensor:
    """float64 table ``idcg[j] = sum_{i<j} 1/log2(i+2)`` for ``j = 0..max_k``."""
    discounts = 1.0 / torch.log2(torch.arange(max_k, dtype=torch.float64, device=device) + 2.0)
    return torch.cat([torch.zeros(1, dtype=torch.float64, device=device), torch.cumsum(discounts, 0)])


def standard_metrics(
    ranks: Tensor, relevant: Tensor, ks: Sequence[int], metrics: Sequence[str] = STANDARD_METRICS
) -> dict[str, Tensor]:
    """Per-user standard metrics at every ``K`` in ``ks``: ``{name: float64 [B, len(ks)]}``.

    ``R`` is the set of relevant held-out items of a user (``relevant`` mask), ``r_t`` the 0-based rank from
    :func:`target_ranks` and ``hit_t = [r_t < K]``. Users with ``|R| = 0`` get 0 everywhere and must be
    excluded from averages by the caller.

    * ``recall``:    ``sum_{t in R} hit_t / |R|``
    * ``hr``:        ``1[exists t in R: hit_t]``
    * ``precision``: ``sum_{t in R} hit_t / K``
    * ``ndcg``:      ``sum_{t in R, hit_t} 1/log2(r_t + 2) / IDCG`` with
      ``IDCG = sum_{i < min(|R|, K)} 1/log2(i + 2)``
    * ``mrr``:       ``1/(min_{t in R} r_t + 1)`` if that rank ``< K`` else 0
    * ``map``:       ``sum_{t in R, hit_t} P@(r_t + 1) / |R|`` with ``P@n = #{u in R: r_u < n} / n`` --
      average precision cut at K with denominator ``|R|`` (not ``min(|R|, K)``), exactly as ranx's ``map@k``.
    """
    unknown = set(metrics) - set(STANDARD_METRICS)
    if unknown:
        raise ValueError(f"unknown per-user metrics {sorted(unknown)}; valid: {list(STANDARD_METRICS)}")
    device = ranks.device
    kt = torch.as_tensor(list(ks), dtype=torch.long, device=device)
    n_rel = relevant.sum(dim=1)
    n_rel_f = n_rel.clamp(min=1).to(torch.float64)[:, None]
    big = ranks.new_full((), torch.iinfo(torch.long).max)
    rel_ranks = torch.where(relevant, ranks, big)
    hit = rel_ranks[:, :, None] < kt  # [B, T, nK]
    n_hit = hit.sum(dim=1, dtype=torch.float64)  # [B, nK]
    out: dict[str, Tensor] = {}
    if "recall" in metrics:
        out["recall"] = n_hit / n_rel_f
    if "hr" in metrics:
        out["hr"] = (n_hit > 0).to(torch.float64)
    if "precision" in metrics:
        out["precision"] = n_hit / kt.to(torch.float64)
    if "ndcg" in metrics:
        discount = 1.0 / torch.log2(ranks.to(torch.float64) + 2.0)  # [B, T]
        dcg = (hit * discount[:, :, None]).sum(dim=1)
        idcg = ideal_dcg_table(int(max(ks)), device)[torch.minimum(n_rel[:, None], kt)]
        out["ndcg"] = torch.where(idcg > 0, dcg / idcg.clamp(min=1e-300), torch.zeros_like(dcg))
    if "mrr" in metrics:
        best = rel_ranks.min(dim=1).values[:, None] if ranks.shape[1] else big.expand(ranks.shape[0], 1)
        rr = 1.0 / (best.clamp(max=torch.iinfo(torch.int32).max).to(torch.float64) + 1.0)
        out["mrr"] = torch.where(best < kt, rr, torch.zeros_like(rr))
    if "map" in metrics:
        sorted_ranks = torch.sort(rel_ranks, dim=1).values  # relevant items first, by rank
        n_before = torch.arange(1, ranks.shape[1] + 1, device=device, dtype=torch.float64)
        prec = n_before / (sorted_ranks.clamp(max=torch.iinfo(torch.int32).max).to(torch.float64) + 1.0)
        cut = sorted_ranks[:, :, None] < kt
        out["map"] = (cut * prec[:, :, None]).sum(dim=1) / n_rel_f
    return out
