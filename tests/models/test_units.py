"""Known-answer checks of model pieces: masks, propagation, losses, popularity."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from recframe.data.interactions import Interactions
from recframe.models import BPRMF, LightGCN, Popularity, SASRec
from recframe.models.layers import sequence_attention_mask
from recframe.models.losses import bpr_loss, embedding_l2


def test_attention_mask_is_causal_hides_padding_and_keeps_diagonal() -> None:
    items = torch.tensor([[0, 0, 3, 4]])
    m = sequence_attention_mask(items)[0, 0]
    expected = torch.tensor([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]], dtype=torch.bool)
    assert torch.equal(m, expected)


def test_sasrec_is_causal_and_ignores_left_padding() -> None:
    torch.manual_seed(0)
    model = SASRec(n_items=20, max_len=6, hidden=16, n_layers=2, n_heads=2, inner=32).eval()
    seq = torch.tensor([[0, 0, 5, 7, 9, 11]])
    h = model.encode(seq)
    changed = seq.clone()
    changed[0, -1] = 13  # only the future of position 4 changes
    h2 = model.encode(changed)
    assert torch.allclose(h[0, :5], h2[0, :5], atol=1e-6)
    assert not torch.allclose(h[0, 5], h2[0, 5])
    # the prediction from the last position does not depend on how much padding precedes it
    # (positions are absolute from the right end, so shift-invariance holds for left padding)
    short = model.encode(torch.tensor([[0, 0, 0, 7, 9, 11]]))
    other = model.encode(torch.tensor([[0, 0, 4, 7, 9, 11]]))
    assert not torch.allclose(short[0, -1], other[0, -1])  # history content matters
    q = model.query_embedding({"history": seq})
    assert torch.allclose(q, h[:, -1])


def test_sasrec_sampled_softmax_masks_accidental_hits() -> None:
    torch.manual_seed(0)
    model = SASRec(n_items=3, max_len=4, hidden=8, n_layers=1, n_heads=1, inner=8, loss_type="sampled",
                   n_negatives=64)
    batch = {"input": torch.tensor([[0, 1, 2, 3]]), "target": torch.tensor([[0, 2, 3, 1]])}
    loss = model.loss(batch)
    assert torch.isfinite(loss)


def test_bpr_loss_and_l2_by_hand() -> None:
    pos, neg = torch.tensor([2.0, 0.0]), torch.tensor([0.0, 1.0])
    expected = -(math.log(1 / (1 + math.exp(-2))) + math.log(1 / (1 + math.exp(1)))) / 2
    assert abs(bpr_loss(pos, neg).item() - expected) < 1e-6
    e = torch.ones(2, 3)
    assert embedding_l2(e, 2 * e).item() == (6 + 24) / 4


def _toy() -> Interactions:
    return Interactions.from_raw(["a", "a", "b", "c", "c", "c"], ["x", "y", "x", "x", "y", "z"],
                                 np.arange(6))


def test_lightgcn_propagation_matches_dense_normalised_adjacency() -> None:
    inter = _toy()
    torch.manual_seed(0)
    model = LightGCN(n_items=inter.n_items, n_users=inter.n_users, dim=4, n_layers=2)
    model.bind_data(inter)
    n_nodes = model.emb.num_embeddings
    A = torch.zeros(n_nodes, n_nodes)
    for u, i in zip(inter.user, inter.item):
        A[u, inter.n_users + 1 + i] = A[inter.n_users + 1 + i, u] = 1
    deg = A.sum(1)
    dinv = torch.where(deg > 0, deg.pow(-0.5), torch.zeros_like(deg))
    norm = dinv[:, None] * A * dinv[None, :]
    x0 = model.emb.weight.detach()
    x1 = norm @ x0
    x2 = norm @ x1
    mean = (x0 + x1 + x2) / 3
    users, items = model.propagate()
    assert torch.allclose(users.detach(), mean[: inter.n_users + 1], atol=1e-6)
    assert torch.allclose(items.detach(), mean[inter.n_users + 1:], atol=1e-6)


def test_popularity_scores_are_training_counts() -> None:
    inter = _toy()
    model = Popularity(n_items=inter.n_items)
    model.bind_data(inter)
    s = model.score({"users": torch.tensor([1, 2])})
    assert s.shape == (2, inter.n_items + 1)
    assert s[0].tolist() == [0.0, 3.0, 2.0, 1.0]


def test_bprmf_scores_are_inner_products() -> None:
    model = BPRMF(n_items=5, n_users=3, dim=4)
    batch = {"users": torch.tensor([1, 3])}
    expected = model.user_emb.weight[[1, 3]] @ model.item_emb.weight.T
    assert torch.allclose(model.score(batch), expected)


def test_a_model_missing_its_scoring_method_cannot_be_built() -> None:
    from recframe.models.base import RecModel

    class Incomplete(RecModel):
        def loss(self, batch):
            return None

    with pytest.raises(TypeError, match="abstract method.*score"):
        Incomplete(n_items=3)
