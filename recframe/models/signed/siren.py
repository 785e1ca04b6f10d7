"""SiReN (Seo et al., IEEE TNNLS 2022, "SiReN: Sign-Aware Recommendation Using Graph Neural Networks").

The signed user–item graph of the training split is split in two by sign and each part gets the encoder
its edges suit:

* **positive graph** (liked pairs): LightGCN propagation of a node table ``E_p`` (``K`` layers, mean over
  layers 0..K), ``Z_p``. Liked edges are homophilous, which is what graph smoothing assumes;
* **negative graph** (disliked pairs): an MLP on a second node table ``E_n``,
  ``Z_n = drop(relu(W_L ... drop(relu(W_1 E_n + b_1)) ... + b_L))``. Disliked edges are not homophilous,
  so they are not propagated over; they shape ``Z_n`` through the loss only (as the authors' code does);
* **attention**: per node, ``w_c = q^T drop(tanh(W z_c + b))`` for ``c in {p, n}``,
  ``(a_p, a_n) = softmax(w_p, w_n)`` and ``Z = a_p Z_p + a_n Z_n``. Scores are ``s(u, i) = <Z_u, Z_i>``.

**Sign-aware BPR loss** (the paper's, as its authors' code computes it): for each observed edge ``(u, i)``
with sign ``sigma_ui`` in ``{+1, -1}`` and ``N`` unobserved items ``j_1..j_N``::

    l_ui = -sum_k log sigmoid(sigma_ui * s(u, i) - s(u, j_k))
           + reg_weight * (||Z_u||^2 + ||Z_i||^2 + sum_k ||Z_jk||^2)
    loss = mean over the batch's signed rows of l_ui

A liked edge must outrank every sampled unobserved item (plain BPR). For a disliked edge the form is
``-log sigmoid(-s(u, i) - s(u, j))``: it pushes ``s(u, i)`` below ``-s(u, j)``, i.e. the disliked item's
score toward the negative side of the unobserved items' scores (where unobserved scores are positive it
lies below them and below zero). This is SiReN's choice, kept as is; it is *not* "disliked below
unobserved" (``s(u, j) - s(u, i)``, which :class:`~recframe.models.signed.LightGCNNeg` uses), and it also
pushes the unobserved item's score down along with the disliked one. The L2 penalty is on the final
embeddings ``Z`` (SiReN's), not on the ego tables.

Where we differ from the paper, and why:

* signs come from the project's labels (``train.label``: liked rating >= 4, disliked <= 2); rating 3 is
  neither, so those pairs are in neither graph and add no loss term (SiReN's offset 3.5 makes rating 3
  negative). One signed protocol for every model in a table;
* the first unobserved item of each row is the batch's uniform ``neg`` and the other ``n_negatives - 1``
  are drawn uniformly outside the user's training items too (SiReN draws ``N = 40`` with probability
  proportional to ``degree^0.75``); uniform negatives are what every pairwise model here trains with, so
  rows of one table differ by model, not by sampler;
* the loss is SiReN's divided by the number of signed rows (a mean rather than a sum; with Adam this only
  rescales the step's gradient, not the balance of its terms).

Defaults are the authors' ML-1M settings (dim 64, 4 LightGCN layers, 2 MLP layers, dropout 0.5, 40
negatives, ``reg`` 0.05, lr 5e-3).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import LGConv

from recframe.models.addons import EmbeddingAddon
from recframe.models.signed.base import SignedGraphModel
from recframe.models.signed.pairs import sample_unobserved


class SiReN(SignedGraphModel):
    """Sign-aware recommender: LightGCN on liked edges, MLP for disliked ones, attention (module docstring).

    Args:
        dim: embedding size (64, SiReN's).
        n_layers: LightGCN layers on the positive graph (4, SiReN's ML-1M setting).
        mlp_layers: layers of the negative-graph MLP (2, SiReN's).
        dropout: dropout after each MLP layer and on the attention's hidden layer (0.5, SiReN's).
        n_negatives: unobserved items per signed edge (40, SiReN's ``K``); the first is the batch's ``neg``.
        reg_weight: L2 weight on the final embeddings of each row's user, item and negatives (0.05, the
            authors' default ``reg``).
        lr, weight_decay, optimizer: optimiser (lr 5e-3, SiReN's, in the configs).
        addons: embedding add-ons (e.g. :class:`~recframe.models.signed.ValenceMargin`).
    """

    train_batch: ClassVar[str] = "pairwise"

    def __init__(self, n_items: int, n_users: int, dim: int = 64, n_layers: int = 4, mlp_layers: int = 2,
                 dropout: float = 0.5, n_negatives: int = 40, reg_weight: float = 0.05, lr: float = 5e-3,
                 weight_decay: float = 0.0, optimizer: Literal["adam", "adamw"] = "adam",
                 addons: list[EmbeddingAddon] | None = None) -> None:
        super().__init__(n_items, n_users, lr, weight_decay, optimizer)
        if mlp_layers < 1:
            raise ValueError(f"SiReN: model.init_args.mlp_layers={mlp_layers}; the negative graph's MLP "
                             "needs at least 1 layer.")
        if n_negatives < 1:
            raise ValueError(f"SiReN: model.init_args.n_negatives={n_negatives}; it must be >= 1 (the first "
                             "is the batch's uniform negative).")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"SiReN: model.init_args.dropout={dropout}; it must be in [0, 1).")
        self.save_hyperparameters(ignore=["addons"])
        self.attach_addons(addons)
        self.n_negatives, self.reg_weight, self.dropout = n_negatives, reg_weight, dropout
        # positive graph: LightGCN on its own node table
        self.emb_pos = nn.Embedding(self.n_nodes, dim)
        nn.init.xavier_normal_(self.emb_pos.weight)
        self.convs = nn.ModuleList(LGConv(normalize=False) for _ in range(n_layers))
        # negative graph: an MLP on a second node table
        self.emb_neg = nn.Embedding(self.n_nodes, dim)
        nn.init.xavier_normal_(self.emb_neg.weight)
        self.mlp = nn.ModuleList(nn.Linear(dim, dim) for _ in range(mlp_layers))
        for layer in self.mlp:
            nn.init.xavier_normal_(layer.weight)
        # attention over the two views
        self.attn = nn.Linear(dim, dim)
        self.attn_query = nn.Linear(dim, 1, bias=False)

    # ------------------------------------------------------------- forward
    def node_embeddings(self) -> Tensor:
        """``Z [n_nodes, d]``: the attention-weighted mix of the positive and negative views."""
        z_pos = self.light_propagate(self.emb_pos.weight, self.convs)
        z_neg = self.emb_neg.weight
        for layer in self.mlp:
            z_neg = F.dropout(F.relu(layer(z_neg)), p=self.dropout, training=self.training)
        logits = torch.cat([self._attention_logit(z_pos), self._attention_logit(z_neg)], dim=1)
        alpha = torch.softmax(logits, dim=1)
        return alpha[:, :1] * z_pos + alpha[:, 1:] * z_neg

    def _attention_logit(self, z: Tensor) -> Tensor:
        hidden = F.dropout(torch.tanh(self.attn(z)), p=self.dropout, training=self.training)
        return self.attn_query(hidden)

    def propagate(self) -> tuple[Tensor, Tensor]:
        z = self.node_embeddings()
        return z[: self.item_offset], z[self.item_offset:]

    # ---------------------------------------------------------------- loss
    def loss(self, batch: dict[str, Tensor]) -> Tensor:
        uid, pid, nid = batch["users"], batch["pos"], batch["neg"]
        sign = self.row_signs(uid, pid)
        keep = sign != 0
        uid, pid, nid, sign = uid[keep], pid[keep], nid[keep], sign[keep].to(torch.float32)
        negs = nid[:, None]
        if self.n_negatives > 1:
            # pair_key holds every training pair (any label): what "unobserved" excludes
            extra = sample_unobserved(uid, self.n_negatives - 1, self.n_items, self.pair_key)
            negs = torch.cat([negs, extra], dim=1)
        users, items = self.propagate()
        z_u = users[uid]
        # every item's score and squared norm once, then gathered: the same values as gathering the
        # negatives' embeddings [n, N, d], without that tensor and its scatter in the backward pass
        scores = z_u @ items.T
        s_pos, s_neg = scores.gather(1, pid[:, None])[:, 0], scores.gather(1, negs)
        nll = -F.logsigmoid(sign[:, None] * s_pos[:, None] - s_neg).sum(1)
        sq_norm = items.pow(2).sum(-1)
        reg = z_u.pow(2).sum(-1) + sq_norm[pid] + sq_norm[negs].sum(1)
        per_row = nll + self.reg_weight * reg
        return per_row.sum() / max(int(keep.sum()), 1)


__all__ = ["SiReN"]
