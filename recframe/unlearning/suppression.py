"""Suppression baseline: mask the concept's semantic-ID tokens at decoding, through the add-on seam.

**Which tokens.** A token is a trie node: code ``c`` at level ``l`` after a prefix ``c_<l`` (what decoding
emits in context). Its *forget share* is ``|F ∩ items(node)| / |items(node)|``, the share of forget items
among the items whose path passes through it. :func:`suppressed_prefixes` masks every node whose share
exceeds ``threshold`` (default 0.5: a token mostly used by the concept), keeping only the top-most such nodes
(a masked node hides its whole subtree). ``threshold`` trades forgetting (lower: more forget items hidden)
against collateral damage (the retain items below a masked node are hidden with it); with ``threshold = 0``
every node with any forget item is masked, ``threshold -> 1`` masks only forget-only subtrees. The root (all
items) is never masked. If every child of a node exceeds the threshold, so does the node (its share is their
weighted mean), so a prefix never has all its continuations masked while itself left open.

**How.** :class:`SuppressTokens` is a
:class:`~recframe.models.generative.addons.GenerativeAddon` whose :meth:`adjust_logits` sets the logit of a
masked code to ``penalty`` (default ``-1e9``) for the rows whose prefix leads to it. The model applies the
adjustment in exact scoring and in trie-constrained beam search alike, so a masked item's exact score is
about ``penalty`` (finite, as the evaluator requires, and far below every real path log-probability: it ranks
after every unmasked item), and beam search keeps a masked hypothesis only when fewer unmasked ones exist.
It is inference-only: do not train with it (teacher forcing would see ``-1e9`` logits). The masked prefixes
are its constructor setting, so a checkpoint of the suppressed model rebuilds it with no data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from recframe.models.generative.addons import GenerativeAddon
from recframe.yaml_config import require

__all__ = [
    "PENALTY",
    "SuppressTokens",
    "SuppressionSettings",
    "suppressed_items",
    "suppressed_prefixes",
    "with_suppression",
]

#: logit of a masked code: finite (the evaluator refuses +-inf) and far below any path log-probability
PENALTY = -1e9


@dataclass
class SuppressionSettings:
    """The suppression baseline's settings (module docstring).

    Args:
        threshold: a token is masked when its forget share exceeds it; in ``[0, 1)``.
        penalty: the logit a masked code gets; finite and negative.
    """

    threshold: float = 0.5
    penalty: float = PENALTY

    def __post_init__(self) -> None:
        require(0 <= self.threshold < 1, "threshold", self.threshold, "in [0, 1) (e.g. 0.5)")
        finite = bool(np.isfinite(self.penalty))
        require(finite and self.penalty < 0, "penalty", self.penalty, "finite and negative (e.g. -1.0e+9)")


def suppressed_prefixes(codes: np.ndarray, forget: np.ndarray, threshold: float = 0.5) -> list[list[int]]:
    """The top-most trie nodes (code prefixes, length ``1..L``) whose forget share exceeds ``threshold``."""
    if not 0 <= threshold < 1:
        raise ValueError(f"suppression threshold={threshold}; it must be in [0, 1).")
    codes = np.asarray(codes)
    forget = np.asarray(forget, dtype=bool)
    real = codes[1:]
    f_real = forget[1:]
    out: list[list[int]] = []
    masked: set[tuple[int, ...]] = set()
    for depth in range(1, codes.shape[1] + 1):
        keys, inv = np.unique(real[:, :depth], axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        total = np.bincount(inv, minlength=len(keys))
        n_f = np.bincount(inv, weights=f_real.astype(float), minlength=len(keys))
        for k in np.flatnonzero(n_f / total > threshold):
            key = tuple(int(c) for c in keys[k])
            if any(key[:d] in masked for d in range(1, depth)):
                continue
            masked.add(key)
            out.append(list(key))
    return out


def suppressed_items(codes: np.ndarray, prefixes: list[list[int]]) -> np.ndarray:
    """Bool ``[n_items + 1]``: the items whose path starts with one of ``prefixes`` (row 0 False)."""
    codes = np.asarray(codes)
    out = np.zeros(len(codes), dtype=bool)
    for p in prefixes:
        out |= (codes[:, : len(p)] == np.asarray(p)).all(1)
    out[0] = False
    return out


class SuppressTokens(GenerativeAddon):
    """Mask the code tokens ``prefixes`` at decoding (rule and semantics: module docstring).

    Args:
        prefixes: masked nodes as code prefixes (``[c_0, .., c_l]``: code ``c_l`` after ``c_<l``).
        penalty: the logit a masked code gets (finite).
    """

    def __init__(self, prefixes: list[list[int]] | None = None, penalty: float = PENALTY) -> None:
        super().__init__()
        self.prefixes = [[int(c) for c in p] for p in prefixes or []]
        self.penalty = float(penalty)
        if not np.isfinite(self.penalty):
            raise ValueError(
                f"SuppressTokens penalty must be finite (the evaluator refuses -inf scores); got {penalty}."
            )

    def build(self, backbone: Any) -> None:
        self.radix = [int(v) for v in backbone.codebook_sizes]
        for level in range(len(self.radix)):
            keys = sorted({self._key(p) for p in self.prefixes if len(p) == level + 1})
            self.register_buffer(f"keys{level}", torch.tensor(keys, dtype=torch.long), persistent=False)

    def _key(self, prefix: list[int]) -> int:
        key = 0
        for j, c in enumerate(prefix):
            key = key * self.radix[j] + int(c)
        return key

    def adjust_logits(self, logits: Tensor, prefix: Tensor, level: int) -> Tensor:
        table = getattr(self, f"keys{level}")
        if table.numel() == 0:
            return logits
        base = torch.zeros(prefix.shape[:-1], dtype=torch.long, device=logits.device)
        for j in range(level):
            base = base * self.radix[j] + prefix[..., j]
        size = logits.shape[-1]
        keys = base[..., None] * size + torch.arange(size, device=logits.device)
        return logits.masked_fill(torch.isin(keys, table), self.penalty)


def with_suppression(model: Any, prefixes: list[list[int]], penalty: float = PENALTY) -> Any:
    """A copy of generative ``model`` with :class:`SuppressTokens` appended to its add-ons (same weights).

    The copy is built from the model's stored hyperparameters and codes, so its checkpoint rebuilds the
    suppression with no config.
    """
    hparams = {k: v for k, v in model.hparams.items() if not k.startswith("_")}
    addons = [*hparams.pop("addons", []), SuppressTokens(prefixes, penalty).spec()]
    copy = type(model)(**hparams, addons=addons)
    copy.build_from_codes(model.backbone.codes.cpu().numpy(), tuple(model.backbone.codebook_sizes))
    copy.load_state_dict(model.state_dict())
    copy.sid_table_state = model.sid_table_state
    return copy.eval()
