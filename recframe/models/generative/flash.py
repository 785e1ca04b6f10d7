"""FLASH: training-free SimHash semantic IDs, revived by parallel decoding and semantic alignment.

FLASH's abstract (seed paragraph 17) argues that hashing-based IDs look inferior only because they are
decoded autoregressively (a SimHash code of level ``l`` carries no more information given the codes of
levels ``< l``: the bits of independent random hyperplanes are not a coarse-to-fine hierarchy) and because
discretisation loses information. The model here follows the public description:

* **IDs.** :class:`~recframe.tokenizers.SimHashTokenizer`: ``m`` codebooks, each ``ceil(log2 K)`` random
  Gaussian hyperplanes over the item's content embedding (all-MiniLM-L6-v2 of "title (year); genres"),
  fixed seed, no tokenizer training. Any other :class:`~recframe.tokenizers.SIDTokenizer` also fits (an
  ablation). Items whose ``m`` codes collide get a disambiguation level from the SID table; FLASH gives it
  a head like the others (choice: without it colliding items would tie exactly; on ML-100K the level is
  small, see ``sid_stats``).
* **Input.** A history item is the concatenation of its ``m`` code embeddings (one table per codebook),
  projected to the model width, plus a learned position (SASRec's layout). **Codebook dropout**
  (training only): each code embedding of each history token is zeroed with probability
  ``codebook_dropout``, the rest rescaled by ``1 / (1 - p)`` (inverted dropout), so the model cannot lean on
  one codebook.
* **Encoder.** A small causal transformer (pre-norm blocks shared with SASRec,
  :mod:`recframe.models.layers`), trained on every position of each window.
* **Parallel heads.** One classifier per codebook over its ``K`` codes, all predicted at once from the same
  hidden state ``h``: ``logits_l = s_l * cos(W_l h, E_l[k])`` with a learnable temperature ``s_l``
  (``exp`` of a parameter, initialised to ``scale``) and the code table ``E_l`` **tied** to the input code
  embeddings (choice: as TIGER ties its tokens; it also lets the alignment below reach the heads). The
  training loss is the sum over heads of each head's cross-entropy on the target's code, averaged over
  target positions (the heads factorise ``p(item | history)`` as ``prod_l p_l(c_l | history)``).
* **Inference** ranks every item in one gather: ``score(i) = sum_l log softmax(logits_l)[c_l(i)]``; no beam
  search, no trie.
* **Semantic alignment.** ``1 - cos(P e_i, x_i)`` averaged over the distinct items of a batch (history and
  targets), where ``e_i`` is the item's learned input representation (projected code concatenation),
  ``x_i`` its content embedding and ``P`` a learned linear map to the content width. The loss is
  ``CE + align_weight * align`` (``align_weight = 0`` switches it off). Choices: cosine, as the issue
  specifies; aligning the *item* representation (the abstract's "learned item representation") rather than
  the user state; ``P`` maps model to content space so the frozen content vectors are untouched.

Where we choose beyond the abstract: codebook dropout rate, the head projection ``W_l`` (one linear map per
head), temperature initialisation (``scale = 10``: a cosine classifier's logits need a scale above ~5 to
express confident softmaxes), and the alignment target set (a batch's distinct items).

Item vectors. What the tokenizer hashes (and the alignment targets) is chosen by ``features``, shared with
the TIGER-style models (:mod:`recframe.models.generative.item_matrix`): the items' content (``text``, or the
non-text metadata ``none``), a collaborative item table (``collaborative``: e.g. SASRec's, trained on the
same split), or both (``hybrid``). Choice for ``collaborative``: the alignment then pulls the learned item
representation toward the collaborative table the IDs were hashed from, as it pulls it toward the content
otherwise; the abstract aligns with "semantic" embeddings and names no source, and the field builds
semantic IDs from either (TIGER from text; LETTER pulls text IDs toward collaborative embeddings; IDs from a
collaborative item table are the collaborative rows of our TIGER benchmarks).

Cold start. With content features the tokenizer sees every catalogue item's *content* (never an
interaction), so an item whose interactions were all removed from training still has codes, and the heads
score it from them like any other item (``benchmarks/cold_start.py``). A collaborative table has no row
trained for such an item, so ``collaborative`` IDs do not place cold items.
"""

from __future__ import annotations

import logging
import math
from typing import Any, ClassVar, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from recframe.models.base import RecModel
from recframe.models.generative.item_matrix import ItemMatrixSource
from recframe.models.generative.sid_state import SIDTableState
from recframe.models.layers import TransformerBlock, encode_sequence, init_transformer_weights
from recframe.tokenizers import SIDTokenizer, SimHashTokenizer

logger = logging.getLogger("recframe.generative")


def drop_codes(parts: Tensor, p: float) -> Tensor:
    """Codebook dropout: zero each code embedding ``parts[..., l, :]`` with probability ``p`` and rescale the
    kept ones by ``1 / (1 - p)`` (inverted dropout; ``p = 0`` returns ``parts``)."""
    if p <= 0:
        return parts
    keep = torch.rand(parts.shape[:-1], device=parts.device) >= p
    return parts * keep[..., None].to(parts.dtype) / (1.0 - p)


class FLASH(ItemMatrixSource, SIDTableState, RecModel):
    """FLASH: SimHash semantic IDs, parallel code heads, semantic alignment (module docstring).

    Args:
        n_items, n_users: linked from the datamodule.
        tokenizer: the SID tokenizer (default: ``SimHashTokenizer(n_levels=4, bits_per_level=8)``, i.e.
            ``m = 4`` codebooks of ``K = 256`` codes); needed to train, not to load a checkpoint.
        features: what the tokenizer hashes and the alignment targets: ``text`` (all-MiniLM-L6-v2 of the
            item's title, year and genres), ``none`` (the documented non-text metadata features),
            ``collaborative`` (the item table named by ``collaborative``) or ``hybrid`` (both blocks,
            ``collab_weight`` the collaborative share); see :mod:`recframe.models.generative.item_matrix`.
        collaborative: for ``collaborative``/``hybrid``: a recframe config of a collaborative model (trained
            on the same split and cached) or a ``.npy`` item table ``[n_items + 1, d]``.
        collaborative_seed: seed of that collaborative run.
        collab_weight: the collaborative block's share in ``hybrid``.
        hybrid_content: the content block of ``hybrid``/``regularised``: ``text`` (all-MiniLM-L6-v2) or
            ``none`` (the metadata features; on Amazon the attribute multi-hot, the only content there).
        max_len: history items per window.
        dim, n_layers, n_heads, inner, dropout, attn_dropout: transformer sizes (as SASRec).
        codebook_dropout: probability of zeroing one code embedding of one history token in training.
        scale: initial temperature ``s_l`` of every cosine head.
        align_weight: weight of the semantic-alignment loss (0 = off).
        lr, weight_decay, optimizer: optimiser.
    """

    train_batch: ClassVar[str] = "sequence"
    uses_history: ClassVar[bool] = True
    codes_key: ClassVar[str] = "codes"

    def __init__(
        self,
        n_items: int,
        n_users: int = 0,
        tokenizer: SIDTokenizer | None = None,
        features: Literal["text", "none", "collaborative", "hybrid"] = "text",
        collaborative: str | None = None,
        collaborative_seed: int = 0,
        collab_weight: float = 0.5,
        hybrid_content: Literal["text", "none"] = "text",
        max_len: int = 50,
        dim: int = 64,
        n_layers: int = 2,
        n_heads: int = 2,
        inner: int = 256,
        dropout: float = 0.2,
        attn_dropout: float = 0.2,
        codebook_dropout: float = 0.1,
        scale: float = 10.0,
        align_weight: float = 0.1,
        lr: float = 1e-3,
        weight_decay: float = 0.0,
        optimizer: Literal["adam", "adamw"] = "adam",
    ) -> None:
        super().__init__(n_items, n_users, lr, weight_decay, optimizer)
        self.save_hyperparameters(ignore=["tokenizer"])
        self.set_item_source(features, collaborative, collaborative_seed, collab_weight,
                             allowed=("text", "none", "collaborative", "hybrid"),
                             hybrid_content=hybrid_content)
        if not 0.0 <= codebook_dropout < 1.0:
            raise ValueError(f"model.init_args.codebook_dropout must be in [0, 1); got {codebook_dropout}.")
        if scale <= 0:
            raise ValueError(f"model.init_args.scale must be > 0 (a cosine head's temperature); got {scale}.")
        if align_weight < 0:
            raise ValueError(f"model.init_args.align_weight must be >= 0 (0 turns alignment off); got "
                             f"{align_weight}.")
        if tokenizer is None:
            tokenizer = SimHashTokenizer(n_levels=4, bits_per_level=8)
        self.tokenizer = tokenizer
        self.max_len = max_len
        self.dim = dim
        self.codebook_dropout = codebook_dropout
        self.align_weight = align_weight
        self.pos_emb = nn.Embedding(max_len, dim)
        self.emb_drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(dim, n_heads, inner, dropout, attn_dropout) for _ in range(n_layers))
        self.final_norm = nn.LayerNorm(dim)
        self.apply(init_transformer_weights)
        self._scale = scale
        self.built = False
        self.sid_table_state: dict[str, Any] | None = None
        self.register_buffer("content", torch.zeros(0, 0), persistent=False)

    # --------------------------------------------------------------- build
    def bind_data(self, train: Any) -> None:
        """Hash the item vectors (``features``) into the SID table (first call); keep them for alignment."""
        if not self.built:
            self.require_item_features(train)
        if self.built and self.align_weight == 0:
            return
        content = self.item_matrix(train)
        if content.shape[0] != self.n_items + 1:
            raise ValueError(f"the item features have {content.shape[0] - 1} items but the model "
                             f"{self.n_items}.")
        if not self.built:
            table = self.tokenizer.fit(content)
            logger.info("FLASH semantic IDs: %s", table.stats)
            self.sid_table_state = table.state_dict()
            self.build_heads(np.asarray(table.codes), tuple(table.codebook_sizes))
        if self.align_weight > 0:
            self.content = F.normalize(torch.as_tensor(content, dtype=torch.float32), dim=-1).to(self.device)
            if not hasattr(self, "align_proj"):
                self.align_proj = nn.Linear(self.dim, content.shape[1]).to(self.device)
                init_transformer_weights(self.align_proj)

    def build_heads(self, codes: np.ndarray, codebook_sizes: tuple[int, ...]) -> None:
        """Create the code tables, input projection and heads for a SID table ``[n_items + 1, L]``.

        Called by :meth:`bind_data` after hashing, and when a checkpoint is loaded (from its stored codes).
        """
        codes = np.asarray(codes, dtype=np.int64)
        if codes.shape[0] != self.n_items + 1:
            raise ValueError(f"the SID table has {codes.shape[0] - 1} items but the model {self.n_items}.")
        sizes = tuple(int(v) for v in codebook_sizes)
        device = self.pos_emb.weight.device
        self.register_buffer("codes", torch.tensor(codes, device=device))
        self.register_buffer("codebook_sizes_t", torch.tensor(sizes, dtype=torch.long, device=device))
        self.code_emb = nn.ModuleList(nn.Embedding(k, self.dim) for k in sizes).to(device)
        self.in_proj = nn.Linear(len(sizes) * self.dim, self.dim).to(device)
        self.head_proj = nn.ModuleList(nn.Linear(self.dim, self.dim) for _ in sizes).to(device)
        for module in (self.code_emb, self.in_proj, self.head_proj):
            module.apply(init_transformer_weights)
        self.log_scale = nn.Parameter(torch.full((len(sizes),), math.log(self._scale), device=device))
        self.built = True

    @property
    def n_codebooks(self) -> int:
        """Heads (codebooks, including a disambiguation level if the SID table has one)."""
        return int(self.codes.shape[1])

    def _require_built(self) -> None:
        if not self.built:
            raise RuntimeError("FLASH has no semantic IDs yet: fit it (bind_data) or load a checkpoint "
                               "first.")

    def sid_built(self) -> bool:
        return self.built

    def build_from_codes(self, codes: np.ndarray, codebook_sizes: tuple[int, ...]) -> None:
        self.build_heads(codes, codebook_sizes)

    def build_from_state(self, state: Any) -> None:
        """The heads from the stored SID table, and the alignment projection if the state has one."""
        super().build_from_state(state)
        if "align_proj.weight" in state and not hasattr(self, "align_proj"):
            self.align_proj = nn.Linear(*reversed(state["align_proj.weight"].shape)).to(self.device)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False):  # type: ignore[override]
        self.build_from_state(state_dict)  # the checkpoint carries the SID table
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    # ------------------------------------------------------------- forward
    def item_representation(self, items: Tensor, *, code_dropout: float = 0.0) -> Tensor:
        """``[...]`` item ids → ``[..., dim]``: the projected concatenation of the items' code embeddings.

        ``code_dropout`` zeroes each code embedding with that probability (inverted dropout)."""
        self._require_built()
        codes = self.codes[items]  # [..., L]
        parts = [emb(codes[..., level]) for level, emb in enumerate(self.code_emb)]
        x = torch.stack(parts, dim=-2)  # [..., L, dim]
        return self.in_proj(drop_codes(x, code_dropout).flatten(-2))

    def encode(self, items: Tensor) -> Tensor:
        """Hidden states ``[B, W, dim]`` for left-padded histories ``[B, W]`` (the last ``max_len`` items)."""
        items = items[:, -self.max_len:]
        drop = self.codebook_dropout if self.training else 0.0
        x = self.item_representation(items, code_dropout=drop) * (items > 0)[..., None]
        return encode_sequence(x, items, self.pos_emb, self.emb_drop, self.blocks, self.final_norm)

    def head_logits(self, h: Tensor) -> list[Tensor]:
        """Per-codebook logits ``[..., K_l]`` of hidden states ``[..., dim]``: ``s_l * cos(W_l h, E_l)``."""
        out = []
        for level, (proj, emb) in enumerate(zip(self.head_proj, self.code_emb)):
            q = F.normalize(proj(h), dim=-1)
            out.append(self.log_scale[level].exp() * q @ F.normalize(emb.weight, dim=-1).T)
        return out

    def head_log_probs(self, h: Tensor) -> list[Tensor]:
        """Per-codebook log-probabilities ``[..., K_l]`` (each head's log softmax)."""
        return [F.log_softmax(logits, dim=-1) for logits in self.head_logits(h)]

    # ------------------------------------------------------------ training
    def loss(self, batch: dict[str, Tensor]) -> Tensor:
        """``sum_l CE_l`` averaged over target positions, plus ``align_weight * align``."""
        self._require_built()
        h = self.encode(batch["input"])
        target = batch["target"]
        keep = target > 0
        h, target = h[keep], target[keep]
        codes = self.codes[target]
        ce = sum(F.cross_entropy(logits, codes[:, level])
                 for level, logits in enumerate(self.head_logits(h)))
        loss = ce
        if self.align_weight > 0:
            align = self.alignment_loss(torch.cat([batch["input"].flatten(), target]))
            loss = loss + self.align_weight * align
            if self._trainer is not None:
                self.log("train/align", align.detach(), on_step=False, on_epoch=True,
                         batch_size=int(batch["input"].shape[0]))
        return loss

    def alignment_loss(self, items: Tensor) -> Tensor:
        """Mean ``1 - cos(P e_i, x_i)`` over the distinct real items in ``items``."""
        if self.content.numel() == 0:
            raise RuntimeError("FLASH's alignment needs the item content: call bind_data(train) first "
                               "(recframe fit does), or set align_weight: 0.")
        uniq = torch.unique(items)
        uniq = uniq[uniq > 0]
        e = self.align_proj(self.item_representation(uniq))
        return (1.0 - F.cosine_similarity(e, self.content[uniq], dim=-1)).mean()

    def loss_terms(self, batch: dict[str, Tensor]) -> int:
        return int((batch["target"] > 0).sum())

    # ------------------------------------------------------------- scoring
    def score(self, batch: dict[str, Tensor]) -> Tensor:
        """``[B, n_items + 1]``: ``score[b, i] = sum_l log p_l(c_l(i) | history_b)`` (column 0 = -inf).

        Every item is ranked by one gather per head from the ``K_l`` head log-probabilities; no beam."""
        self._require_built()
        h = self.encode(batch["history"])[:, -1]
        return self.scores_from_hidden(h)

    def scores_from_hidden(self, h: Tensor) -> Tensor:
        """Item scores ``[B, n_items + 1]`` of final hidden states ``[B, dim]`` (see :meth:`score`)."""
        scores = torch.zeros(h.shape[0], self.codes.shape[0], device=h.device, dtype=h.dtype)
        for level, logp in enumerate(self.head_log_probs(h)):
            scores = scores + logp[:, self.codes[:, level]]
        scores[:, 0] = float("-inf")
        return scores
