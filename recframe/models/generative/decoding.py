"""Trie-constrained beam search and exact full-catalogue scoring for generative (semantic-ID) models.

The model side is one callable, the *step scorer* (:class:`StepLogits`)::

    step_logits(state, prefix) -> logits
        state:  the model's per-user context for a batch of B users (encoder memory, history KV cache, ...);
                opaque here: decoding never copies, indexes or reorders it
        prefix: int64 [B, M, l], 0 <= l < L: M code prefixes (hypotheses) per user, row b belongs to user b;
                contiguous; do not write into it. Every prefix is a node of the trie, except in beam search
                after the model put -inf logits on valid codes: such dead hypotheses carry arbitrary
                in-range codes and their logits are ignored
        logits: [B, M, codebook_sizes[l]], unnormalised scores of the next code

Hypotheses are grouped per user, so a model attends from all M prefixes of user b to user b's memory without
repeating it (e.g. cross-attention with queries ``[B, M * (l + 1), d]`` against memory ``[B, T, d]``). The
simplest scorer recomputes the at most ``L`` prefix tokens at every call. An incremental one runs only the
newest token and keeps a per-hypothesis cache; :func:`beam_search`'s ``on_select`` tells it, after each
level, which hypothesis each kept one came from, so that its cache can follow the beam (the shipped models
do this, :class:`~recframe.models.generative.kv_cache.BeamKV`). A scorer written per row,
``f(rows_state, prefix [N, l]) -> [N, C_l]``, plugs in
through :func:`rowwise` (which repeats the state along dim 0 with :func:`index_rows` or a given ``expand``).

Normalisation (``normalize=``; the same in both algorithms, so a beam's score is the item's exact score):

* ``"codebook"`` (default): log-softmax over the level's full codebook, then invalid codes are masked. This is
  what TIGER-style models are trained for (cross-entropy over the whole codebook at each level), so the score
  is the model's own probability of emitting the path; the mass on invalid paths is lost, so item
  probabilities sum to at most 1.
* ``"valid"``: log-softmax over the valid children of each prefix only; item probabilities sum to exactly 1.
  A prefix with one valid child gives it log-probability exactly 0, so exact scoring does not run the
  last-level nodes that have one child (most of them when the last level only disambiguates collisions).

What beam search guarantees (``L`` levels, ``n_nodes[d]`` trie nodes at depth ``d``):

* it never emits an invalid path: every returned item is a real item, every score is that item's exact path
  log-probability, items are distinct and sorted by score;
* ``W_d = min(beam, n_nodes[d])`` hypotheses are kept at depth ``d`` and all of them are valid (every live
  node has a child, so a level never runs out of valid candidates), hence ``min(k, n_items)`` items are
  returned; slots beyond that hold item 0 with score ``-inf`` (only when ``k > n_items``); hypotheses whose
  score is ``-inf`` (a model that puts ``-inf`` logits on valid codes) are dropped the same way;
* it is exact (same top-k as :func:`exact_scores`, up to ties) when ``beam >= n_nodes[d]`` for every inner
  depth ``1 <= d <= L - 1``: then every prefix survives and the last step ranks all items. For a smaller
  beam it is a heuristic; it agrees with exact scoring when the model is peaked (the top-k items' prefixes
  outrank all other prefixes at every depth), which is what a trained model tends towards.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Literal, NamedTuple, Protocol

import torch
from torch import Tensor

from recframe.models.generative.trie import SIDTrie

Normalize = Literal["codebook", "valid"]
NORMALIZE = ("codebook", "valid")


class StepLogits(Protocol):
    """Next-code scorer ``(state, prefix [B, M, l]) -> logits [B, M, codebook_sizes[l]]`` (see the module)."""

    def __call__(self, state: Any, prefix: Tensor) -> Tensor: ...


class BeamResult(NamedTuple):
    """Top-k of a constrained beam search: ``items [B, k]`` int64 ids, ``log_probs [B, k]`` path scores."""

    items: Tensor
    log_probs: Tensor


# --------------------------------------------------------------------------- state helpers
def index_rows(state: Any, index: Tensor) -> Any:
    """Rows ``index`` of a state made of tensors indexed on dim 0 (nested tuple/list/dict; ``None`` kept)."""
    if state is None:
        return None
    if isinstance(state, Tensor):
        return state.index_select(0, index.to(state.device))
    if isinstance(state, (tuple, list)):
        return type(state)(index_rows(s, index) for s in state)
    if isinstance(state, Mapping):
        return {key: index_rows(value, index) for key, value in state.items()}
    raise TypeError(f"index_rows cannot index a state of type {type(state).__name__}; make the state a "
                    "tensor or a tuple/list/dict of tensors indexed on dim 0, or pass expand=your_function.")


def infer_batch_size(state: Any) -> int:
    """Rows of the first tensor found in ``state`` (a tensor, or nested tuple/list/dict/dataclass)."""
    if isinstance(state, Tensor):
        return int(state.shape[0])
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        items: Any = [getattr(state, f.name) for f in dataclasses.fields(state)]
    elif isinstance(state, Mapping):
        items = state.values()
    else:
        items = state if isinstance(state, (tuple, list)) else ()
    for item in items:
        try:
            return infer_batch_size(item)
        except ValueError:
            continue
    raise ValueError(f"cannot infer the number of users from a state of type {type(state).__name__}; pass "
                     "batch_size=B.")


def rowwise(step_rows: Callable[[Any, Tensor], Tensor],
            expand: Callable[[Any, Tensor], Any] = index_rows) -> StepLogits:
    """Adapt a per-row scorer ``f(state_rows, prefix [N, l]) -> [N, C_l]`` to the grouped :class:`StepLogits`.

    Each call repeats every user's state for its ``M`` hypotheses with ``expand(state, index)`` (``index``
    = user of each row), so a large state is copied per call; a grouped scorer avoids that.
    """

    def step(state: Any, prefix: Tensor) -> Tensor:
        b, m, length = prefix.shape
        users = torch.arange(b, device=prefix.device).repeat_interleave(m)
        out = step_rows(expand(state, users), prefix.reshape(b * m, length))
        return out.reshape(b, m, -1)

    return step


def normalise_step(logits: Tensor, valid: Tensor, normalize: Normalize) -> Tensor:
    """Log-probabilities of the next code, ``-inf`` on invalid codes (``normalize``: module docstring)."""
    logits = logits.float()
    if normalize == "codebook":
        return torch.log_softmax(logits, dim=-1).masked_fill(~valid, float("-inf"))
    # rows without any valid code (dead hypotheses) give NaN inside log_softmax; where() drops them
    restricted = torch.log_softmax(logits.masked_fill(~valid, float("-inf")), dim=-1)
    return torch.where(valid, restricted, torch.full_like(restricted, float("-inf")))


# --------------------------------------------------------------------------- beam search
def beam_search(trie: SIDTrie, step_logits: StepLogits, state: Any, *, k: int, beam: int,
                normalize: Normalize = "codebook", batch_size: int | None = None,
                on_select: Callable[[Tensor], None] | None = None) -> BeamResult:
    """Top-``k`` items per user by beam search constrained to the trie, batched over users and beams.

    Per level: one scorer call on ``[B, W, l]`` prefixes, one child gather ``[B, W, C]``, invalid codes set
    to ``-inf``, one top-``W'`` over the flattened ``W * C`` candidates of each user. No Python loop over
    users or beams. Guarantees (validity, exactness condition): module docstring.

    Args:
        trie: the item trie; decoding runs on ``trie.device`` (move it with ``trie.to(device)``).
        step_logits: the model's scorer (:class:`StepLogits`).
        state: the model's context for ``B`` users, passed through unchanged.
        k: items to return per user, ``1 <= k <= beam``.
        beam: hypotheses kept per user at each depth.
        normalize: ``"codebook"`` or ``"valid"`` (module docstring); use the same in :func:`exact_scores`.
        batch_size: ``B``; inferred from the first tensor of ``state`` when omitted.
        on_select: called after each level but the last with ``parent [B, W']``, the index of each kept
            hypothesis's parent among the ``W`` just scored, so that an incremental scorer (one that runs only
            each prefix's newest token, e.g. :class:`~recframe.models.generative.kv_cache.BeamKV`) can make
            its cached paths follow the beam.

    Returns:
        :class:`BeamResult` with ``items [B, k]`` (ids in ``1..n_items``; 0 only in slots beyond ``n_items``)
        and their path log-probabilities ``[B, k]`` (descending; ``-inf`` for empty slots).
    """
    _check_normalize(normalize)
    if not 1 <= k <= beam:
        raise ValueError(f"beam_search: k={k}, beam={beam}; need 1 <= k <= beam (the beam holds the "
                         "candidates).")
    n_users = infer_batch_size(state) if batch_size is None else int(batch_size)
    dev = trie.device
    nodes = torch.zeros(n_users, 1, dtype=torch.long, device=dev)       # node ids at the current depth
    scores = torch.zeros(n_users, 1, device=dev)
    prefix = torch.zeros(n_users, 1, 0, dtype=torch.long, device=dev)
    for level, size in enumerate(trie.codebook_sizes):
        width = nodes.shape[1]
        logits = _call(step_logits, state, prefix, size)
        child = trie.children(level, nodes)                               # [B, W, C]
        logp = normalise_step(logits, child >= 0, normalize)
        cand = (scores.unsqueeze(-1) + logp).reshape(n_users, width * size)
        top, idx = cand.topk(min(beam, trie.n_nodes[level + 1]), dim=1)   # sorted, descending
        parent, code = idx // size, idx % size
        nxt = child.reshape(n_users, width * size).gather(1, idx)
        dead = (nxt < 0) | torch.isneginf(top)
        nodes = nxt.masked_fill(dead, -1)
        scores = top.masked_fill(dead, float("-inf"))
        kept = prefix.gather(1, parent.unsqueeze(-1).expand(-1, -1, level))
        prefix = torch.cat([kept, code.unsqueeze(-1)], dim=-1)
        if on_select is not None and level + 1 < len(trie.codebook_sizes):
            on_select(parent)
    items = nodes.clamp(min=0)[:, :k]
    scores = scores[:, :k]
    if items.shape[1] < k:  # fewer items in the catalogue than k
        pad = k - items.shape[1]
        items = torch.cat([items, items.new_zeros(n_users, pad)], dim=1)
        scores = torch.cat([scores, scores.new_full((n_users, pad), float("-inf"))], dim=1)
    return BeamResult(items, scores)


# --------------------------------------------------------------------------- exact scoring
def exact_scores(trie: SIDTrie, step_logits: StepLogits, state: Any, *, normalize: Normalize = "codebook",
                 batch_size: int | None = None, max_rows: int = 16384) -> Tensor:
    """Log-probability of every item's code path: ``[B, n_items + 1]``, column 0 = ``-inf``.

    Walks the trie level by level: at level ``l`` the scorer is called on the prefixes of all
    ``n_nodes[l]`` nodes for every user (``[B, n_nodes[l], l]``, split into calls of at most ``max_rows``
    hypotheses in all, at least one node per call), each child's log-probability is gathered and added to
    its parent's running sum; the leaves' sums are scattered to item columns. The output has the shape of
    ``RecModel.score`` so the common evaluator ranks generative models like any other. Costs
    ``B * sum_l n_nodes[l]`` scored hypotheses; a transformer scorer re-runs each hypothesis's whole prefix,
    which :func:`exact_scores_cached` avoids.

    Args:
        trie, step_logits, state, normalize, batch_size: as in :func:`beam_search`.
        max_rows: most hypotheses (``users x nodes``) per scorer call, bounding memory.
    """
    _check_walk(normalize, max_rows)
    n_users = infer_batch_size(state) if batch_size is None else int(batch_size)

    def call(level: int, nodes: Tensor) -> Tensor:
        pre = trie.prefixes(level)[nodes].unsqueeze(0).expand(n_users, -1, -1).contiguous()
        return _call(step_logits, state, pre, trie.codebook_sizes[level])

    return _walk(trie, call, n_users, normalize, max_rows)


class NodeScorer(Protocol):
    """Next-code scorer of trie nodes: ``(state, level, nodes) -> logits [B, len(nodes), C_level]`` for the
    nodes ``nodes`` (an increasing int64 tensor of lexicographic ids, :class:`SIDTrie`) at depth ``level``.

    :func:`exact_scores_cached` calls it level by level, every node of depth ``l`` before any of depth
    ``l + 1``, so a scorer may keep what it computed for a node (e.g. its keys and values) in ``state`` and
    reuse it for the node's descendants.
    """

    def __call__(self, state: Any, level: int, nodes: Tensor) -> Tensor: ...


def exact_scores_cached(trie: SIDTrie, score_nodes: NodeScorer, state: Any, *,
                        normalize: Normalize = "codebook", batch_size: int | None = None,
                        max_rows: int = 16384) -> Tensor:
    """:func:`exact_scores` for a scorer that scores trie nodes incrementally (:class:`NodeScorer`).

    The same walk and the same output; only the scorer's interface differs: it receives node ranges in walk
    order instead of prefixes, so it can run one new token per node on top of its ancestors' cache.
    """
    _check_walk(normalize, max_rows)
    n_users = infer_batch_size(state) if batch_size is None else int(batch_size)

    def call(level: int, nodes: Tensor) -> Tensor:
        logits = score_nodes(state, level, nodes)
        expected = (n_users, len(nodes), trie.codebook_sizes[level])
        if tuple(logits.shape) != expected:
            raise ValueError(f"score_nodes returned shape {tuple(logits.shape)} for {len(nodes)} nodes at "
                             f"depth {level}; expected {expected} = [users, nodes, codebook_sizes[{level}]].")
        return logits

    return _walk(trie, call, n_users, normalize, max_rows)


def _walk(trie: SIDTrie, call: Callable[[int, Tensor], Tensor], n_users: int, normalize: Normalize,
          max_rows: int) -> Tensor:
    """The exact-scoring walk shared by :func:`exact_scores` and :func:`exact_scores_cached`.

    Level by level, every node's children get their parent's running log-probability plus their own step
    log-probability. With ``normalize="valid"`` a last-level node with one child is not scored: its child's
    step log-probability is exactly 0 (module docstring)."""
    dev = trie.device
    total = torch.zeros(n_users, 1, device=dev)                  # running log-prob of depth-l nodes
    chunk = max(1, max_rows // max(n_users, 1))
    last = len(trie.codebook_sizes) - 1
    for level, size in enumerate(trie.codebook_sizes):
        offsets = trie.child_offsets(level)
        if normalize == "valid" and level == last:
            nxt = total[:, trie.parents(level + 1)]              # one child: log-probability 0
            todo = torch.nonzero(offsets[1:] - offsets[:-1] > 1).squeeze(1)
        else:
            nxt = torch.empty(n_users, trie.n_nodes[level + 1], device=dev)
            todo = torch.arange(trie.n_nodes[level], device=dev)
        codes = trie.node_codes(level + 1)
        for start in range(0, len(todo), chunk):
            nodes = todo[start : start + chunk]
            logits = call(level, nodes)                                   # [B, m, C]
            if normalize == "codebook":
                logp = torch.log_softmax(logits.float(), dim=-1)          # only valid children are read
            else:
                logp = normalise_step(logits, trie.child_mask(level, nodes).unsqueeze(0), normalize)
            first = offsets[nodes]                                        # each node's first child id
            count = offsets[nodes + 1] - first
            row = torch.repeat_interleave(torch.arange(len(nodes), device=dev), count)   # child -> its node
            before = torch.cumsum(count, 0) - count
            child = first[row] + torch.arange(len(row), device=dev) - before[row]  # ids at level + 1
            nxt[:, child] = total[:, nodes[row]] + logp.reshape(n_users, -1)[:, row * size + codes[child]]
        total = nxt
    out = torch.full((n_users, trie.n_items + 1), float("-inf"), device=dev)
    out[:, trie.leaf_items] = total
    return out


# --------------------------------------------------------------------------- internals
def _call(step_logits: StepLogits, state: Any, prefix: Tensor, size: int) -> Tensor:
    logits = step_logits(state, prefix)
    expected = (*prefix.shape[:2], size)
    if tuple(logits.shape) != expected:
        raise ValueError(f"step_logits returned shape {tuple(logits.shape)} for prefixes "
                         f"{tuple(prefix.shape)}; expected {expected} = [users, hypotheses, "
                         f"codebook_sizes[{prefix.shape[-1]}]].")
    return logits


def _check_walk(normalize: str, max_rows: int) -> None:
    _check_normalize(normalize)
    if max_rows < 1:
        raise ValueError(f"exact_scores: max_rows={max_rows}; it must be >= 1.")


def _check_normalize(normalize: str) -> None:
    if normalize not in NORMALIZE:
        raise ValueError(f"normalize={normalize!r}; choose one of {NORMALIZE}.")
