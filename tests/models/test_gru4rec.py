"""GRU4Rec: a hand-computed loss, padding invariance, its configs, and learning planted sequences."""

from __future__ import annotations

import pytest
import torch

from recframe.models import GRU4Rec, Popularity
from tests.models.sequential_support import assert_config_validates, fit_and_test_on_planted


def _gru_by_hand(model: GRU4Rec, items: list[int]) -> torch.Tensor:
    """The GRU equations (Cho et al. 2014, PyTorch's gate layout) over one unpadded sequence, then the
    projection: ``[len(items), dim]``."""
    gru = model.gru
    w_ih, w_hh, b_ih, b_hh = gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0
    h = torch.zeros(gru.hidden_size)
    out = []
    for item in items:
        x = model.item_emb.weight[item]
        gi, gh = w_ih @ x + b_ih, w_hh @ h + b_hh
        i_r, i_z, i_n = gi.chunk(3)
        h_r, h_z, h_n = gh.chunk(3)
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        h = (1 - z) * n + z * h
        out.append(model.proj.weight @ h + model.proj.bias)
    return torch.stack(out)


def test_loss_equals_cross_entropy_computed_by_hand() -> None:
    torch.manual_seed(0)
    model = GRU4Rec(n_items=6, max_len=4, dim=3, hidden=4, dropout=0.0).eval()
    rows = [[2, 3, 5], [1, 4, 2, 6]]  # the first row is left-padded in the batch
    batch = {"input": torch.tensor([[0, 2, 3, 5], [1, 4, 2, 6]]),
             "target": torch.tensor([[0, 3, 5, 1], [4, 2, 6, 3]])}
    targets = [[3, 5, 1], [4, 2, 6, 3]]
    with torch.no_grad():
        terms = []
        for items, tgt in zip(rows, targets):
            q = _gru_by_hand(model, items)
            for t in range(len(items)):
                logits = model.item_emb.weight[1:] @ q[t]  # the catalogue without the padding column
                terms.append(torch.logsumexp(logits, 0) - logits[tgt[t] - 1])
        expected = torch.stack(terms).mean()
        assert torch.allclose(model.loss(batch), expected, atol=1e-5)
    assert model.loss_terms(batch) == 7
    h = model.encode(batch["input"])
    assert h.shape == (2, 4, 3) and torch.equal(h[0, 0], torch.zeros(3))  # nothing at padding


def test_padding_never_enters_the_recurrence() -> None:
    torch.manual_seed(0)
    model = GRU4Rec(n_items=9, max_len=6, dim=4, hidden=5, n_layers=2).eval()
    with torch.no_grad():
        alone = model.score({"history": torch.tensor([[3, 7, 2]])})
        padded = model.score({"history": torch.tensor([[0, 0, 0, 3, 7, 2], [1, 2, 3, 4, 5, 6]])})
        assert torch.allclose(alone[0], padded[0], atol=1e-6)
        assert padded.shape == (2, 10)
        q, items = model.query_and_item_embeddings({"history": torch.tensor([[3, 7, 2]])})
        assert torch.allclose(q @ items.T, alone, atol=1e-6)
        # history longer than max_len: only the latest max_len items are read
        long = model.score({"history": torch.tensor([[9, 8, 1, 2, 3, 4, 5, 6]])})
        assert torch.allclose(long, padded[1:], atol=1e-6)


def test_sampled_softmax_trains_and_bad_loss_type_is_refused() -> None:
    torch.manual_seed(0)
    model = GRU4Rec(n_items=5, max_len=3, dim=4, hidden=4, loss_type="sampled", n_negatives=16)
    loss = model.loss({"input": torch.tensor([[0, 1, 2]]), "target": torch.tensor([[0, 2, 3]])})
    loss.backward()
    assert torch.isfinite(loss) and model.gru.weight_ih_l0.grad is not None
    with pytest.raises(ValueError, match="loss_type"):
        GRU4Rec(n_items=5, loss_type="bpr")  # type: ignore[arg-type]


@pytest.mark.parametrize("config", ["smoke/gru4rec.yaml", "gru4rec_ml100k.yaml"])
def test_configs_validate_against_the_schema(config: str, capsys) -> None:
    assert_config_validates(config, "GRU4Rec", capsys)



def test_gru4rec_learns_the_planted_sequences() -> None:
    popularity = fit_and_test_on_planted(Popularity, 1)
    res = fit_and_test_on_planted(GRU4Rec, 25, max_len=25, dim=32, hidden=64, lr=5e-3)
    assert res["test/ndcg@10"] > 2 * popularity["test/ndcg@10"]
