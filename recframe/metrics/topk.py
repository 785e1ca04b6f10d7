"""One masked top-K for the evaluator's item coverage, :class:`~recframe.serving.Recommender` and the CAE.

A score matrix ``s`` is ``[B, n_items + 1]``; column 0 is padding. For row ``b`` the *eligible* items are

    E_b = {1..n_items} \\ X_b  ∪  (K_b ∩ {1..n_items})

where ``X_b`` are the row's excluded items (seen items) and ``K_b`` the items kept even when excluded (the
evaluator's held-out targets). :func:`masked_top_k` returns the ``w = min(k, n_items)`` best eligible items
by score, best first, with a ``valid`` mask that is False in the slots beyond ``|E_b|`` (those slots hold item
0 and score ``-inf``). The padding id is never valid.

Non-finite scores are an error, never a ranking: ``torch.topk`` ranks NaN first, so a NaN would be served as
the best item (or the padding column would be). A NaN or ``+/-inf`` score of a real item raises
:class:`~recframe.metrics.ranking.NonFiniteScoresError` naming the model and the rows (users). Callers that
pass scores which are already masked with ``-inf`` (``masked_scores=True``) only get NaN and ``+inf``
refused; their ``-inf`` entries count as excluded.

Memory: rows are processed in cache-sized blocks through one reused buffer, so neither a ``[B, n_items + 1]``
mask nor a masked copy of the whole matrix is allocated.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from recframe.metrics.ranking import NonFiniteScoresError, _block_rows

#: a padded ``[B, S]`` tensor of item ids (0 = none), or CSR ``(indptr [B + 1], items)``
Exclude = Tensor | tuple[Any, Any]

#: users named in a non-finite-score error message, at most
_NAMED_USERS = 10


class TopK(NamedTuple):
    """The answer of :func:`masked_top_k`, each ``[B, min(k, n_items)]``, best first.

    Attributes:
        items: int64 item ids; 0 in invalid slots.
        scores: the items' scores; ``-inf`` in invalid slots.
        valid: True where the slot holds an eligible item (a prefix of each row).
    """

    items: Tensor
    scores: Tensor
    valid: Tensor


def check_k(k: Any, name: str = "k") -> int:
    """``k`` as an ``int >= 1``; anything else (``2.5``, ``"10"``, ``True``, ``0``) raise ``ValueError``."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise ValueError(f"{name}={k!r} ({type(k).__name__}); {name} must be a whole number >= 1, e.g. "
                         f"{name}=10.")
    if k < 1:
        raise ValueError(f"{name}={k}; {name} must be >= 1 (ask for at least one item).")
    return int(k)


def check_finite_rows(values: Tensor, *, model_name: str = "model", users: Sequence[Any] | None = None,
                      first_column: int = 1, masked_scores: bool = False, what: str = "scores") -> None:
    """Raise :class:`~.ranking.NonFiniteScoresError` if ``values[:, first_column:]`` holds NaN or +/-inf.

    The message names ``model_name``, how many entries and rows are affected and (from ``users``, one name per
    row, or the row numbers) the first affected users. With ``masked_scores=True``, ``-inf`` is allowed (it
    marks an excluded item). A finite float32 sum proves the rows finite, so the exact check runs only then.
    """
    part = values[:, first_column:]
    if part.numel() == 0 or bool(torch.isfinite(part.sum(dtype=torch.float32))):
        return
    bad = torch.isnan(part) | (part == float("inf"))
    if not masked_scores:
        bad |= part == float("-inf")
    if not bool(bad.any()):
        return
    rows = torch.nonzero(bad.any(dim=1)).flatten().tolist()
    names = [str(users[r]) if users is not None else f"row {r}" for r in rows[:_NAMED_USERS]]
    more = f" and {len(rows) - _NAMED_USERS} more" if len(rows) > _NAMED_USERS else ""
    n_entries, n_nan = int(bad.sum()), int(torch.isnan(part).sum())
    raise NonFiniteScoresError(
        f"model {model_name!r} produced non-finite {what}: {n_entries} entries ({n_nan} NaN, "
        f"{n_entries - n_nan} +/-inf) for {len(rows)} of {values.shape[0]} user(s): {', '.join(names)}{more};"
        " fix the model (e.g. lower the learning rate, check for division by zero / log(0))"
    )


def masked_top_k(scores: Tensor, k: int, *, exclude: Exclude | None = None, keep: Tensor | None = None,
                 model_name: str = "model", users: Sequence[Any] | None = None,
                 masked_scores: bool = False, check_finite: bool = True) -> TopK:
    """The top-``k`` eligible items of each row of ``scores`` ``[B, n_items + 1]`` (module docstring).

    Args:
        scores: full-catalogue scores; column 0 is padding and is never returned.
        k: items per row, an int >= 1; the width is ``min(k, n_items)`` and rows with fewer eligible items
            have invalid slots at the end.
        exclude: items removed per row, a padded ``[B, S]`` id tensor (0 = none) or CSR ``(indptr, items)``
            (numpy or torch).
        keep: ``[B, T]`` items eligible even if excluded (0 = none).
        model_name, users: named in the :class:`~recframe.metrics.ranking.NonFiniteScoresError` raised for
            NaN/inf scores of real items (``users``: one name per row).
        masked_scores: ``scores`` already hold ``-inf`` for excluded items; only NaN and ``+inf`` raise.
        check_finite: check the rows for NaN/inf (default). ``False`` only where the caller has already
            checked the same rows (the evaluator checks every chunk before any metric family runs).
    """
    k = check_k(k)
    if scores.dim() != 2 or scores.shape[1] < 1:
        raise ValueError(f"scores must be [B, n_items + 1], got {tuple(scores.shape)}")
    if not scores.is_floating_point():  # integer scores (counts): -inf masking needs a float row
        scores = scores.float()
    batch, n_cols = scores.shape
    width = min(k, n_cols - 1)
    csr = _csr(exclude, batch, scores.device) if isinstance(exclude, tuple) else None
    if users is not None and len(users) != batch:
        raise ValueError(f"users names {len(users)} rows but scores has {batch}")
    if width == 0 or batch == 0:
        empty = torch.zeros(batch, width, dtype=torch.long, device=scores.device)
        return TopK(empty, empty.to(scores.dtype), empty.to(torch.bool))
    rows = min(_block_rows(scores), batch)
    buffer = torch.empty(rows, n_cols, dtype=scores.dtype, device=scores.device)
    values, items = [], []
    for start in range(0, batch, rows):
        stop = min(start + rows, batch)
        block = scores[start:stop]
        names = users[start:stop] if users is not None else [f"row {r}" for r in range(start, stop)]
        if check_finite:
            check_finite_rows(block, model_name=model_name, users=names, masked_scores=masked_scores)
        masked = buffer[: stop - start]
        masked.copy_(block)
        if csr is not None:
            indptr, row_of, flat = csr
            lo, hi = int(indptr[start]), int(indptr[stop])
            masked[row_of[lo:hi] - start, flat[lo:hi]] = float("-inf")
        elif exclude is not None and exclude.numel() > 0:
            masked.scatter_(1, exclude[start:stop].to(device=scores.device, dtype=torch.long), float("-inf"))
        if keep is not None and keep.numel() > 0:
            held = keep[start:stop].to(device=scores.device, dtype=torch.long)
            masked.scatter_(1, held, block.gather(1, held))
        masked[:, 0] = float("-inf")
        top_values, top_items = torch.topk(masked, width, dim=1, sorted=True)
        values.append(top_values)
        items.append(top_items)
    top_values, top_items = torch.cat(values), torch.cat(items)
    valid = top_values != float("-inf")
    return TopK(top_items.masked_fill(~valid, 0), top_values, valid)


def _csr(exclude: tuple[Any, Any], batch: int, device: torch.device) -> tuple[np.ndarray, Tensor, Tensor]:
    """CSR ``(indptr, items)`` as ``(indptr numpy, row of each entry, items)`` on ``device``, checked."""
    indptr = np.asarray(torch.as_tensor(exclude[0]).cpu(), dtype=np.int64)
    if indptr.shape != (batch + 1,) or indptr[0] != 0 or (np.diff(indptr) < 0).any():
        raise ValueError(f"exclude=(indptr, items): indptr must be a non-decreasing [B + 1] = [{batch + 1}] "
                         f"array starting at 0, got shape {indptr.shape}")
    flat = torch.as_tensor(exclude[1], dtype=torch.long).to(device)
    if flat.numel() != indptr[-1]:
        raise ValueError(f"exclude=(indptr, items): indptr[-1] = {indptr[-1]} but there are {flat.numel()} "
                         "items")
    row_of = torch.repeat_interleave(torch.arange(batch, device=device),
                                     torch.as_tensor(np.diff(indptr), device=device))
    return indptr, row_of, flat


__all__ = ["Exclude", "TopK", "check_finite_rows", "check_k", "masked_top_k"]
