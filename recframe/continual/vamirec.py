"""VAMIRec: value-aware memory intervention for continual recommendation (seed paragraph 6).

The abstract fixes the frame: (1) a memory state that separates a user's inherited memory into a slow
**anchor** and a fast **drift** component; (2) a value-aware action evaluator that proposes **three**
candidate memory operations and scores each with a **conservative** value that accounts for uncertainty and
intervention cost; (3) a policy distilled from these training-time labels, so inference needs no
look-ahead, applied to each user's memory before all-item ranking. Everything else is our choice, stated
here.

Backbone
    The fine-tuned SASRec of :class:`~recframe.continual.baselines.FineTune` (stage ``t`` data from the stage
    ``t - 1`` model). VAMIRec changes only the query a user is ranked with, so its backbone is exactly the
    fine-tune baseline's (the look-ahead's dropout passes run under a forked RNG), and any difference
    between the two rows is the memory intervention's.

Memory state (per user, under the current model; tied item embeddings ``E``)
    * ``q = SASRec(last max_len items)``: the inherited memory as the backbone reads it;
    * anchor ``A = ||q|| * a / ||a||`` with ``a = sum_i w_i E[item_i] / sum_i w_i`` over the user's **whole**
      known history (also beyond ``max_len``), ``w_i = 2^(-age_i / half_life)`` with ``age_i`` the number of
      later interactions: the slow, long-term component (``half_life`` = 200 interactions by default),
      rescaled to ``q``'s norm so it is on the scale of a query;
    * drift ``D = q - A``: the fast component; and the fresh drift ``D_new = q_short - A``, where
      ``q_short = SASRec(last short_len items)`` (5 by default) re-estimates the drift from the newest
      evidence only.

The three operations (the query ``m`` the user is ranked with, ``scores = m E^T``)
    * ``keep``: ``m = A + D = q``: the inherited memory untouched (exactly the backbone's ranking);
    * ``refresh_drift``: ``D <- D_new``, ``m = A + D_new = q_short``: obsolete drift replaced by the newest
      interactions (for a real shift of interest);
    * ``consolidate``: the drift is folded into the anchor by one slow step and cleared,
      ``A <- A + eta * D``, ``D <- 0``, ``m = A + eta * D`` (``eta = 0.5``): long-term preference reasserted
      against a noisy or transient recent drift.

Conservative action value (training time only)
    Labels at stage ``t`` come from the stage ``t - 1`` model **before** it is updated on stage ``t``, on the
    returning users of stage ``t``: history through stage ``t - 1``, look-ahead targets their stage-``t``
    rows, which that model never trained on. This is exactly the test situation one stage earlier (stage
    ``t`` is training data by now; nothing of stage ``t + 1`` is read). We first tried cutting each stage-t
    user's rows in half (more label users, also new ones) but a history ending mid-stage does not look like
    a history ending at a stage boundary, and the labels it gave were wrong for exactly the users whose
    memory needs intervention.
    For every operation ``k`` and ``M`` MC-dropout passes ``j`` (dropout on, M = 8),
    ``L_k^j`` is the mean full-catalogue cross-entropy of the targets (known items masked) and
    ``G_k^j = L_keep^j - L_k^j`` the gain over keeping. The conservative value is
    ``V_k = mean_j G_k^j - lam * std_j G_k^j - c_k`` with intervention cost ``c_keep = 0`` and
    ``c_k = cost`` otherwise, so ``V_keep = 0`` and an operation must beat keeping by more than its cost
    and its uncertainty.

Policy (inference)
    A two-layer MLP on look-ahead-free features of the memory state (cosines between ``q``, ``q_short`` and
    ``A``, their norms, history length, the coherence of the last ``short_len`` and of all items, and each
    operation's top softmax probability), distilled by cross-entropy towards ``softmax(V / tau)`` over all
    labels collected so far (retrained after every stage). At test time each user gets the operation of the
    policy's largest logit; before any label exists (the first test) the policy keeps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from recframe.continual.baselines import BackboneSettings, FineTune, ScoreFn
from recframe.continual.stages import StagedInteractions
from recframe.data.batches import SequenceWindows
from recframe.data.datamodule import EvalSet
from recframe.models.sasrec import SASRec
from recframe.yaml_config import require

__all__ = ["OPERATIONS", "MemoryState", "PolicyNet", "VAMIRec", "candidate_queries", "conservative_values",
           "lookahead_set", "memory_state", "memory_features"]

OPERATIONS: tuple[str, ...] = ("keep", "refresh_drift", "consolidate")
N_FEATURES = 12


@dataclass
class MemoryState:
    """Per-user memory ``[B, d]``: anchor ``A``, drift ``D = q - A``, fresh drift ``D_new = q_short - A``."""

    anchor: Tensor
    drift: Tensor
    fresh: Tensor


def _anchor(model: SASRec, seen: Tensor, half_life: float) -> Tensor:
    """Recency-weighted mean item embedding of each left-padded full history ``seen`` ``[B, S]``."""
    emb = model.item_emb(seen)  # padding rows are zero
    real = (seen > 0).float()
    # age = number of later real items; left padding keeps the latest item in the last column
    age = real.flip(1).cumsum(1).flip(1) - 1.0
    w = torch.pow(2.0, -age.clamp(min=0) / half_life) * real
    return (w[..., None] * emb).sum(1) / w.sum(1, keepdim=True).clamp(min=1e-12)


def memory_state(model: SASRec, batch: dict[str, Tensor], short_len: int = 5,
                 half_life: float = 200.0) -> tuple[MemoryState, Tensor, Tensor]:
    """The memory state of a batch (keys ``history``, ``seen``) plus ``q`` and ``q_short``."""
    q = model.encode(batch["history"])[:, -1]
    q_short = model.encode(batch["history"][:, -short_len:])[:, -1]
    a = _anchor(model, batch["seen"], half_life)
    anchor = a * (q.norm(dim=1, keepdim=True) / a.norm(dim=1, keepdim=True).clamp(min=1e-12))
    return MemoryState(anchor=anchor, drift=q - anchor, fresh=q_short - anchor), q, q_short


def candidate_queries(state: MemoryState, eta: float = 0.5) -> Tensor:
    """``[B, 3, d]`` ranking queries of :data:`OPERATIONS`: ``A + D``, ``A + D_new``, ``A + eta * D``."""
    a = state.anchor
    return torch.stack([a + state.drift, a + state.fresh, a + eta * state.drift], dim=1)


def _masked_logits(queries: Tensor, items: Tensor, seen: Tensor, keep: Tensor | None = None) -> Tensor:
    """``[B, K, n_items + 1]`` scores with padding and seen items (except ``keep``) at ``-inf``."""
    logits = queries @ items.T
    mask = torch.zeros(logits.shape[0], logits.shape[2], dtype=torch.bool, device=logits.device)
    mask.scatter_(1, seen, True)
    if keep is not None:
        mask.scatter_(1, keep, False)
    mask[:, 0] = True
    return logits.masked_fill(mask[:, None, :], float("-inf"))


def _resultant(emb: Tensor, real: Tensor) -> Tensor:
    """Length of the mean unit vector of the real rows (1: all aligned, ~0: scattered)."""
    unit = F.normalize(emb, dim=-1) * real[..., None]
    return unit.sum(1).norm(dim=-1) / real.sum(1).clamp(min=1.0)


def memory_features(model: SASRec, batch: dict[str, Tensor], short_len: int, half_life: float,
                    eta: float) -> tuple[Tensor, Tensor]:
    """Look-ahead-free policy features ``[B, N_FEATURES]`` and the candidate queries ``[B, 3, d]``."""
    state, q, q_short = memory_state(model, batch, short_len, half_life)
    queries = candidate_queries(state, eta)
    cos = F.cosine_similarity
    seen = batch["seen"]
    real = (seen > 0).float()
    emb = model.item_emb(seen)
    recent = seen[:, -short_len:]
    probs = torch.softmax(_masked_logits(queries, model.item_emb.weight, seen), dim=-1)
    feats = torch.stack([
        cos(q, state.anchor, dim=1),
        cos(q_short, state.anchor, dim=1),
        cos(q, q_short, dim=1),
        q.norm(dim=1).log(),
        q_short.norm(dim=1).log(),
        real.sum(1).log1p(),
        _resultant(model.item_emb(recent), (recent > 0).float()),
        _resultant(emb, real),
        *(probs.max(dim=-1).values.clamp(min=1e-12).log().unbind(1)),
        cos(model.item_emb(recent).sum(1), emb.sum(1), dim=1),
    ], dim=1)
    return feats, queries


def conservative_values(gains: Tensor, lam: float, cost: float) -> Tensor:
    """``V_k = mean_j G_k^j - lam * std_j G_k^j - c_k`` from gains ``[M, B, 3]`` (column 0 = keep, gain 0).

    ``std`` is the population standard deviation over the ``M`` passes; ``c_0 = 0``, ``c_k = cost`` else.
    """
    mean = gains.mean(0)
    spread = gains.std(0, unbiased=False)
    costs = torch.full((gains.shape[-1],), float(cost), dtype=gains.dtype, device=gains.device)
    costs[0] = 0.0
    return mean - lam * spread - costs


def lookahead_set(data: StagedInteractions, t: int) -> EvalSet:
    """Label users of stage ``t``: the returning users of stage ``t``, history through stage ``t - 1``, their
    stage-``t`` rows as look-ahead targets (the test of the previous transition, now training data)."""
    if t < 1:
        raise ValueError(f"look-ahead labels need a previous stage; got stage {t}")
    return data.test_set(t - 1)


class PolicyNet(nn.Module):
    """Two-layer MLP from memory features to one logit per operation of :data:`OPERATIONS`."""

    def __init__(self, n_features: int = N_FEATURES, hidden: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, len(OPERATIONS)))
        self.register_buffer("mean", torch.zeros(n_features))
        self.register_buffer("std", torch.ones(n_features))

    def forward(self, feats: Tensor) -> Tensor:
        return self.net((feats - self.mean) / self.std)

    def choose(self, feats: Tensor) -> Tensor:
        """Index into :data:`OPERATIONS` per row (the largest logit)."""
        return self(feats).argmax(dim=1)


class VAMIRec(FineTune):
    """Fine-tuned SASRec plus value-aware memory intervention (see the module docstring).

    Args:
        short_len: items of the fresh drift's window.
        half_life: the anchor's half-life in interactions.
        eta: consolidation step.
        mc_passes: MC-dropout passes of the action evaluator.
        lam: uncertainty penalty weight.
        cost: intervention cost of a non-keep operation (nats of next-stage loss per target).
        tau: temperature of the distillation targets ``softmax(V / tau)``.
        policy_steps: full-batch Adam steps of the policy per stage.
    """

    name = "VAMIRec"

    def __init__(self, data: StagedInteractions, settings: BackboneSettings, seed: int = 0,
                 progress: bool = False, short_len: int = 5, half_life: float = 200.0, eta: float = 0.5,
                 mc_passes: int = 8, lam: float = 1.0, cost: float = 0.01, tau: float = 0.05,
                 policy_steps: int = 300) -> None:
        self.check_options(settings, short_len=short_len, half_life=half_life, eta=eta, mc_passes=mc_passes,
                           lam=lam, cost=cost, tau=tau, policy_steps=policy_steps)
        super().__init__(data, settings, seed, progress)
        self.short_len, self.half_life, self.eta = short_len, half_life, eta
        self.mc_passes, self.lam, self.cost, self.tau = mc_passes, lam, cost, tau
        self.policy_steps = policy_steps
        self.features_: list[Tensor] = []
        self.values_: list[Tensor] = []
        self.policy: PolicyNet | None = None
        self.choices_: list[list[int]] = []  # operation counts of every score call since the last stage

    @classmethod
    def check_options(cls, settings: BackboneSettings, short_len: int = 5, half_life: float = 200.0,
                      eta: float = 0.5, mc_passes: int = 8, lam: float = 1.0, cost: float = 0.01,
                      tau: float = 0.05, policy_steps: int = 300, **options: Any) -> None:
        """The ranges of the options (class docstring; see :meth:`ContinualLearner.check_options`)."""
        require(1 <= short_len <= settings.max_len, "short_len", short_len,
                f"in 1..max_len ({settings.max_len})")
        require(half_life > 0, "half_life", half_life, "> 0")
        require(0 < eta <= 1, "eta", eta, "in (0, 1]")
        require(mc_passes >= 2, "mc_passes", mc_passes, ">= 2")
        require(lam >= 0, "lam", lam, ">= 0")
        require(cost >= 0, "cost", cost, ">= 0")
        require(tau > 0, "tau", tau, "> 0")
        require(policy_steps >= 0, "policy_steps", policy_steps, ">= 0")

    # ------------------------------------------------------------- training time
    def before_stage(self, t: int) -> None:
        if t == 0:
            return
        # labels from the stage t-1 model on stage t's look-ahead; forked RNG: the backbone stays fine-tune's
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed * 7919 + t)
            feats, values = self.action_labels(self.lookahead(t))
        self.features_.append(feats)
        self.values_.append(values)

    def lookahead(self, t: int) -> EvalSet:
        """The label users of stage ``t`` (:func:`lookahead_set`)."""
        return lookahead_set(self.data, t)

    def action_labels(self, labels_set: EvalSet) -> tuple[Tensor, Tensor]:
        """Features ``[N, N_FEATURES]`` and conservative values ``[N, 3]`` of the label users."""
        model = self.model
        feats_all, values_all = [], []
        for start in range(0, len(labels_set.users), 256):
            idx = list(range(start, min(start + 256, len(labels_set.users))))
            batch = labels_set.batch(idx, self.settings.max_len)
            model.eval()
            with torch.no_grad():
                feats, _ = memory_features(model, batch, self.short_len, self.half_life, self.eta)
                gains = []
                model.train()  # MC dropout
                for _ in range(self.mc_passes):
                    state, _, _ = memory_state(model, batch, self.short_len, self.half_life)
                    losses = _target_losses(candidate_queries(state, self.eta), model.item_emb.weight,
                                            batch["seen"], batch["targets"])
                    gains.append(losses[:, :1] - losses)
                model.eval()
                values = conservative_values(torch.stack(gains), self.lam, self.cost)
            feats_all.append(feats)
            values_all.append(values)
        return torch.cat(feats_all), torch.cat(values_all)

    def after_stage(self, t: int, windows: SequenceWindows) -> None:
        self.choices_ = []
        if not self.features_:
            return
        feats, values = torch.cat(self.features_), torch.cat(self.values_)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed * 104729 + t)
            self.policy = fit_policy(feats, values, self.tau, self.policy_steps)

    # ------------------------------------------------------------------ scoring
    def score(self, batch: dict[str, Tensor]) -> Tensor:
        """Scores of each user's memory after the policy's operation."""
        model = self.model
        model.eval()
        with torch.no_grad():
            feats, queries = memory_features(model, batch, self.short_len, self.half_life, self.eta)
            if self.policy is None:
                choice = torch.zeros(len(feats), dtype=torch.long)
            else:
                choice = self.policy.choose(feats)
            self.choices_.append(torch.bincount(choice, minlength=len(OPERATIONS)).tolist())
            m = queries[torch.arange(len(choice)), choice]
            return m @ model.item_emb.weight.T

    def backbone_score(self, batch: dict[str, Tensor]) -> Tensor:
        """The fine-tuned backbone's scores (every user keeps)."""
        return FineTune.score(self, batch)

    def scorers(self) -> dict[str, ScoreFn]:
        return {self.name: self.score, "fine-tune": self.backbone_score}


def _target_losses(queries: Tensor, items: Tensor, seen: Tensor, targets: Tensor) -> Tensor:
    """``[B, 3]`` mean cross-entropy of each user's targets under each query (seen items masked)."""
    logits = _masked_logits(queries, items, seen, keep=targets)
    logp = torch.log_softmax(logits, dim=-1)  # [B, K, n+1]
    idx = targets[:, None, :].expand(-1, logp.shape[1], -1)
    picked = logp.gather(2, idx)  # [B, K, T]
    real = (targets > 0)[:, None, :].float()
    return -(picked.masked_fill(real == 0, 0.0) * real).sum(-1) / real.sum(-1).clamp(min=1.0)


def fit_policy(feats: Tensor, values: Tensor, tau: float, steps: int = 300, lr: float = 1e-2) -> PolicyNet:
    """Distil ``softmax(values / tau)`` into a :class:`PolicyNet` on ``feats`` (full-batch Adam)."""
    policy = PolicyNet(feats.shape[1])
    policy.mean.copy_(feats.mean(0))
    policy.std.copy_(feats.std(0, unbiased=False).clamp(min=1e-6))
    target = torch.softmax(values / tau, dim=1)
    opt = torch.optim.Adam(policy.parameters(), lr=lr, weight_decay=1e-4)
    for _ in range(steps):
        loss = -(target * torch.log_softmax(policy(feats), dim=1)).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    policy.eval()
    return policy
