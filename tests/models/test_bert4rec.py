"""BERT4Rec: cloze masking, no target leak, a hand-computed loss, configs, learning planted sequences."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from recframe.models import BERT4Rec, Popularity
from tests.models.sequential_support import assert_config_validates, fit_and_test_on_planted

#: two training windows of a sequence batch (max_len 5): the first left-padded
BATCH = {"input": torch.tensor([[0, 0, 4, 9, 2], [7, 1, 3, 8, 5]]),
         "target": torch.tensor([[0, 0, 9, 2, 6], [1, 3, 8, 5, 10]])}


def test_training_window_is_the_inputs_plus_the_latest_target() -> None:
    seq = BERT4Rec.training_sequence(BATCH)
    assert seq.tolist() == [[0, 0, 4, 9, 2, 6], [7, 1, 3, 8, 5, 10]]


def test_masking_replaces_items_by_the_mask_token_and_labels_them() -> None:
    model = BERT4Rec(n_items=10, max_len=5, mask_prob=0.5)
    seq = BERT4Rec.training_sequence(BATCH)
    torch.manual_seed(3)
    for _ in range(20):
        masked, labels = model.mask_items(seq)
        chosen = labels > 0
        assert torch.equal(masked[chosen], torch.full_like(masked[chosen], model.mask_token))
        assert torch.equal(labels[chosen], seq[chosen])  # the label is the item the mask hides
        assert torch.equal(masked[~chosen], seq[~chosen])  # everything else is untouched
        assert not chosen[seq == 0].any() and chosen.any(dim=1).all()  # no padding; >= 1 per window
    full, _ = BERT4Rec(n_items=10, max_len=5, mask_prob=1.0).mask_items(seq)
    assert torch.equal(full == model.mask_token, seq > 0)
    last, last_labels = BERT4Rec(n_items=10, max_len=5, last_mask_rate=1.0).mask_items(seq)
    assert last_labels[:, :-1].eq(0).all() and torch.equal(last_labels[:, -1], seq[:, -1])
    with pytest.raises(ValueError, match="mask_prob"):
        BERT4Rec(n_items=10, mask_prob=0.0)


def test_the_mask_never_leaks_the_target() -> None:
    torch.manual_seed(0)
    model = BERT4Rec(n_items=12, max_len=5, hidden=8, n_layers=2, n_heads=2, inner=16).eval()
    seq = BERT4Rec.training_sequence(BATCH)
    torch.manual_seed(1)
    masked, labels = model.mask_items(seq)
    other = seq.clone()
    chosen = labels > 0
    other[chosen] = 11  # a different item (in neither window) under every mask
    torch.manual_seed(1)
    masked_other, labels_other = model.mask_items(other)
    assert torch.equal(masked, masked_other) and torch.equal(labels_other[chosen], other[chosen])
    with torch.no_grad():  # the model's view, hence every prediction, is blind to what the masks hide
        assert torch.equal(model.encode(masked), model.encode(masked_other))
        # and it is bidirectional: the first item's state reads a later one (SASRec's would not)
        changed = masked.clone()
        changed[1, -1] = 12 if changed[1, -1] != 12 else 11
        assert not torch.allclose(model.encode(masked)[1, 0], model.encode(changed)[1, 0])


def test_recommendation_reads_the_history_plus_an_appended_mask() -> None:
    torch.manual_seed(0)
    model = BERT4Rec(n_items=12, max_len=5, hidden=8, n_layers=1, n_heads=2, inner=16).eval()
    history = torch.tensor([[0, 0, 4, 9, 2], [7, 1, 3, 8, 5]])
    with torch.no_grad():
        scores = model.score({"history": history})
        assert scores.shape == (2, 13)
        seq = torch.cat([history, torch.full((2, 1), model.mask_token)], dim=1)
        t = model.head(model.encode(seq)[:, -1])
        by_hand = t @ model.item_emb.weight[:13].T + model.out_bias  # no score for the [MASK] row
        assert torch.allclose(scores, by_hand, atol=1e-5)
        # padding does not change a recommendation; a history longer than max_len is cut to its latest items
        assert torch.allclose(model.score({"history": torch.tensor([[4, 9, 2]])}), scores[:1], atol=1e-5)
        longer = model.score({"history": torch.tensor([[11, 6, 7, 1, 3, 8, 5]])})
        assert torch.allclose(longer, scores[1:], atol=1e-5)


def test_loss_equals_cross_entropy_at_the_masked_positions_by_hand() -> None:
    """No transformer blocks: each state is LayerNorm(embedding + position), so the loss has a closed form."""
    torch.manual_seed(0)
    n_items, max_len = 10, 5
    model = BERT4Rec(n_items=n_items, max_len=max_len, hidden=6, n_layers=0, n_heads=2, dropout=0.0,
                     mask_prob=0.5).eval()
    with torch.no_grad():
        model.out_bias.normal_()  # a non-zero output bias, so the hand formula checks it too
        torch.manual_seed(7)
        loss = model.loss(BATCH)
        torch.manual_seed(7)  # the same draw of masks
        masked, labels = model.mask_items(BERT4Rec.training_sequence(BATCH))
        emb, pos = model.item_emb.weight, model.pos_emb.weight
        norm, (dense, _, head_norm) = model.final_norm, model.head
        terms = []
        for b in range(masked.shape[0]):
            for i in range(masked.shape[1]):
                if labels[b, i] == 0:
                    continue
                assert masked[b, i] == model.mask_token
                h = F.layer_norm(emb[model.mask_token] + pos[i], (6,), norm.weight, norm.bias)
                t = F.gelu(dense.weight @ h + dense.bias)
                t = F.layer_norm(t, (6,), head_norm.weight, head_norm.bias)
                logits = emb[1:n_items + 1] @ t + model.out_bias[1:]  # catalogue items only
                terms.append(torch.logsumexp(logits, 0) - logits[labels[b, i] - 1])
        assert len(terms) == model.loss_terms(BATCH) > 0
        assert torch.allclose(loss, torch.stack(terms).mean(), atol=1e-5)


def test_sampled_softmax_trains() -> None:
    torch.manual_seed(0)
    model = BERT4Rec(n_items=10, max_len=5, hidden=8, n_layers=1, n_heads=2, inner=16, loss_type="sampled",
                     n_negatives=8)
    loss = model.loss(BATCH)
    loss.backward()
    assert torch.isfinite(loss) and model.out_bias.grad is not None


@pytest.mark.parametrize("config", ["smoke/bert4rec.yaml", "bert4rec_ml100k.yaml"])
def test_configs_validate_against_the_schema(config: str, capsys) -> None:
    assert_config_validates(config, "BERT4Rec", capsys)



def test_bert4rec_learns_the_planted_sequences() -> None:
    popularity = fit_and_test_on_planted(Popularity, 1)
    res = fit_and_test_on_planted(BERT4Rec, 100, max_len=25, hidden=32, n_layers=1, n_heads=2, inner=64,
                                  lr=5e-3)
    assert res["test/ndcg@10"] > 2 * popularity["test/ndcg@10"]
