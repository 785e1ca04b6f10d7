"""Generative add-ons: methods that compose with a semantic-ID backbone through the model's ``addons:`` list.

A generative model (``TIGER``, ``SIDDecoder``) takes a list of add-ons in its config::

    model:
      class_path: recframe.models.generative.TIGER
      init_args:
        addons:
          - class_path: recframe.models.generative.TrieRec
            init_args: {}

An add-on is a :class:`GenerativeAddon`: a module of optional hooks, in the spirit of Lightning's
``Callback`` (a hook that is not overridden costs nothing). What it may contribute:

* **encodings** (:meth:`GenerativeAddon.encode`): an additive input encoding of tokens, computed from their
  trie nodes (:class:`~recframe.models.generative.structure.TokenNodes`) and their token embeddings;
* **attention biases** (:meth:`GenerativeAddon.attention_bias`): an additive per-head bias on the
  self-attention logits between two token sets (positional or structural relations);
* **auxiliary losses** (:meth:`GenerativeAddon.auxiliary_losses`): named terms with weights, added to the
  model's training loss and logged as ``train/aux_<name>``; under DDP each rank's terms are weighted by its
  share of the main loss's targets (:mod:`recframe.models.addons`, "Auxiliary losses under DDP");
* **logit adjustments** (:meth:`GenerativeAddon.adjust_logits`): a change of each level's next-code logits,
  applied in training (teacher forcing), exact scoring and beam search alike, so the three stay one function;
* **training data** (:meth:`GenerativeAddon.bind_data`): the training split's ``Interactions``, given every
  time the model's ``bind_data`` runs (at each fit, also when the backbone came from a checkpoint), so an
  add-on can derive state from the training interactions (R-GRec's item graph); only training data ever
  reaches it. State derived there belongs in non-persistent buffers: it is rebuilt from the same data rather
  than saved, and inference must not need it;
* **checkpointed state**: its parameters and buffers live in the model's ``state_dict`` under
  ``backbone.addons.<i>.``; other state goes through torch's ``get_extra_state``/``set_extra_state`` as plain
  Python values (checkpoints load with ``weights_only=True``).

Life cycle. The constructor only stores settings, each under the attribute of its argument's name (the
scikit-learn convention); :meth:`GenerativeAddon.spec` reads them back, and the model saves the specs in its
hyperparameters so a checkpoint rebuilds its add-ons with no config. Parameters are created in
:meth:`GenerativeAddon.build`, which the backbone calls once, in list order, after its shared embeddings
and before its transformer layers: a model's initialisation is a fixed function of the seed and the add-on
list (TrieRec as an add-on initialises bit for bit like the former ``trierec: true`` flag).

When several add-ons contribute to one hook, their contributions are summed in list order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from torch import Tensor

from recframe.models.addons import Addon, AuxLoss, build_addon
from recframe.models.generative.structure import TokenNodes

if TYPE_CHECKING:
    from recframe.models.generative.backbones import SIDBackbone


class GenerativeAddon(Addon):
    """Base class of generative add-ons (module docstring). Every hook is optional.

    The spec and the ``bind_data`` hook come from :class:`~recframe.models.addons.Addon`, shared with the
    embedding models' add-ons.
    """

    def build(self, backbone: SIDBackbone) -> None:
        """Create parameters for ``backbone`` (its ``L``, ``dim``, ``n_heads``, ``n_items`` are set).

        Called once by the backbone's constructor at a fixed point of its parameter creation.
        """

    def encode(self, nodes: TokenNodes, token_emb: Tensor) -> Tensor | None:
        """Additive input encoding of tokens, or ``None``.

        Args:
            nodes: the tokens' trie nodes, each field shaped ``[..., l]``.
            token_emb: ``[..., l, D]`` their token embeddings; the axis ``-2`` runs over the levels of one
                item (or one decoder prefix) in order, so an item's ancestors are the tokens before it on
                that axis. The decoder start token (the root) comes as its own group of one.

        Returns:
            ``[..., l, D]``, added to the token inputs.
        """
        return None

    def attention_bias(self, query: TokenNodes, key: TokenNodes) -> Tensor | None:
        """Additive self-attention bias ``[R, H, q, k]`` of ``R`` rows of query tokens ``[R, q]`` against key
        tokens ``[R, k]``, or ``None``. Used in every self-attention of the backbone (and the decoder-only
        model's attention to its cached history); cross-attention is not biased."""
        return None

    def adjust_logits(self, logits: Tensor, prefix: Tensor, level: int) -> Tensor:
        """Next-code logits ``[..., C_level]`` after the add-on's adjustment (default: unchanged).

        ``prefix`` ``[..., level]`` holds the codes of levels ``0..level-1`` each row continues (it may be an
        expanded view: do not write into it).
        """
        return logits

    def bind_data(self, train: Any) -> None:
        """Derive state from the training ``Interactions`` (default: nothing).

        Called by :meth:`~recframe.models.generative.models.GenerativeRecModel.bind_data` every time it runs
        (before the backbone is built on a first fit; again on a resumed or repeated fit), with the training
        split only.
        """

    def auxiliary_losses(self, backbone: SIDBackbone, inputs: Tensor, targets: Tensor) -> list[AuxLoss]:
        """Extra training terms for a window batch ``inputs``/``targets`` ``[B, W]`` (default: none)."""
        return []


def addon_from_spec(spec: GenerativeAddon | Mapping[str, Any]) -> GenerativeAddon:
    """An add-on from itself or from its :meth:`~recframe.models.addons.Addon.spec` (``class_path`` +
    ``init_args``); see :func:`recframe.models.addons.build_addon`."""
    return build_addon(spec, GenerativeAddon, "recframe.models.generative.TrieRec")


__all__ = ["AuxLoss", "GenerativeAddon", "addon_from_spec"]
