"""Generative recommenders on semantic IDs: ``TIGER`` (encoder–decoder) and ``SIDDecoder`` (decoder-only).

Both are :class:`~recframe.models.base.RecModel` subclasses, so they train,
validate, test, checkpoint and serve exactly like SASRec:

* ``bind_data(train)`` embeds the items' content (:mod:`recframe.features`),
  fits the configured tokenizer (:mod:`recframe.tokenizers`) into a
  :class:`~recframe.tokenizers.SIDTable`, and builds the backbone on its code
  table. The table lives in the model's buffers (and its full state under
  ``checkpoint["sid_table"]``), so a checkpoint is self-contained: loading it
  rebuilds the backbone from the stored codes, with no tokenizer and no data. Every call (also when the
  backbone already exists, e.g. on a resumed fit) first hands the training split to each add-on's
  ``bind_data`` (R-GRec builds its item graph there);
* ``loss`` is teacher forcing on sliding windows, every position a target;
* ``score`` is **exact full-catalogue scoring**: the log-probability of every
  item's code path, ``sum_l log softmax_l(step(prefix_l))[c_l]``, walking the
  trie level by level (the nodes of a level in a few batched calls per user
  chunk). The common evaluator therefore ranks generative models exactly like
  every other model. Each level's softmax runs over that level's full codebook,
  as the models are trained (TIGER); constrained beam search
  (:meth:`GenerativeRecModel.generate`) masks invalid codes of the same scores.

Methods compose with the backbones as add-ons (:mod:`recframe.models.generative.addons`), listed under
``addons:``; TrieRec's encodings are the first (:mod:`recframe.models.generative.trierec`). Exact scoring
reuses each trie node's keys/values for its descendants (:mod:`recframe.models.generative.kv_cache`), so
every level runs one new token per node; ``score(batch, cached=False)`` is the former walk that re-runs every
prefix (kept as the reference the cached walk is tested and benchmarked against).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from torch import Tensor

from recframe.models.base import RecModel
from recframe.models.generative import legacy
from recframe.models.generative.addons import GenerativeAddon, addon_from_spec
from recframe.models.generative.backbones import SIDBackbone
from recframe.models.generative.decoder import DecoderBackbone
from recframe.models.generative.decoding import BeamResult, beam_search, exact_scores, exact_scores_cached
from recframe.models.generative.item_matrix import ItemMatrixSource
from recframe.models.generative.kv_cache import BeamKV
from recframe.models.generative.sid_state import SIDTableState
from recframe.models.generative.tiger import TigerBackbone
from recframe.models.generative.trie import SIDTrie
from recframe.tokenizers import SIDTokenizer

logger = logging.getLogger("recframe.generative")

#: budget (elements) of one attention-logit block during exact scoring; rows are chunked to fit it
SCORE_BLOCK = 1 << 24
#: budget (elements) of the key/value cache of cached exact scoring; users are chunked to fit it. Kept small
#: (32 MiB): the per-level gathers from the cache are memory-bound, and on ML-100K (2,603 cached nodes, d=64,
#: 2 layers) chunks of 4-16 users scored 25-37 users/s against 17 at 32 users (1 thread, shared CPU)
CACHE_BLOCK = 1 << 23
#: score of the items a beam-search validation did not reach (a path log-probability is far above it)
BELOW_BEAM = -1e9


class GenerativeRecModel(ItemMatrixSource, SIDTableState, RecModel):
    """Shared training/scoring of semantic-ID generative models (see module docstring).

    Args:
        n_items, n_users: linked from the datamodule.
        tokenizer: a :mod:`recframe.tokenizers` tokenizer (``fit(features) -> SIDTable``); needed to train,
            not to load a checkpoint.
        features: what the tokenizer quantises: ``text`` (title, year, genres through all-MiniLM-L6-v2,
            falling back to the documented non-text features without the ``text`` extra), ``none`` (the
            fallback features), ``collaborative`` (the item table of a trained collaborative model, see
            ``collaborative``) or ``hybrid`` (text and collaborative blocks, each L2-normalised, concatenated
            with squared-norm shares ``1 - collab_weight`` : ``collab_weight``;
            :func:`recframe.features.hybrid_item_features`) or ``regularised`` (text, quantised by a tokenizer
            that regularises its codes toward the collaborative table: LETTER's collaborative InfoNCE in
            :class:`~recframe.tokenizers.RQVAETokenizer`). Text-only IDs remain the option for catalogues
            with cold-start items, which a collaborative table cannot place.
        collaborative: for ``collaborative``/``hybrid``: a recframe config (e.g.
            ``configs/sasrec_ml100k.yaml``) whose model is trained on this run's training split, best
            validation checkpoint kept, and whose ``item_embeddings()`` are cached by fingerprint
            (:func:`recframe.features.collaborative_item_embeddings`), or a ``.npy`` file holding such a
            table ``[n_items + 1, d]``.
        collaborative_seed: seed of that collaborative run.
        collab_weight: the collaborative block's share in ``hybrid``.
        hybrid_content: the content block of ``hybrid``/``regularised``: ``text`` (all-MiniLM-L6-v2) or
            ``none`` (the metadata features; on Amazon the attribute multi-hot, the only content there).
        max_len: history items per window.
        dim, n_layers, n_heads, inner, dropout: backbone sizes.
        attn_dropout: dropout on attention probabilities (default ``dropout``, as before it existed).
        normalize: each level's softmax in training, scoring and beam search: ``codebook`` (the whole
            codebook: TIGER; a model must learn which codes exist under each prefix, and item scores sum to
            less than 1) or ``valid`` (the codes continuing a real item's path: the trie's children; item
            scores form a distribution over the catalogue, and training matches constrained decoding).
        embedding_std: init of the position and level embeddings (:class:`SIDBackbone`; ``None`` = the
            former N(0, 1)).
        addons: add-ons (:class:`~recframe.models.generative.addons.GenerativeAddon`), e.g.
            ``[{class_path: recframe.models.generative.TrieRec}]`` for TrieRec's trie-aware absolute and
            topology-aware relative encodings. Their specs (``class_path`` + ``init_args``, also accepted
            here) are stored in the hyperparameters, so a checkpoint rebuilds them.
        history_tokens: ``"codes"`` (``L`` SID tokens per history item, TIGER's layout; the default, so
            older checkpoints load unchanged) or ``"items"`` (one token per history item, the sum of its code
            tokens' inputs: ``L**2`` times cheaper self-attention over the history; see
            :mod:`recframe.models.generative.backbones`).
        validation_decode: how validation ranks: ``exact`` (every item's path log-probability, as the test
            does) or ``beam`` (trie-constrained beam search of width ``validation_beam``, its items ranked
            by their exact log-probabilities and every other item below them). A beam visits ``L * beam``
            prefixes per user instead of every trie node (~2,800 on ML-100K), so validating all users every
            epoch becomes affordable; seen items among the beam's results are masked afterwards as always,
            so a beam of 50 leaves the top 10 of users with up to 40 seen items in it exact. Model
            selection (early stopping, checkpoint choice) then uses that cheaper validation; the test is
            always exact.
        validation_beam: beam width (and items kept) of ``beam`` validation.
        lr, weight_decay, optimizer: optimiser.
    """

    train_batch: ClassVar[str] = "sequence"
    uses_history: ClassVar[bool] = True
    backbone_class: ClassVar[type[SIDBackbone]]
    codes_key: ClassVar[str] = "backbone.codes"

    def __init__(
        self,
        n_items: int,
        n_users: int = 0,
        tokenizer: SIDTokenizer | None = None,
        features: Literal["text", "none", "collaborative", "hybrid", "regularised"] = "text",
        collaborative: str | None = None,
        collaborative_seed: int = 0,
        collab_weight: float = 0.5,
        hybrid_content: Literal["text", "none"] = "text",
        max_len: int = 20,
        dim: int = 64,
        n_layers: int = 2,
        n_heads: int = 2,
        inner: int = 256,
        dropout: float = 0.1,
        attn_dropout: float | None = None,
        embedding_std: float | None = None,
        normalize: Literal["codebook", "valid"] = "codebook",
        addons: list[GenerativeAddon] | None = None,
        history_tokens: Literal["codes", "items"] = "codes",
        validation_decode: Literal["exact", "beam"] = "exact",
        validation_beam: int = 50,
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        optimizer: Literal["adam", "adamw"] = "adamw",
    ) -> None:
        super().__init__(n_items, n_users, lr, weight_decay, optimizer)
        self.save_hyperparameters(ignore=["tokenizer", "addons"])
        self.addon_list: list[GenerativeAddon] = [addon_from_spec(a) for a in addons or []]
        self.hparams["addons"] = [a.spec() for a in self.addon_list]
        self.tokenizer = tokenizer
        self.set_item_source(features, collaborative, collaborative_seed, collab_weight,
                             hybrid_content=hybrid_content)
        if validation_beam < 1:
            raise ValueError(f"model.init_args.validation_beam must be >= 1, got {validation_beam}")
        self.validation_decode, self.validation_beam = validation_decode, validation_beam
        self.max_len = max_len
        self.history_tokens = history_tokens
        self.sizes = {
            "dim": dim,
            "n_layers": n_layers,
            "n_heads": n_heads,
            "inner": inner,
            "dropout": dropout,
            "attn_dropout": attn_dropout,
            "embedding_std": embedding_std,
            "normalize": normalize,
        }
        self.backbone: SIDBackbone | None = None
        self.sid_table_state: dict[str, Any] | None = None
        self._trie: SIDTrie | None = None

    # --------------------------------------------------------------- build
    def bind_data(self, train: Any) -> None:
        for addon in self.addon_list:  # every time, also when resumed
            addon.bind_data(train)
        if self.backbone is not None:
            return
        if self.tokenizer is None:
            raise ValueError(
                f"{type(self).__name__} needs model.init_args.tokenizer (e.g. class_path: "
                "recframe.tokenizers.RQKMeans) to build its semantic IDs."
            )
        self.require_item_features(train)
        if self.features == "regularised":  # text codes pulled toward the collaborative table (LETTER)
            if not self.tokenizer.accepts_collaborative:
                raise ValueError("model.init_args.features='regularised' needs a tokenizer that learns from "
                                 "a collaborative matrix (recframe.tokenizers.RQVAETokenizer with "
                                 f"collab_weight > 0); {type(self.tokenizer).__name__} does not.")
            table = self.tokenizer.fit(self.item_matrix(train), collaborative=self.collaborative_table(train))
        else:
            table = self.tokenizer.fit(self.item_matrix(train))
        logger.info("semantic IDs: %s", table.stats)
        self.sid_table_state = table.state_dict()
        self._build(np.asarray(table.codes), tuple(table.codebook_sizes))

    def build_backbone(self, codes: np.ndarray, codebook_sizes: tuple[int, ...]) -> None:
        """Build the backbone on a given SID table ``[n_items + 1, L]`` (what :meth:`bind_data` does after
        tokenizing the item features; for benchmarks and tests that bring their own codes)."""
        self._build(np.asarray(codes), tuple(int(v) for v in codebook_sizes))

    def _build(self, codes: np.ndarray, codebook_sizes: tuple[int, ...]) -> None:
        if codes.shape[0] != self.n_items + 1:
            raise ValueError(f"the SID table has {codes.shape[0] - 1} items but the model {self.n_items}.")
        self.backbone = self.backbone_class(
            codes, codebook_sizes, window=self.max_len, addons=self.addon_list,
            history_tokens=self.history_tokens, **self.sizes
        )
        self.register_buffer("codebook_sizes_t", torch.tensor(codebook_sizes, dtype=torch.long))
        self._trie = None

    def sid_built(self) -> bool:
        return self.backbone is not None

    def build_from_codes(self, codes: np.ndarray, codebook_sizes: tuple[int, ...]) -> None:
        self._build(codes, codebook_sizes)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False):  # type: ignore[override]
        if legacy.has_legacy_keys(state_dict):  # TrieRec's tables under their pre-add-on names
            state_dict = self._map_legacy(state_dict)
        # a fresh model has no backbone until its SID table is known; the checkpoint carries the codes
        self.build_from_state(state_dict)
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def _map_legacy(self, state_dict: Any) -> dict[str, Any]:
        index = next((i for i, a in enumerate(self.addon_list) if legacy._is_trierec(a)), None)
        if index is None:
            raise ValueError(
                f"this state dict holds TrieRec tables (backbone.abs_enc/rel_bias: a model trained with the "
                f"former `trierec: true`) but this {type(self).__name__} has no TrieRec add-on; configure "
                "addons: [{class_path: recframe.models.generative.TrieRec}], or migrate the checkpoint with "
                f"`{legacy.MIGRATE_HINT}`.")
        return legacy.map_legacy_state(state_dict, index)

    @classmethod
    def upgrade_checkpoint(cls, checkpoint: dict[str, Any]) -> dict[str, Any]:
        """A checkpoint written with the former ``trierec`` flag becomes one with ``addons: [TrieRec]``."""
        if legacy.is_legacy_checkpoint(checkpoint):
            legacy.migrate_checkpoint(checkpoint)
        return checkpoint

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if legacy.is_legacy_checkpoint(checkpoint):  # written with the former `trierec` flag
            legacy.migrate_checkpoint(checkpoint)
            specs = checkpoint["hyper_parameters"]["addons"]
            if self.backbone is None and not self.addon_list and specs:
                # built from the stored hyperparameters, which lost the flag (load_from_checkpoint)
                self.addon_list = [addon_from_spec(spec) for spec in specs]
                self.hparams["addons"] = [a.spec() for a in self.addon_list]
                logger.info("old-format checkpoint: TrieRec flag mapped to addons=%s", self.hparams["addons"])
        super().on_load_checkpoint(checkpoint)  # the SID table state, and the backbone from the stored codes

    @property
    def trie(self) -> SIDTrie:
        """The item trie of the SID table (built on first use, on the model's device)."""
        if self._trie is None or self._trie.device != self.backbone.codes.device:
            self._trie = SIDTrie.from_codes(self.backbone.codes, tuple(self.backbone.codebook_sizes)).to(
                self.backbone.codes.device
            )
        return self._trie

    def _require_backbone(self) -> SIDBackbone:
        if self.backbone is None:
            raise RuntimeError(
                f"{type(self).__name__} has no semantic IDs yet: fit it (bind_data) or load a "
                "checkpoint first."
            )
        return self.backbone

    # ------------------------------------------------------------ training
    def loss(self, batch: dict[str, Tensor]) -> Tensor:
        """Teacher-forced CE (:meth:`SIDBackbone.level_ce`) plus the add-ons' weighted auxiliary terms,
        ``loss = CE + sum_a w_a * aux_a`` (each ``aux_a`` logged as ``train/aux_<name>``)."""
        backbone = self._require_backbone()
        loss = backbone.loss(batch["input"], batch["target"])
        for term in backbone.auxiliary_losses(batch["input"], batch["target"]):
            loss = loss + term.weight * term.value
            if self._trainer is not None:
                self.log(f"train/aux_{term.name}", term.value.detach(), on_step=False, on_epoch=True,
                         batch_size=int(batch["input"].shape[0]), sync_dist=True)
        return loss

    def loss_terms(self, batch: dict[str, Tensor]) -> int:
        return int((batch["target"] > 0).sum())

    # ------------------------------------------------------------- scoring
    def score(self, batch: dict[str, Tensor], *, cached: bool = True) -> Tensor:
        """Exact log-probability of every item's code path, ``[B, n_items + 1]`` (column 0 = -inf).

        ``score[b, i] = sum_l log softmax_l(logits(history_b, codes[i, :l]))[codes[i, l]]``, by a walk over
        the trie. ``cached=True`` (default) runs one new token per trie node and reuses its ancestors'
        keys/values (:meth:`score_nodes` of the backbone); ``cached=False`` re-runs every node's whole prefix
        (the reference; the same scores up to float rounding).
        """
        backbone = self._require_backbone()
        history = batch["history"]
        if not cached:
            ctx = backbone.context(history)
            return exact_scores(self.trie, backbone.step, ctx, normalize=backbone.normalize,
                                max_rows=self.score_rows(ctx))
        trie = self.trie
        per_user = sum(trie.n_nodes[: backbone.L]) * backbone.dim * 2 * backbone.n_layers
        users = max(1, CACHE_BLOCK // max(1, per_user))  # the cache of one user chunk stays in CACHE_BLOCK
        out = []
        for start in range(0, history.shape[0], users):
            ctx = backbone.context(history[start : start + users])
            rows = SCORE_BLOCK // max(1, (int(ctx.kv[0][0].shape[1]) + backbone.L) * backbone.n_heads)
            out.append(exact_scores_cached(trie, backbone.score_nodes, (ctx, backbone.node_cache(trie)),
                                           normalize=backbone.normalize,
                                           batch_size=int(ctx.kv[0][0].shape[0]), max_rows=max(1, rows)))
        return out[0] if len(out) == 1 else torch.cat(out)

    def eval_scores(self, batch: dict[str, Tensor], stage: str) -> Tensor:
        """Exact :meth:`score`, or at validation with ``validation_decode="beam"`` :meth:`beam_scores`."""
        if stage == "val" and self.validation_decode == "beam":
            return self.beam_scores(batch["history"], self.validation_beam)
        return self.score(batch)

    def beam_scores(self, history: Tensor, beam: int, *, cached: bool = True) -> Tensor:
        """``[B, n_items + 1]``: the exact log-probabilities of the ``beam`` items a trie-constrained beam
        search of width ``beam`` returns; every other item gets :data:`BELOW_BEAM` (finite, as the evaluator
        requires, and below any path log-probability), so a target outside the beam ranks last among ties;
        column 0 is ``-inf``. ``cached``: as in :meth:`generate`."""
        found = self.generate(history, k=beam, beam=beam, cached=cached)
        scores = torch.full((history.shape[0], self.n_items + 1), BELOW_BEAM, device=history.device)
        scores.scatter_(1, found.items, found.log_probs)
        scores[:, 0] = float("-inf")
        return scores

    def generate(self, history: Tensor, k: int = 10, beam: int = 20, *, cached: bool = True) -> BeamResult:
        """Top-``k`` items by trie-constrained beam search.

        ``cached=True`` (default) runs, at each level, only each hypothesis's newest decoder token on its
        path's cached keys/values, which follow the beam
        (:class:`~recframe.models.generative.kv_cache.BeamKV`); ``cached=False`` re-runs every hypothesis's
        whole prefix (the reference; the same result up to float rounding).

        Args:
            history: ``[B, w]`` dense item ids, left-padded with 0, oldest first; the last ``max_len`` are
                used (the model's window).
            k: items per user.
            beam: hypotheses kept per level (raised to ``k`` if smaller); a beam at least as wide as every
                inner trie level is exact (equal to the top-``k`` of :meth:`score`).

        Returns:
            :class:`BeamResult`: ``items [B, k]`` (valid item ids; 0 only in slots beyond the catalogue) and
            ``log_probs [B, k]``, each the item's exact path log-probability, descending. Seen items are not
            excluded.
        """
        backbone = self._require_backbone()
        ctx = backbone.context(history)
        if not cached:
            return beam_search(self.trie, backbone.step, ctx, k=k, beam=max(beam, k),
                               normalize=backbone.normalize)
        cache = BeamKV()
        return beam_search(self.trie, backbone.beam_step, (ctx, cache), k=k, beam=max(beam, k),
                           normalize=backbone.normalize, batch_size=history.shape[0],
                           on_select=cache.select)

    def score_rows(self, ctx: Any) -> int:
        """Hypotheses per scorer call so that one attention-logit block stays within ``SCORE_BLOCK``."""
        backbone = self._require_backbone()
        context_len = int(ctx.kv[0][0].shape[1])
        return max(1, SCORE_BLOCK // max(1, (backbone.L + 1) * context_len * backbone.n_heads))


class TIGER(GenerativeRecModel):
    """TIGER-style encoder–decoder over semantic IDs (Rajput et al., 2023); see :mod:`.tiger`."""

    backbone_class = TigerBackbone


class SIDDecoder(GenerativeRecModel):
    """Decoder-only (GPT-style) generative recommender over semantic-ID token streams; see :mod:`.decoder`."""

    backbone_class = DecoderBackbone
