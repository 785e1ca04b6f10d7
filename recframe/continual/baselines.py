"""Continual learners on a SASRec backbone: fine-tune, full retrain, replay, LwF distillation and EWC.

Every learner holds one :class:`~recframe.models.SASRec` and is driven by
:func:`recframe.continual.protocol.run_protocol`: ``fit_stage(t)`` updates the model on stage ``t`` starting
from the stage ``t - 1`` model, ``scorers()`` returns the score functions the protocol evaluates on stage
``t + 1``. Training is a plain torch loop over the model's own ``loss(batch)`` (full-catalogue cross-entropy
on next-item windows, :meth:`StagedInteractions.stage_windows`), plus the learner's extra term:

* :class:`FineTune`: nothing else; stage ``t`` targets only.
* :class:`FullRetrain` (upper reference): a fresh model trained on every target of stages ``<= t`` for
  ``base_epochs`` at every stage.
* :class:`Replay`: stage ``t`` windows plus one single-target window per row of a reservoir buffer of past
  training targets (:class:`ReservoirBuffer`, Vitter's Algorithm R, capacity ``capacity`` rows).
* :class:`Distillation` (LwF, Li & Hoiem 2016): ``loss + alpha * tau^2 * KL(p_old^tau || p_new^tau)`` on
  every target position of the stage-``t`` windows, where ``p^tau = softmax(logits / tau)`` over the full
  catalogue and ``p_old`` comes from the frozen stage ``t - 1`` model.
* :class:`EWC` (Kirkpatrick et al. 2017, online form of Schwarz et al. 2018): ``loss + (lam / 2) *
  sum_i F_i (theta_i - theta*_i)^2`` with ``theta*`` the parameters after the previous stage and ``F`` the
  diagonal empirical Fisher, ``F <- gamma * F + F_stage``, where ``F_stage`` is the mean over the stage's
  mini-batches of the squared mini-batch loss gradient (:func:`diagonal_fisher`; the mini-batch form is the
  usual cheap estimate, it under-counts per-sample variance by the batch size, which ``lam`` absorbs).

The same seed gives the same initial model and batch order for every learner, so differences come from the
method alone.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from tqdm.auto import tqdm

from recframe.continual.stages import StagedInteractions
from recframe.data.batches import SequenceWindows, sequence_batch
from recframe.models.sasrec import SASRec
from recframe.yaml_config import require

__all__ = ["BackboneSettings", "ContinualLearner", "Distillation", "EWC", "FineTune", "FullRetrain",
           "Replay", "ReservoirBuffer", "diagonal_fisher", "ewc_penalty", "concat_windows"]

ScoreFn = Callable[[dict[str, Tensor]], Tensor]


@dataclass(frozen=True)
class BackboneSettings:
    """The SASRec backbone and its per-stage training budget (shared by every learner of a comparison).

    ``base_epochs`` train the first stage (and every full retrain), ``stage_epochs`` each later update.
    """

    hidden: int = 64
    n_layers: int = 2
    n_heads: int = 2
    inner: int = 128
    dropout: float = 0.2
    attn_dropout: float = 0.2
    max_len: int = 50
    window_stride: int | None = None
    lr: float = 1e-3
    batch_size: int = 128
    base_epochs: int = 20
    stage_epochs: int = 5

    def __post_init__(self) -> None:
        for key in ("hidden", "n_layers", "n_heads", "inner", "max_len", "batch_size", "base_epochs"):
            require(getattr(self, key) >= 1, key, getattr(self, key), ">= 1")
        divides = self.hidden % self.n_heads == 0
        require(divides, "n_heads", self.n_heads, f"a divisor of hidden ({self.hidden})")
        for key in ("dropout", "attn_dropout"):
            require(0 <= getattr(self, key) < 1, key, getattr(self, key), "in [0, 1)")
        require(self.window_stride is None or self.window_stride >= 1, "window_stride", self.window_stride,
                ">= 1 (or null: one window per target)")
        require(self.lr > 0, "lr", self.lr, "> 0 (e.g. 1.0e-3)")
        require(self.stage_epochs >= 0, "stage_epochs", self.stage_epochs, ">= 0")

    def build(self, n_items: int) -> SASRec:
        """A freshly initialised SASRec with these settings."""
        return SASRec(n_items, max_len=self.max_len, hidden=self.hidden, n_layers=self.n_layers,
                      n_heads=self.n_heads, inner=self.inner, dropout=self.dropout,
                      attn_dropout=self.attn_dropout, lr=self.lr)


def concat_windows(*parts: SequenceWindows) -> SequenceWindows:
    """Several window sets as one."""
    return SequenceWindows(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("starts", "ends",
                                                                                       "counted")))


class ContinualLearner:
    """Base learner: fine-tuning with an optional extra loss term (subclasses add replay, LwF, EWC).

    Args:
        data: the staged interactions.
        settings: backbone and training budget.
        seed: seeds the initial model and the batch order.
        progress: show a tqdm bar per stage.
    """

    name = "fine-tune"

    def __init__(self, data: StagedInteractions, settings: BackboneSettings, seed: int = 0,
                 progress: bool = False) -> None:
        self.data = data
        self.settings = settings
        self.seed = seed
        self.progress = progress
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.model = settings.build(data.n_items)
            self._torch_state = torch.random.get_rng_state()
        self._rng = np.random.default_rng(seed)
        self.stage_ = -1

    @classmethod
    def check_options(cls, settings: BackboneSettings, **options: Any) -> None:
        """Refuse out-of-range learner options (the constructor keywords after ``progress``) before any
        work: a ``ValueError`` whose message starts with the option's name. The base learner has none."""

    # ----------------------------------------------------------- the stage loop
    def fit_stage(self, t: int) -> None:
        """Update the model on stage ``t`` (from the stage ``t - 1`` model).

        The learner owns its torch RNG stream (dropout, sampling): it is restored before and saved after the
        update, so a learner's models depend on its seed alone, not on what ran before it in the process.
        """
        if t != self.stage_ + 1:
            raise ValueError(f"{self.name}: stages are fitted in order; got stage {t} after {self.stage_}")
        with torch.random.fork_rng(devices=[]):
            torch.random.set_rng_state(self._torch_state)
            self._fit_stage(t)
            self._torch_state = torch.random.get_rng_state()
        self.stage_ = t

    def _fit_stage(self, t: int) -> None:
        self.before_stage(t)
        windows = self.training_windows(t)
        epochs = self.settings.base_epochs if t == 0 else self.settings.stage_epochs
        self.train_windows(windows, epochs, desc=f"{self.name} stage {t}")
        self.after_stage(t, windows)

    def training_windows(self, t: int) -> SequenceWindows:
        """Windows whose targets stage ``t`` trains on (default: stage ``t``'s rows)."""
        s = self.settings
        return self.data.stage_windows(t, s.max_len, s.window_stride)

    def before_stage(self, t: int) -> None:
        """Hook before training on stage ``t`` (default: nothing)."""

    def after_stage(self, t: int, windows: SequenceWindows) -> None:
        """Hook after training on stage ``t`` (default: nothing)."""

    def extra_loss(self, batch: dict[str, Tensor]) -> Tensor | None:
        """A term added to the model's loss on every training batch (default: none)."""
        return None

    def batches(self, windows: SequenceWindows, shuffle: bool = True) -> Iterator[dict[str, Tensor]]:
        """Mini-batches of ``windows`` (shuffled by the learner's seeded generator)."""
        order = self._rng.permutation(len(windows)) if shuffle else np.arange(len(windows))
        bs = self.settings.batch_size
        for start in range(0, len(order), bs):
            yield sequence_batch(self.data.histories.items, windows, order[start:start + bs],
                                 self.settings.max_len)

    def train_windows(self, windows: SequenceWindows, epochs: int, desc: str = "") -> None:
        """``epochs`` passes of Adam over ``windows`` with the model's loss plus :meth:`extra_loss`."""
        if len(windows) == 0 or epochs <= 0:
            return
        model = self.model
        opt = torch.optim.Adam(model.parameters(), lr=self.settings.lr)
        model.train()
        n_batches = -(-len(windows) // self.settings.batch_size)
        bar = tqdm(total=epochs * n_batches, desc=desc, disable=not self.progress, leave=False)
        for _ in range(epochs):
            for batch in self.batches(windows):
                loss = model.loss(batch)
                extra = self.extra_loss(batch)
                if extra is not None:
                    loss = loss + extra
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                bar.update()
        bar.close()
        model.eval()

    # ------------------------------------------------------------------ scoring
    def score(self, batch: dict[str, Tensor]) -> Tensor:
        """Scores ``[B, n_items + 1]`` of the current model for an evaluation batch."""
        self.model.eval()
        with torch.no_grad():
            return self.model.score(batch)

    def scorers(self) -> dict[str, ScoreFn]:
        """Named score functions the protocol evaluates (one per reported row)."""
        return {self.name: self.score}


class FineTune(ContinualLearner):
    """Plain fine-tuning: stage ``t`` data only, from the stage ``t - 1`` model."""

    name = "fine-tune"


class FullRetrain(ContinualLearner):
    """Upper reference: a fresh model trained on all data so far, ``base_epochs`` at every stage."""

    name = "full retrain"

    def _fit_stage(self, t: int) -> None:
        torch.manual_seed(self.seed + 1000 * t)
        self.model = self.settings.build(self.data.n_items)
        s = self.settings
        windows = self.data.stage_windows(t, s.max_len, s.window_stride, cumulative=True)
        self.train_windows(windows, s.base_epochs, desc=f"{self.name} stage {t}")


class ReservoirBuffer:
    """A uniform sample of at most ``capacity`` items from a stream (Vitter's Algorithm R).

    After ``n`` items were offered, every one of them is in the buffer with probability
    ``min(1, capacity / n)``: item ``i`` (1-based) enters with probability ``capacity / i`` when the buffer is
    full and replaces a uniformly chosen slot.
    """

    def __init__(self, capacity: int, seed: int = 0) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ValueError(f"replay capacity={capacity!r}; it must be a whole number of rows >= 1.")
        self.capacity = int(capacity)
        self.items = np.empty(0, dtype=np.int64)
        self.seen = 0
        self._rng = np.random.default_rng(seed)

    def add(self, values: np.ndarray) -> None:
        """Offer ``values`` to the reservoir, in order."""
        buf = list(self.items)
        for v in np.asarray(values, dtype=np.int64):
            self.seen += 1
            if len(buf) < self.capacity:
                buf.append(int(v))
                continue
            j = int(self._rng.integers(0, self.seen))  # uniform in 0..seen-1
            if j < self.capacity:
                buf[j] = int(v)
        self.items = np.asarray(buf, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.items)


class Replay(ContinualLearner):
    """Fine-tuning on stage ``t`` plus the replayed targets of a reservoir buffer of earlier stages.

    Args:
        capacity: buffer size in interactions (flat rows of earlier stages).
    """

    name = "replay"

    def __init__(self, data: StagedInteractions, settings: BackboneSettings, seed: int = 0,
                 progress: bool = False, capacity: int = 2000) -> None:
        self.check_options(settings, capacity=capacity)
        super().__init__(data, settings, seed, progress)
        self.buffer = ReservoirBuffer(capacity, seed)

    @classmethod
    def check_options(cls, settings: BackboneSettings, capacity: int = 2000, **options: Any) -> None:
        """``capacity`` >= 1 (see :meth:`ContinualLearner.check_options`)."""
        whole = isinstance(capacity, (int, np.integer)) and not isinstance(capacity, bool)
        require(whole and capacity >= 1, "capacity", capacity, "a whole number of rows >= 1")

    def training_windows(self, t: int) -> SequenceWindows:
        own = super().training_windows(t)
        if len(self.buffer) == 0:
            return own
        return concat_windows(own, self.data.target_windows(self.buffer.items, self.settings.max_len))

    def after_stage(self, t: int, windows: SequenceWindows) -> None:
        # the stage's own targets (not the replayed ones) enter the reservoir, in time order
        first, end = self.data.stage_rows(t)
        lo = self.data.histories.indptr[:-1]
        rows = [np.arange(max(f, s + 1), e) for f, e, s in zip(first, end, lo) if e > max(f, s + 1)]
        if rows:
            flat = np.concatenate(rows)
            order = np.argsort(self.data.inter.timestamp[flat], kind="stable")
            self.buffer.add(flat[order])


class Distillation(ContinualLearner):
    """LwF-style distillation from the frozen stage ``t - 1`` model.

    Args:
        alpha: weight of the distillation term.
        temperature: softmax temperature ``tau`` of both distributions.
    """

    name = "distillation (LwF)"

    def __init__(self, data: StagedInteractions, settings: BackboneSettings, seed: int = 0,
                 progress: bool = False, alpha: float = 1.0, temperature: float = 2.0) -> None:
        self.check_options(settings, alpha=alpha, temperature=temperature)
        super().__init__(data, settings, seed, progress)
        self.alpha, self.temperature = float(alpha), float(temperature)
        self.teacher: SASRec | None = None

    @classmethod
    def check_options(cls, settings: BackboneSettings, alpha: float = 1.0, temperature: float = 2.0,
                      **options: Any) -> None:
        """``alpha >= 0`` and ``temperature > 0`` (see :meth:`ContinualLearner.check_options`)."""
        require(alpha >= 0, "alpha", alpha, ">= 0")
        require(temperature > 0, "temperature", temperature, "> 0")

    def before_stage(self, t: int) -> None:
        self.teacher = None if t == 0 else _frozen_copy(self.model)

    def extra_loss(self, batch: dict[str, Tensor]) -> Tensor | None:
        if self.teacher is None or self.alpha == 0:
            return None
        keep = batch["target"] > 0
        with torch.no_grad():
            old = _logits(self.teacher, batch["input"], keep)
        new = _logits(self.model, batch["input"], keep)
        return self.alpha * distillation_loss(new, old, self.temperature)


def distillation_loss(new_logits: Tensor, old_logits: Tensor, temperature: float) -> Tensor:
    """``tau^2 * mean_rows KL(softmax(old / tau) || softmax(new / tau))`` (Hinton et al.'s scaling)."""
    tau = temperature
    return F.kl_div(F.log_softmax(new_logits / tau, dim=-1), F.log_softmax(old_logits / tau, dim=-1),
                    log_target=True, reduction="batchmean") * tau * tau


def _logits(model: SASRec, inputs: Tensor, keep: Tensor) -> Tensor:
    """Full-catalogue logits (padding column excluded) at the positions ``keep`` of a window batch."""
    h = model.encode(inputs)[keep]
    return h @ model.item_emb.weight[1:].T


def _frozen_copy(model: nn.Module) -> SASRec:
    teacher = copy.deepcopy(model)
    teacher.eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


def ewc_penalty(params: dict[str, Tensor], anchors: dict[str, Tensor], fisher: dict[str, Tensor],
                lam: float) -> Tensor:
    """``(lam / 2) * sum_i F_i (theta_i - theta*_i)^2`` over every named parameter in ``fisher``."""
    total = torch.zeros(())
    for name, f in fisher.items():
        total = total + (f * (params[name] - anchors[name]) ** 2).sum()
    return 0.5 * lam * total


def diagonal_fisher(model: nn.Module, batches: Iterator[dict[str, Tensor]],
                    loss_fn: Callable[[dict[str, Tensor]], Tensor]) -> dict[str, Tensor]:
    """Mean over ``batches`` of the squared gradient of ``loss_fn(batch)`` for each trainable parameter."""
    sums = {n: torch.zeros_like(p) for n, p in model.named_parameters() if p.requires_grad}
    count = 0
    was_training = model.training
    model.eval()  # the Fisher of the deterministic model (no dropout noise in the gradients)
    for batch in batches:
        model.zero_grad(set_to_none=True)
        loss_fn(batch).backward()
        for n, p in model.named_parameters():
            if p.grad is not None and n in sums:
                sums[n] += p.grad.detach() ** 2
        count += 1
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    return {n: s / max(count, 1) for n, s in sums.items()}


class EWC(ContinualLearner):
    """Online elastic weight consolidation.

    Args:
        lam: penalty strength ``lam``.
        gamma: decay of the accumulated Fisher (``1``: plain sum over stages).
    """

    name = "EWC"

    def __init__(self, data: StagedInteractions, settings: BackboneSettings, seed: int = 0,
                 progress: bool = False, lam: float = 100000.0, gamma: float = 1.0) -> None:
        self.check_options(settings, lam=lam, gamma=gamma)
        super().__init__(data, settings, seed, progress)
        self.lam, self.gamma = float(lam), float(gamma)
        self.fisher: dict[str, Tensor] | None = None
        self.anchors: dict[str, Tensor] | None = None

    @classmethod
    def check_options(cls, settings: BackboneSettings, lam: float = 100000.0, gamma: float = 1.0,
                      **options: Any) -> None:
        """``lam >= 0`` and ``0 <= gamma <= 1`` (see :meth:`ContinualLearner.check_options`)."""
        require(lam >= 0, "lam", lam, ">= 0")
        require(0 <= gamma <= 1, "gamma", gamma, "in [0, 1]")

    def extra_loss(self, batch: dict[str, Tensor]) -> Tensor | None:
        if self.fisher is None or self.lam == 0:
            return None
        return ewc_penalty(dict(self.model.named_parameters()), self.anchors, self.fisher, self.lam)

    def after_stage(self, t: int, windows: SequenceWindows) -> None:
        new = diagonal_fisher(self.model, self.batches(windows, shuffle=False), self.model.loss)
        if self.fisher is None:
            self.fisher = new
        else:
            self.fisher = {n: self.gamma * self.fisher[n] + new[n] for n in new}
        self.anchors = {n: p.detach().clone() for n, p in self.model.named_parameters()}
