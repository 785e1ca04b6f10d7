"""``RecModel``: the training/validation/test loop every recframe model shares.

A model implements two methods:

* ``loss(batch) -> Tensor`` on training batches of the kind named by its
  ``train_batch`` class attribute (``pairwise``, ``sequence`` or ``history``);
* ``score(batch) -> Tensor [B, n_items + 1]`` on evaluation batches (keys
  ``users``, ``history``): a score for every item of the catalogue, padding
  column and seen items included. Models need not mask: the evaluator drops the
  padding column and the batch's ``seen`` items from the ranking
  (:mod:`recframe.metrics.ranking`), and serving does the same through
  :func:`recframe.metrics.topk.masked_top_k`.

Embedding models also expose ``query_embedding(batch)`` and
``item_embeddings()`` (what FAISS serves); their ``score`` is the inner product.

Models that need the training graph or counts override ``bind_data(train)``,
called once before fitting; whatever they derive is stored in buffers so a
checkpoint is self-contained.

Embedding models take add-ons (:class:`~recframe.models.addons.EmbeddingAddon`,
e.g. :class:`~recframe.models.signed.ValenceMargin`) through an ``addons:``
constructor argument: :meth:`EmbeddingModel.attach_addons` stores them and
their specs (in the hyperparameters, so checkpoints rebuild them), each fit
hands them the training split after ``bind_data``, and every training step
adds their weighted auxiliary terms (:meth:`RecModel.addon_losses`) to the loss.

Evaluation goes through :class:`recframe.metrics.FullRankingEvaluator` only;
its settings come from the datamodule's protocol, so every model in a table is
measured the same way. Running sums are summed across processes (not averaged)
before the metrics are computed.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import lightning as L
import torch
from torch import Tensor, nn

from recframe.metrics import FullRankingEvaluator
from recframe.models.addons import AuxLoss, EmbeddingAddon, embedding_addon_from_spec
from recframe.models.setting_rules import check_model_settings


class RecModel(L.LightningModule, ABC):
    """Base class of all recframe models.

    Args:
        n_items: number of real items (linked from the datamodule by the CLI).
        n_users: number of real users (linked from the datamodule by the CLI).
        lr: learning rate.
        weight_decay: decoupled weight decay (AdamW) or L2 (Adam).
        optimizer: ``adam`` or ``adamw``.
    """

    train_batch: ClassVar[str] = "pairwise"
    #: whether ``score`` reads the ``history`` of a batch (sequential models) rather than ``users``;
    #: only such models can score an arbitrary history passed to ``Recommender.recommend``
    uses_history: ClassVar[bool] = False

    def __init__(self, n_items: int, n_users: int = 0, lr: float = 1e-3, weight_decay: float = 0.0,
                 optimizer: Literal["adam", "adamw"] = "adam") -> None:
        # every setting of the model's own constructor, checked before any layer is built
        self.check_settings(_constructor_arguments(self))
        super().__init__()
        self.n_items = n_items
        self.n_users = n_users
        self.lr = lr
        self.weight_decay = weight_decay
        self.optimizer_name = optimizer
        self.evaluator: FullRankingEvaluator | None = None

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """Refuse an out-of-range constructor setting before anything is built or loaded.

        ``settings`` maps constructor arguments to values (keys the constructor does not take are
        skipped, ``None`` values are not checked). The default applies the shared table of
        :mod:`recframe.models.setting_rules` (widths, heads, dropouts, learning rate, ...); a model with
        settings of its own extends it and calls ``super().check_settings(settings)``. The base
        constructor calls it with the model's own constructor arguments, and ``recframe fit``/``validate``/
        ``test`` with the parsed config before the data loads.

        Raises:
            SettingError: naming the model class and the argument.
        """
        params = inspect.signature(cls.__init__).parameters
        check_model_settings(cls.__name__, {k: v for k, v in settings.items() if k in params})

    # ---------------------------------------------------------- model API
    @abstractmethod
    def loss(self, batch: dict[str, Tensor]) -> Tensor | None:
        """Training loss on one batch (``None`` for models with nothing to optimise)."""

    @abstractmethod
    def score(self, batch: dict[str, Tensor]) -> Tensor:
        """Scores ``[B, n_items + 1]`` for every item (padding column ignored)."""

    def addon_losses(self, batch: dict[str, Tensor]) -> list[AuxLoss]:
        """Auxiliary terms the training step adds to :meth:`loss` as ``sum weight * value`` (default: none).

        Embedding models return their add-ons' terms (:meth:`EmbeddingModel.addon_losses`); generative
        models add their add-ons' terms inside their own ``loss``.
        """
        return []

    def loss_terms(self, batch: dict[str, Tensor]) -> int:
        """How many per-sample terms ``loss(batch)`` averages (default: the batch's rows).

        Used under DDP only, to turn per-process means into the mean over the
        whole global batch (see :meth:`training_step`).
        """
        return _batch_size(batch)

    @classmethod
    def upgrade_checkpoint(cls, checkpoint: dict[str, Any]) -> dict[str, Any]:
        """Rewrite a checkpoint dict written by an older version of this model (default: unchanged).

        Readers that rebuild a model from the stored hyperparameters (``Recommender.from_checkpoint``) call it
        first, so a model whose constructor changed can still load what it wrote before.
        """
        return checkpoint

    def bind_data(self, train: Any) -> None:
        """Derive model state from the training :class:`Interactions` (default: nothing)."""

    # ---------------------------------------------------------- lifecycle
    def setup(self, stage: str) -> None:
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if dm is None:
            return
        if dm.n_items != self.n_items:
            raise ValueError(f"{type(self).__name__} was built for {self.n_items} items but the data has "
                             f"{dm.n_items}; set model.init_args.n_items to match (the CLI links it).")
        if stage == "fit":
            self.bind_data(dm.split.train)
        proto = dm.protocol
        # standard (+ signed) metrics from the protocol, then the data's extra metric families
        self.evaluator = FullRankingEvaluator(
            n_items=self.n_items, ks=proto["ks"], signed=proto["signed"],
            signed_lambda=proto["signed_lambda"], relevance=proto["relevance"],
            families=proto.get("families", ()))

    def configure_optimizers(self) -> torch.optim.Optimizer | None:
        params = [p for p in self.parameters() if p.requires_grad]
        if not params:
            return None
        cls = torch.optim.AdamW if self.optimizer_name == "adamw" else torch.optim.Adam
        return cls(params, lr=self.lr, weight_decay=self.weight_decay)

    # ------------------------------------------------------------- steps
    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor | None:
        loss = self.loss(batch)
        if loss is None and any(p.requires_grad for p in self.parameters()):
            raise RuntimeError(f"{type(self).__name__}.loss returned None but the model has trainable "
                               "parameters; return the training loss tensor.")
        if loss is not None:
            for term in self.addon_losses(batch):
                loss = loss + term.weight * term.value
                self.log(f"train/aux_{term.name}", term.value.detach(), on_step=False, on_epoch=True,
                         batch_size=_batch_size(batch), sync_dist=True)
        if loss is not None and self._trainer is not None and self.trainer.world_size > 1:
            loss = self._global_batch_mean(loss, self.loss_terms(batch))
        if loss is not None:
            self.log("train/loss", loss, prog_bar=True, on_step=True, on_epoch=True,
                     batch_size=_batch_size(batch), sync_dist=True)
        return loss

    def _global_batch_mean(self, local_mean: Tensor, terms: int) -> Tensor:
        """Rescale a per-process mean so that DDP's gradient average is the global-batch mean.

        DDP averages gradients over the ``R`` processes. With ``n_r`` terms on
        rank ``r`` and ``N = sum n_r``, returning ``mean_r * n_r * R / N`` makes
        that average the gradient of ``sum(all terms) / N``, which is exactly what
        one process computes on the union of the ranks' batches, even when the
        ranks hold different numbers of terms (e.g. sequence targets).
        """
        count = torch.tensor(float(terms), device=local_mean.device)
        total = self.trainer.strategy.reduce(count.clone(), reduce_op="sum")
        return local_mean * (count * self.trainer.world_size / total)

    def eval_scores(self, batch: dict[str, Tensor], stage: str) -> Tensor:
        """The scores the evaluator ranks at ``stage`` (``"val"`` or ``"test"``): :meth:`score` unless a model
        validates more cheaply (e.g. generative models by beam search; the test always uses ``score``)."""
        return self.score(batch)

    def _eval_step(self, batch: dict[str, Tensor], stage: str = "test") -> None:
        if self.evaluator is None:
            raise RuntimeError("evaluation needs a RecDataModule attached to the trainer")
        scores = self.eval_scores(batch, stage)
        self.evaluator.update(scores, batch["targets"], batch["labels"], batch["seen"],
                              model_name=type(self).__name__)
        if stage == "test":
            self._record_test_ranks(scores, batch)

    def _record_test_ranks(self, scores: Tensor, batch: dict[str, Tensor]) -> None:
        """Keep each test user's rank of its first held-out item (:attr:`test_ranks`), from the scores the
        evaluator just ranked, so that per-user analyses after ``trainer.test`` need not score again."""
        from recframe.metrics import target_ranks

        ranks, _ = target_ranks(scores, batch["targets"], batch["labels"], batch["seen"],
                                disliked_ties="last")
        self.test_ranks.update(zip(batch["users"].tolist(), ranks[:, 0].tolist(), strict=True))

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        self._eval_step(batch)

    def _eval_epoch_end(self, prefix: str) -> dict[str, float]:
        ev = self.evaluator
        state = ev.state_tensors()
        if self.trainer.world_size > 1:
            state = {k: self.trainer.strategy.reduce(v, reduce_op="sum") for k, v in state.items()}
            ev.load_state_tensors(state)
        values = ev.compute()
        ev.reset()
        self.log_dict({f"{prefix}/{k}": v for k, v in values.items()}, sync_dist=False,
                      prog_bar=False, batch_size=1)
        return values

    def on_validation_epoch_start(self) -> None:
        if self.evaluator is not None:
            self.evaluator.reset()

    def on_test_epoch_start(self) -> None:
        if self.evaluator is not None:
            self.evaluator.reset()
        #: ``{user index: 0-based pessimistic rank of the user's first held-out item}`` of the last test
        #: pass (held-out items relevant whatever their label, ties put the target last: the ranks of
        #: :func:`recframe.metrics.target_ranks` with ``disliked_ties="last"``), this process's batches only
        self.test_ranks: dict[int, int] = {}

    def on_validation_epoch_end(self) -> None:
        values = self._eval_epoch_end("val")
        # the model-selection metric: NDCG@10 when it is computed, else the first NDCG cut-off
        key = "ndcg@10" if "ndcg@10" in values else next((k for k in values if k.startswith("ndcg@")), None)
        if key is not None:
            self.log("val_ndcg", values[key], prog_bar=True, batch_size=1)

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")


class EmbeddingModel(RecModel):
    """A model that scores by inner product of a query and item embeddings.

    Add-ons: a subclass that takes them has an ``addons: list[EmbeddingAddon] | None = None`` constructor
    argument, calls ``self.save_hyperparameters(ignore=["addons"])`` and then ``self.attach_addons(addons)``.
    """
    score_metric: ClassVar[str] = "ip"  # how score() compares query and items: "ip" inner product or "cosine"

    # ------------------------------------------------------------- add-ons
    def attach_addons(self, addons: Sequence[EmbeddingAddon | Mapping[str, Any]] | None) -> None:
        """Build the add-ons (objects or ``{class_path, init_args}`` specs) and register them as ``addons``.

        Their specs are stored in ``hparams["addons"]`` (plain values), so a checkpoint loaded with
        ``weights_only=True`` rebuilds them; their parameters and persistent buffers are saved under
        ``addons.<i>.``. Creates no parameters itself, so the model's initialisation is unchanged.
        """
        built = [embedding_addon_from_spec(a) for a in addons or []]
        self.addons = nn.ModuleList(built)
        self.hparams["addons"] = [a.spec() for a in built]

    def attached_addons(self) -> list[EmbeddingAddon]:
        """The attached add-ons, in list order (empty for a model that takes none)."""
        return list(getattr(self, "addons", None) or [])

    def bind_addons(self, train: Any) -> None:
        """Give every add-on the training split (called at each fit, after :meth:`bind_data`)."""
        for addon in self.attached_addons():
            addon.bind_data(train)

    def addon_losses(self, batch: dict[str, Tensor]) -> list[AuxLoss]:
        """The add-ons' auxiliary terms for one training batch, in list order."""
        return [term for addon in self.attached_addons() for term in addon.auxiliary_losses(self, batch)]

    def setup(self, stage: str) -> None:
        super().setup(stage)
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if dm is not None and stage == "fit":
            self.bind_addons(dm.split.train)

    # ----------------------------------------------------------- embeddings
    @abstractmethod
    def query_embedding(self, batch: dict[str, Tensor]) -> Tensor:
        """``[B, d]`` query vectors for an evaluation batch."""

    @abstractmethod
    def item_embeddings(self) -> Tensor:
        """``[n_items + 1, d]`` item vectors (row 0 is padding)."""

    def query_and_item_embeddings(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        """``(query_embedding(batch), item_embeddings())`` in one call.

        Models whose two halves come from one forward pass (graph propagation) override it to run that
        pass once; add-ons that need both use it.
        """
        return self.query_embedding(batch), self.item_embeddings()

    def score(self, batch: dict[str, Tensor]) -> Tensor:
        return self.query_embedding(batch) @ self.item_embeddings().T


def _constructor_arguments(obj: Any) -> dict[str, Any]:
    """The arguments of the outermost ``__init__`` now running for ``obj`` (the model's own constructor).

    Walks up the ``__init__`` frames whose ``self`` is ``obj`` (a subclass constructor calling
    ``super().__init__``), as Lightning's ``save_hyperparameters`` does, and returns the outermost
    one's named arguments.
    """
    frame = inspect.currentframe()
    found: dict[str, Any] = {}
    try:
        frame = frame.f_back if frame is not None else None  # RecModel.__init__, then its callers
        while frame is not None and frame.f_code.co_name == "__init__" and frame.f_locals.get("self") is obj:
            info = inspect.getargvalues(frame)
            found = {name: info.locals[name] for name in info.args if name != "self" and name in info.locals}
            frame = frame.f_back
    finally:
        del frame
    return found


def _batch_size(batch: dict[str, Tensor]) -> int:
    first = next(iter(batch.values()))
    return int(first.shape[0])


class PropagatedEmbeddingModel(EmbeddingModel):
    """An embedding model whose user and item tables come from one graph propagation (LightGCN and the signed
    graph models): subclasses implement :meth:`propagate`; the query and item embeddings read it, and
    :meth:`query_and_item_embeddings` propagates once for both."""

    @abstractmethod
    def propagate(self) -> tuple[Tensor, Tensor]:
        """Final user ``[n_users + 1, d]`` and item ``[n_items + 1, d]`` embeddings."""

    def query_embedding(self, batch: dict[str, Tensor]) -> Tensor:
        return self.propagate()[0][batch["users"]]

    def item_embeddings(self) -> Tensor:
        return self.propagate()[1]

    def query_and_item_embeddings(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
        users, items = self.propagate()  # one propagation for both
        return users[batch["users"]], items

