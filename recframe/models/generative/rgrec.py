"""R-GRec: graph-derived structural supervision for semantic-ID generative recommendation, as an add-on.

The paper's abstract is our only definition: SID-based models learn mainly from history-to-next-item
supervision, so item–item collaborative topology reaches them only indirectly through sparse user sequences;
R-GRec builds an item–item graph from user interactions and derives three auxiliary objectives -- Neighbor
Prediction, Topological Contrast and Link Prediction -- that make the topology explicit during generative
training, with no graph computation at inference. Configure it as
``addons: [{class_path: recframe.models.generative.RGRec, init_args: {...}}]``. What the abstract leaves open,
and what we chose:

**Graph** (:func:`~recframe.models.generative.item_graph.cooccurrence_graph`). Built in
:meth:`RGRec.bind_data` from the *training* split only (the model's ``bind_data`` receives nothing else), so
no validation or test interaction creates an edge: within each user's time-ordered training sequence every
pair of items at distance ``1..window`` adds ``1 / distance`` to their undirected edge; self-pairs are
dropped; ``top_k`` optionally keeps each item's heaviest neighbours. The graph is held in **non-persistent
buffers**: checkpoints do not carry it (R-GRec adds no parameter or buffer to the ``state_dict``, and plain
backbone weights load into an R-GRec model strictly), inference never reads it, and a resumed fit rebuilds it
from the same training data because ``bind_data`` runs at every fit.

**Pairs.** Per training batch, the anchors are the distinct non-zero target items of the window batch that
have at least one neighbour (isolated items are dropped first, so that up to ``anchors`` anchors remain), at
most ``anchors`` of them, chosen uniformly without replacement when there are more; each gets one neighbour
drawn with probability proportional to edge weight. Sampling uses a private ``torch.Generator`` reseeded at
every call from ``(seed, call index)`` (through numpy's ``SeedSequence``): the draws are a fixed function of
``seed`` and the number of calls since the last ``bind_data``, and they do not consume the global RNG, so
the backbone's own random stream (dropout, data order) is the one ``seed_everything`` fixes. The call counter
is checkpointed, as the add-on's extra state (``backbone.addons.<i>._extra_state`` = ``{"calls": n}``, plain
data for ``weights_only`` loading): a fit resumed from a checkpoint continues the sampling stream where the
interrupted fit was (Lightning restores the model after ``setup`` has run ``bind_data``, which resets the
counter for a fresh fit). A state dict without that entry (plain backbone weights, or an R-GRec checkpoint
written before the counter was saved) still loads strictly and leaves the counter as it is. Under DDP every
rank draws with the same stream (on its own batch's anchors).

**Objectives**, each an :class:`~recframe.models.generative.addons.AuxLoss` logged as ``train/aux_<name>``:

* ``neighbor`` (Neighbor Prediction): the backbone itself generates the neighbour's semantic ID from a history
  holding the anchor alone, ``backbone.loss(anchor[:, None], neighbour[:, None])``: one-item windows,
  teacher-forced cross-entropy over the neighbour's ``L`` codes, through the same encoder/decoder (and
  ``normalize``) as the main loss. Both backbones take 1-wide windows (TIGER; the decoder-only model with
  ``history_tokens`` ``"codes"`` and ``"items"``). The anchor sits at window position 0 (the backbones number
  a window's positions from its left end), not at the last position a left-padded one-item history gets at
  inference: padding each pair to the full window would run ``window`` times more decoder rows for the same
  signal, and position 0 is the oldest slot of every full training window anyway;
* ``contrast`` (Topological Contrast): InfoNCE with cosine similarity over ``temperature`` between the item
  representations (:meth:`~recframe.models.generative.backbones.SIDBackbone.item_representation`: the pooled
  SID input embedding) of each anchor and its neighbour, the other anchors' neighbours in the batch being the
  negatives. Symmetric (the mean of anchor→neighbours and neighbour→anchors), as the graph is undirected and
  neither endpoint is privileged. In-batch candidates that are the same item as the row's positive or as the
  row itself are masked (a sampled duplicate is no negative); other graph neighbours are kept as negatives,
  as in-batch contrast usually does;
* ``link`` (Link Prediction): binary cross-entropy on ``sigmoid(<e_i, e_j>)``, the dot product of the two
  items' representations (unnormalised, so the score can grow with confidence), for the sampled edges (label
  1) against ``negatives`` uniformly drawn non-edges per anchor (label 0: a draw that is the anchor itself
  or one of its neighbours is redrawn, up to 10 rounds, and dropped if still invalid); the mean over all
  labelled pairs.

The item representation is read from the token table that both backbones use as input and tie to their
per-level output logits, so the contrast and link objectives shape what decoding reads. R-GRec overrides no
other hook: scoring and beam search are exactly the backbone's, and it adds no parameter.

**Seams.** Two general hooks were added for it. :meth:`GenerativeAddon.bind_data
<recframe.models.generative.addons.GenerativeAddon.bind_data>` hands an add-on the training split every time
the model's ``bind_data`` runs (also when the backbone already exists, as on a resumed fit), because the graph
must come from training data and be rebuilt rather than checkpointed.
:meth:`SIDBackbone.item_representation <recframe.models.generative.backbones.SIDBackbone.item_representation>`
(``sum_l (tok[code_l] + level_l)``, no position) names one item-level vector for both backbones, the one
``history_tokens="items"`` feeds as an input token, so the objectives act on the shared token table and not
on a side embedding that decoding would never read.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from recframe.models.generative.addons import AuxLoss, GenerativeAddon
from recframe.models.generative.item_graph import ItemGraph, cooccurrence_graph

#: redraw rounds for negative pairs that hit an edge or the anchor itself
NEGATIVE_ROUNDS = 10
_GRAPH_BUFFERS = ("graph_edge_index", "graph_edge_weight", "graph_indptr", "graph_cumweight")


class RGRec(GenerativeAddon):
    """R-GRec's graph-derived auxiliary objectives (module docstring).

    Args:
        neighbor, contrast, link: which objectives train (at least one).
        window: co-occurrence distance of the item graph (>= 1).
        neighbor_weight, contrast_weight, link_weight: each objective's weight in the loss (>= 0).
        temperature: InfoNCE temperature of the contrast (> 0).
        negatives: uniformly drawn non-edges per anchor for link prediction (>= 1).
        anchors: most anchor items per batch (>= 2: the contrast needs in-batch negatives).
        top_k: keep each item's ``top_k`` heaviest neighbours (``None``: all).
        seed: seed of the pair sampling.
    """

    def __init__(
        self,
        neighbor: bool = True,
        contrast: bool = True,
        link: bool = True,
        window: int = 3,
        neighbor_weight: float = 0.1,
        contrast_weight: float = 0.1,
        link_weight: float = 0.1,
        temperature: float = 0.1,
        negatives: int = 1,
        anchors: int = 128,
        top_k: int | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.neighbor, self.contrast, self.link = neighbor, contrast, link
        self.window = window
        self.neighbor_weight = neighbor_weight
        self.contrast_weight = contrast_weight
        self.link_weight = link_weight
        self.temperature = temperature
        self.negatives = negatives
        self.anchors = anchors
        self.top_k = top_k
        self.seed = seed
        _validate(self)
        self._calls = 0

    # ------------------------------------------------------------------ graph
    def bind_data(self, train: Any) -> None:
        """Build the item graph of the training split into non-persistent buffers (on the add-on's device)."""
        graph = cooccurrence_graph(train, window=self.window, top_k=self.top_k)
        device = self.graph_indptr.device if hasattr(self, "graph_indptr") else torch.device("cpu")
        for name, value in zip(_GRAPH_BUFFERS, (graph.edge_index, graph.edge_weight, graph.indptr,
                                                graph.cumweight)):
            self.register_buffer(name, value.to(device), persistent=False)
        self._calls = 0

    # ------------------------------------------------------------------ checkpointed sampling state
    def get_extra_state(self) -> dict[str, int]:
        """The sampling counter, saved in the model's ``state_dict`` so a resumed fit continues the stream."""
        return {"calls": int(self._calls)}

    def set_extra_state(self, state: Any) -> None:
        """Restore the sampling counter saved by :meth:`get_extra_state`."""
        calls = state.get("calls") if isinstance(state, dict) else None
        if isinstance(calls, bool) or not isinstance(calls, int) or calls < 0:
            raise ValueError(f"RGRec's checkpointed state must be {{'calls': <whole number >= 0>}}, got "
                             f"{state!r}; the checkpoint's backbone.addons.<i>._extra_state entry is damaged "
                             "(drop it to restart the sampling stream).")
        self._calls = calls

    def _load_from_state_dict(self, state_dict: Any, prefix: str, local_metadata: Any, strict: bool,
                              missing_keys: list[str], unexpected_keys: list[str],
                              error_msgs: list[str]) -> None:
        """Like torch's, except that a missing sampling counter is allowed: plain backbone weights and
        checkpoints written before the counter was saved load strictly and keep the current counter."""
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)
        key = prefix + "_extra_state"
        if key not in state_dict and key in missing_keys:
            missing_keys.remove(key)

    @property
    def graph(self) -> ItemGraph:
        """The item graph built by :meth:`bind_data`."""
        if not hasattr(self, "graph_indptr"):
            raise RuntimeError("RGRec has no item graph: it is built from the training split by "
                               "bind_data(train), which the model's bind_data calls at fit; call "
                               "model.bind_data(train) first.")
        return ItemGraph(*(getattr(self, name) for name in _GRAPH_BUFFERS))

    def generator(self, device: torch.device) -> torch.Generator:
        """The sampling generator of the next call: seeded from ``(seed, call index)``; advances the index."""
        state = np.random.SeedSequence([int(self.seed), self._calls]).generate_state(2, np.uint32)
        self._calls += 1
        return torch.Generator(device=device).manual_seed(int(state[0]) << 32 | int(state[1]))

    def sample_pairs(self, targets: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``(anchors [A], neighbours [A])``: distinct non-zero targets with a neighbour (at most
        ``anchors``, uniformly chosen) and one weight-proportional neighbour each."""
        graph = self.graph
        items = torch.unique(targets[targets > 0])
        items = items[graph.degree(items) > 0]
        if items.numel() > self.anchors:
            pick = torch.randperm(items.numel(), generator=generator, device=items.device)[: self.anchors]
            items = items[pick.sort().values]
        return items, graph.sample_neighbours(items, generator)

    def sample_non_edges(self, anchors: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """``(rows, targets)``: ``negatives`` uniform non-neighbours per anchor, each pair as the anchor's
        index in ``anchors`` and the drawn item (a draw that is the anchor or its neighbour is redrawn up to
        ``NEGATIVE_ROUNDS`` times, then dropped)."""
        graph = self.graph
        rows = torch.arange(anchors.numel(), device=anchors.device).repeat_interleave(self.negatives)
        source = anchors[rows]
        target = torch.zeros_like(source)
        todo = torch.ones_like(source, dtype=torch.bool)
        for _ in range(NEGATIVE_ROUNDS):
            idx = todo.nonzero().squeeze(1)
            if idx.numel() == 0:
                break
            draw = torch.randint(1, graph.n_items + 1, (idx.numel(),), generator=generator,
                                 device=source.device)
            ok = (draw != source[idx]) & ~graph.has_edge(source[idx], draw)
            target[idx[ok]] = draw[ok]
            todo[idx[ok]] = False
        return rows[~todo], target[~todo]

    # ------------------------------------------------------------------ objectives
    def auxiliary_losses(self, backbone: Any, inputs: Tensor, targets: Tensor) -> list[AuxLoss]:
        graph = self.graph  # raises if bind_data has not run
        if graph.n_items != backbone.n_items:
            raise ValueError(f"RGRec's item graph has {graph.n_items} items but the backbone "
                             f"{backbone.n_items}; bind it to the model's own training split.")
        if graph.indptr.device != targets.device:  # bound after the model moved: follow the batch
            self.to(targets.device)
        generator = self.generator(targets.device)
        anchors, neighbours = self.sample_pairs(targets, generator)
        if anchors.numel() == 0:  # no target of this batch has a neighbour: zero terms, still logged
            zero = backbone.tok.weight.sum() * 0.0
            return [AuxLoss(name, weight, zero) for name, weight, on in self._objectives() if on]
        terms = []
        if self.neighbor:
            terms.append(AuxLoss("neighbor", self.neighbor_weight,
                                 backbone.loss(anchors[:, None], neighbours[:, None])))
        if self.contrast or self.link:
            rows, negative = self.sample_non_edges(anchors, generator) if self.link else (None, anchors[:0])
            rep = backbone.item_representation(torch.cat([anchors, neighbours, negative]))
            n = anchors.numel()
            rep_anchor, rep_neighbour, rep_negative = rep[:n], rep[n : 2 * n], rep[2 * n :]
            if self.contrast:
                terms.append(AuxLoss("contrast", self.contrast_weight, symmetric_info_nce(
                    anchors, rep_anchor, neighbours, rep_neighbour, self.temperature)))
            if self.link:
                positive = (rep_anchor * rep_neighbour).sum(-1)
                logits = torch.cat([positive, (rep_anchor[rows] * rep_negative).sum(-1)])
                labels = torch.cat([torch.ones_like(positive), torch.zeros_like(logits[n:])])
                terms.append(AuxLoss("link", self.link_weight,
                                     F.binary_cross_entropy_with_logits(logits, labels)))
        return terms

    def _objectives(self) -> list[tuple[str, float, bool]]:
        return [("neighbor", self.neighbor_weight, self.neighbor),
                ("contrast", self.contrast_weight, self.contrast), ("link", self.link_weight, self.link)]


def info_nce(query_items: Tensor, query: Tensor, key_items: Tensor, key: Tensor,
             temperature: float) -> Tensor:
    """InfoNCE of rows ``query [A, D]`` against candidates ``key [A, D]``, row ``a``'s positive ``key[a]``.

    Cosine similarity over ``temperature``; a candidate ``b != a`` is masked when it is the same item as the
    positive or as the query row itself (``*_items`` ``[A]`` name the rows' items).
    """
    logits = F.normalize(query, dim=-1) @ F.normalize(key, dim=-1).T / temperature
    eye = torch.eye(len(query_items), dtype=torch.bool, device=logits.device)
    clash = (key_items[None, :] == key_items[:, None]) | (key_items[None, :] == query_items[:, None])
    logits = logits.masked_fill(clash & ~eye, float("-inf"))
    return F.cross_entropy(logits, torch.arange(len(query_items), device=logits.device))


def symmetric_info_nce(a_items: Tensor, a: Tensor, b_items: Tensor, b: Tensor, temperature: float) -> Tensor:
    """Mean of :func:`info_nce` from ``a`` to ``b`` and from ``b`` to ``a``."""
    forward = info_nce(a_items, a, b_items, b, temperature)
    return 0.5 * (forward + info_nce(b_items, b, a_items, a, temperature))


def _validate(addon: RGRec) -> None:
    """One clear ``ValueError`` per bad setting, naming the key and the fix."""
    where = "model.init_args.addons[RGRec].init_args"

    def fail(key: str, value: Any, fix: str) -> None:
        raise ValueError(f"{where}.{key}={value!r}: {fix}")

    for key in ("neighbor", "contrast", "link"):
        if not isinstance(getattr(addon, key), bool):
            fail(key, getattr(addon, key), "give true or false.")
    if not (addon.neighbor or addon.contrast or addon.link):
        raise ValueError(f"{where}: neighbor, contrast and link are all false; turn on at least one "
                         "objective (or drop the RGRec add-on).")
    for key, low in (("window", 1), ("negatives", 1), ("anchors", 2)):
        value = getattr(addon, key)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            fail(key, value, f"give a whole number >= {low}.")
    if addon.top_k is not None and (isinstance(addon.top_k, bool) or not isinstance(addon.top_k, int)
                                    or addon.top_k < 1):
        fail("top_k", addon.top_k, "give a whole number >= 1, or null to keep every neighbour.")
    for key in ("neighbor_weight", "contrast_weight", "link_weight"):
        if not _number(getattr(addon, key)) or getattr(addon, key) < 0:
            fail(key, getattr(addon, key), "give a finite number >= 0 (0 logs the objective without training "
                 "on it).")
    if not _number(addon.temperature) or addon.temperature <= 0:
        fail("temperature", addon.temperature, "give a finite number > 0 (e.g. 0.1).")
    if isinstance(addon.seed, bool) or not isinstance(addon.seed, int) or addon.seed < 0:
        fail("seed", addon.seed, "give a whole number >= 0.")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and bool(np.isfinite(value))
