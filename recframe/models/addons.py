"""Add-ons: methods that compose with a model through its ``addons:`` list, and the pieces every kind shares.

Two kinds of model take add-ons, each with its own hook set:

* generative (semantic-ID) backbones: :class:`~recframe.models.generative.addons.GenerativeAddon`
  (encodings, attention biases, logit adjustments, auxiliary losses);
* embedding models (:class:`~recframe.models.base.EmbeddingModel`: BPR-MF, LightGCN, SASRec, the sign-aware
  models): :class:`EmbeddingAddon` (auxiliary losses), e.g. :class:`~recframe.models.signed.ValenceMargin`.

What they share lives here: the :class:`Addon` base (settings stored under the constructor argument names,
read back by :meth:`Addon.spec`; a ``bind_data(train)`` hook that receives the training split only), the
:class:`AuxLoss` term, and :func:`build_addon`, which rebuilds an add-on from its spec (what a checkpoint
stores in the model's hyperparameters, so ``weights_only=True`` loading rebuilds the add-ons with no config).

An embedding add-on in a config::

    model:
      class_path: recframe.models.LightGCN
      init_args:
        addons:
          - class_path: recframe.models.signed.ValenceMargin
            init_args: {weight: 0.5, margin: 1.0}

Embedding-model life cycle: the model's constructor stores the add-ons (and their specs in its
hyperparameters); at each fit, after the model's own ``bind_data``, every add-on's :meth:`Addon.bind_data`
gets the training split; every training step adds ``sum_a w_a * aux_a`` over the add-ons' terms to the
model's loss and logs each ``aux_a`` as ``train/aux_<name>``. Derived state belongs in non-persistent
buffers (rebuilt from the same data at the next fit); parameters and persistent buffers are saved under
``addons.<i>.`` in the model's ``state_dict``.

Auxiliary losses under DDP (both kinds of add-on). Each of the ``R`` processes computes the add-ons' terms on
its own batch and adds ``sum_a w_a * aux_a`` to its loss (generative models inside ``loss``, embedding models
in the training step) *before* the training step (:meth:`~recframe.models.base.RecModel.training_step`)
rescales the whole loss to the global-batch mean: rank ``r``'s loss is multiplied by ``n_r * R / N``, where
``n_r = model.loss_terms(batch_r)`` counts the *main* loss's terms (rows; non-padding targets for sequence
models) and ``N = sum_r n_r``. DDP then averages gradients over ranks, so one step's gradient is::

    sum_r (n_r / N) * grad(main_r + sum_a w_a * aux_a_r)

Each rank's auxiliary value is weighted by its rank's share of the main loss's terms, like its main loss. With
equal shares that is the plain mean over ranks. An auxiliary term that is a mean over the main loss's own
units (one per row, or per target) therefore equals what one process computes on the union of the ranks'
batches; one that averages over units of its own (R-GRec's anchors, ValenceMargin's triples) gets the
share-weighted mean of the per-rank means, not the mean over the union of those units (the two agree when
every rank holds as many units per main-loss term). Terms that sample do so on their own rank's batch. The
logged ``train/aux_<name>`` (per epoch) is the mean over every rank's steps, each weighted by its batch rows
(``sync_dist``); it monitors the term, while the gradient above is what training follows.
``tests/models/test_addon_ddp.py`` checks this weighting against the per-rank formula and, for a per-row term,
against one process on the union batch.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from torch import Tensor, nn

if TYPE_CHECKING:
    from recframe.models.base import EmbeddingModel


class AuxLoss(NamedTuple):
    """One auxiliary training term: ``weight * value`` is added to the loss; ``value`` is logged by name."""

    name: str
    weight: float
    value: Tensor


class Addon(nn.Module):
    """Base of every add-on: a module of optional hooks whose constructor only stores settings.

    Each constructor argument must be kept under the attribute of its own name (the scikit-learn
    convention), so :meth:`spec` can read the settings back.
    """

    def bind_data(self, train: Any) -> None:
        """Derive state from the training ``Interactions`` (default: nothing): training data only."""

    def spec(self) -> dict[str, Any]:
        """``{"class_path": ..., "init_args": {...}}``: what rebuilds this add-on (stored in checkpoints).

        Reads each constructor argument from the attribute of the same name.
        """
        cls = type(self)
        args = {}
        for name, param in inspect.signature(cls.__init__).parameters.items():
            if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if not hasattr(self, name):
                raise TypeError(f"{cls.__name__} stores no attribute {name!r} for its constructor argument; "
                                "an add-on's __init__ must keep every argument under its own name.")
            args[name] = getattr(self, name)
        return {"class_path": f"{cls.__module__}.{cls.__qualname__}", "init_args": args}


class EmbeddingAddon(Addon):
    """Base class of add-ons for embedding models (module docstring). Every hook is optional."""

    def auxiliary_losses(self, model: EmbeddingModel, batch: dict[str, Tensor]) -> list[AuxLoss]:
        """Extra training terms for one training batch of ``model`` (default: none).

        ``batch`` is whatever the model's ``train_batch`` kind delivers (``pairwise``: ``users/pos/neg``;
        ``sequence``: ``input/target`` windows); an add-on that needs more (e.g. a user's disliked items)
        derives it from the training split in :meth:`Addon.bind_data` rather than changing batch formats.
        """
        return []


A = TypeVar("A", bound=Addon)


def build_addon(spec: A | Mapping[str, Any], base: type[A], example: str) -> A:
    """An add-on of kind ``base`` from itself or from its :meth:`Addon.spec` (``class_path`` + ``init_args``).

    ``example`` is a class path named in the error message of a malformed spec.
    """
    if isinstance(spec, base):
        return spec
    if isinstance(spec, Addon):
        raise ValueError(f"addons: {type(spec).__name__} is not a {base.__name__}; this model takes "
                         f"{base.__name__} add-ons (e.g. {example}).")
    if not isinstance(spec, Mapping) or "class_path" not in spec:
        raise ValueError(f"addons: {spec!r} is not an add-on; give {{class_path: {example}, "
                         f"init_args: {{...}}}} or a {base.__name__}.")
    path = str(spec["class_path"])
    module_name, _, name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError):
        raise ValueError(f"addons: class_path {path!r} cannot be imported; check the spelling, or install "
                         "the package that defines it.") from None
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ValueError(f"addons: {path!r} is not a {base.__name__} subclass.")
    return cls(**dict(spec.get("init_args") or {}))


def embedding_addon_from_spec(spec: EmbeddingAddon | Mapping[str, Any]) -> EmbeddingAddon:
    """An :class:`EmbeddingAddon` from itself or from its spec (see :func:`build_addon`)."""
    return build_addon(spec, EmbeddingAddon, "recframe.models.signed.ValenceMargin")


__all__ = ["Addon", "AuxLoss", "EmbeddingAddon", "build_addon", "embedding_addon_from_spec"]
