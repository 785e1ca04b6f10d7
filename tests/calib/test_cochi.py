"""CoCHI (calib_ext.cochi): patterns on a hand example, the head hook through the probe, the planted case,
and the model kinds (SASRec, TIGER, Hugging Face BERT)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor, nn

from calib_ext.cochi import CoCHI, RecTask, TensorTask, classify, collect, confidence_threshold, masked_nll
from calib_ext.cochi.attribution import all_heads
from calib_ext.cochi.patterns import counts, predictions
from calib_ext.metrics import calibration_summary
from recframe.heads import head_projections, read_heads
from recframe.models.layers import CausalSelfAttention


# ---------------------------------------------------------------------------------------------- patterns
def test_patterns_on_a_hand_example() -> None:
    # softmax of [log a, log b, log c] is [a, b, c]/(a+b+c): confidences 0.7, 0.5, 0.6, 0.4
    probs = torch.tensor([[0.7, 0.2, 0.1], [0.5, 0.3, 0.2], [0.2, 0.6, 0.2], [0.4, 0.35, 0.25]])
    logits = probs.log()
    labels = torch.tensor([0, 0, 0, 1])  # correct, correct, wrong (predicts 1), wrong (predicts 0)
    yhat, conf = predictions(logits)
    assert yhat.tolist() == [0, 0, 1, 0]
    torch.testing.assert_close(conf, torch.tensor([0.7, 0.5, 0.6, 0.4], dtype=torch.float64))
    t = confidence_threshold(conf, yhat == labels, "median")
    assert t == pytest.approx(0.55)  # the median of 0.4, 0.5, 0.6, 0.7
    assert confidence_threshold(conf, yhat == labels, "accuracy") == 0.5
    codes = classify(logits, labels, t)
    assert codes.tolist() == [0, 1, 2, 3]  # CC, CU, WC, WU
    assert counts(codes) == {"CC": 1, "CU": 1, "WC": 1, "WU": 1}
    # a confidence equal to the threshold is unconfident; -inf logits are masked classes
    assert classify(logits, labels, float(conf[1])).tolist() == [0, 1, 2, 3]
    masked = torch.tensor([[0.0, float("-inf"), math.log(3.0)]])
    assert classify(masked, torch.tensor([2]), 0.7).tolist() == [0]  # p = [0.25, 0, 0.75]
    with pytest.raises(ValueError, match="threshold must be"):
        confidence_threshold(conf, yhat == labels, 1.5)


# ------------------------------------------------------------------------------------- the planted model
C = 4  # classes; the model has three heads of width C over one token [signal | trap | zero]


class Planted(nn.Module):
    """One attention site over a single token, logits = the first C outputs of its projection.

    With one token every head's output is its value projection, so the heads are planted by their weights
    (set through the probe's write-through projection views): head 0 reads the signal block (gain 1.5),
    head 1 the trap block (gain 4), head 2 the signal block again (gain 1). The output projection sums the
    three heads into the logits. The trap always points at a wrong class, so head 1 drives confident errors
    and matters nothing to the correct predictions; heads 0 and 2 carry the signal.
    """

    def __init__(self) -> None:
        super().__init__()
        self.attn = CausalSelfAttention(3 * C, 3, 0.0)
        proj = head_projections(self, "attn")
        with torch.no_grad():
            for p in (proj.query, proj.key, proj.value, proj.output, *proj.biases()):
                p.zero_()
            eye = torch.eye(C)
            for h, (block, gain) in enumerate([(0, 1.5), (1, 4.0), (0, 1.0)]):
                proj.value[h][:, block * C:(block + 1) * C] = gain * eye
                proj.output[h][:C] = eye

    def forward(self, x: Tensor) -> Tensor:
        out = self.attn(x[:, None, :], torch.ones(1, 1, dtype=torch.bool))
        return out[:, 0, :C]


def planted_data(n: int, seed: int, trap_rate: float = 0.35) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, C, (n,), generator=g)
    x = torch.zeros(n, 3 * C)
    x[:, :C] = nn.functional.one_hot(y, C) + 0.9 * torch.randn(n, C, generator=g)
    trapped = torch.rand(n, generator=g) < trap_rate
    wrong = (y + torch.randint(1, C, (n,), generator=g)) % C
    x[trapped, C + wrong[trapped]] = 1.0
    return x, y


def test_the_planted_trap_head_is_found_and_scaling_it_lowers_nll() -> None:
    torch.manual_seed(0)
    model = Planted().eval()
    val, test = (TensorTask(*planted_data(3000, s)) for s in (1, 2))
    cochi = CoCHI(progress=False).fit(model, val)
    assert cochi.heads_ == [("attn", 0), ("attn", 1), ("attn", 2)]
    # the trap head raises the overconfident errors' confidence and not the correct-confident ones'
    wc, cc = cochi.log_effects_["WC"], cochi.log_effects_["CC"]
    assert wc[1] > 0.5 and abs(cc[1]) < 0.1 * wc[1], (wc, cc)
    assert cochi.ranking_[0] == ("attn", 1) and ("attn", 0) not in cochi.ranking_
    assert cochi.selected_heads_ == [("attn", 1)]
    assert cochi.scales_[("attn", 1)] < 0.15  # the trap carries no information: the best scale is ~0
    assert cochi.nll_after_ < cochi.nll_before_ - 0.2
    before = calibration_summary(*collect(model, test))
    after = calibration_summary(*cochi.collect(model, test))
    assert after["nll"] < before["nll"] - 0.2 and after["ece"] < before["ece"]
    assert after["accuracy"] >= before["accuracy"]
    # the model itself is unchanged, and baking the scales in gives what the probe intervention gives
    torch.testing.assert_close(collect(model, test)[0], collect(Planted().eval(), test)[0])
    baked = cochi.apply_to(Planted().eval())
    torch.testing.assert_close(collect(baked, test)[0], cochi.collect(model, test)[0])
    assert cochi.report()["selected_heads"] == ["attn#1"]


def test_the_intervention_changes_exactly_the_selected_head() -> None:
    model = Planted().eval()
    cochi = CoCHI(progress=False)
    cochi.scales_ = {("attn", 1): 0.25}  # a fitted state, set by hand
    x, _ = planted_data(50, 3)
    with torch.no_grad(), read_heads(model) as clean:
        y = model(x)
    with torch.no_grad(), cochi.intervene(model), read_heads(model) as cap:
        y2 = model(x)
    assert not torch.equal(y, y2)
    for h in range(3):
        if h == 1:
            torch.testing.assert_close(cap["attn", h], 0.25 * clean["attn", h])
        else:
            assert torch.equal(cap["attn", h], clean["attn", h])
    assert model.attn.head_hook is None  # nothing left behind


def test_no_wrong_confident_signal_selects_nothing() -> None:
    model = Planted().eval()
    val = TensorTask(*planted_data(1000, 4, trap_rate=0.0))  # no trap: head 1 does nothing
    cochi = CoCHI(progress=False).fit(model, val)
    assert ("attn", 1) not in cochi.ranking_
    assert cochi.nll_after_ <= cochi.nll_before_


def test_per_head_scales_and_bad_settings() -> None:
    model = Planted().eval()
    val = TensorTask(*planted_data(1500, 5))
    cochi = CoCHI(scales="per_head", sizes=[1, 2], progress=False).fit(model, val)
    assert cochi.nll_after_ <= min(f for _, f in cochi.candidates_.values()) + 1e-12
    assert cochi.nll_after_ < cochi.nll_before_
    for bad, match in [({"scales": "each"}, "scales must be"), ({"scale_bounds": (0.5, 0.9)}, "scale_bounds"),
                       ({"max_heads": 0}, "max_heads"), ({"threshold": "mean"}, "threshold must be")]:
        with pytest.raises(ValueError, match=match):
            CoCHI(**bad)
    with pytest.raises(RuntimeError, match="not fitted"):
        CoCHI().intervene(model).__enter__()
    with pytest.raises(TypeError, match="LogitTask"):
        CoCHI(progress=False).fit(model, [1, 2, 3])


def test_masked_nll_equals_the_nll_of_the_unmasked_classes() -> None:
    z = torch.tensor([[1.0, float("-inf"), 0.5], [0.2, 0.1, float("-inf")]], dtype=torch.float64)
    y = torch.tensor([2, 0])
    # by hand: -log(e^0.5 / (e^1 + e^0.5)) and -log(e^0.2 / (e^0.2 + e^0.1)), averaged
    ref = (math.log1p(math.exp(0.5)) + math.log1p(math.exp(-0.1))) / 2
    assert masked_nll(z, y) == pytest.approx(ref, abs=1e-12)


# --------------------------------------------------------------------------------------- model kinds
def test_cochi_on_sasrec_next_item_prediction() -> None:
    from recframe.models.sasrec import SASRec

    torch.manual_seed(0)
    model = SASRec(n_items=30, hidden=16, n_heads=2, n_layers=2, max_len=8, dropout=0.0).eval()
    g = torch.Generator().manual_seed(0)
    hist = torch.randint(1, 31, (64, 8), generator=g)
    batch = {"users": torch.arange(1, 65), "history": hist, "seen": hist,
             "targets": torch.randint(1, 31, (64, 1), generator=g)}
    batch["seen"] = torch.where(hist == batch["targets"], 0, hist)  # the target is never a seen item
    task = RecTask([batch])
    logits, labels = collect(model, task)
    assert logits.shape == (64, 31) and torch.isinf(logits[:, 0]).all()
    assert torch.isinf(logits.gather(1, batch["seen"].clamp(min=0))[batch["seen"] > 0]).all()
    cochi = CoCHI(progress=False).fit(model, task)
    assert cochi.heads_ == all_heads(model) == [(f"blocks.{i}.attn", h) for i in range(2) for h in range(2)]
    assert all(len(v) == 4 for v in cochi.log_effects_.values())
    assert cochi.nll_after_ <= cochi.nll_before_


def test_cochi_on_a_generative_backbone() -> None:
    from recframe.models.generative import TIGER
    from tests.generative.fixtures.make_legacy import KW, SIZES, batches, codes

    torch.manual_seed(0)
    model = TIGER(n_items=40, **{**KW, "dropout": 0.0})
    model._build(codes(), SIZES)
    model.eval()
    history = batches()[1]["history"]
    batch = {"history": history, "targets": torch.tensor([[20], [30], [1]])}
    task = RecTask([batch], mask_seen=False)
    logits, _ = collect(model, task)
    torch.testing.assert_close(logits[:, 1:].float(), model.score(batch)[:, 1:].detach())
    cochi = CoCHI(progress=False, max_heads=2).fit(model, task)
    sites = {s for s, _ in cochi.heads_}
    assert {"backbone.encoder.0.attn", "backbone.decoder.0.attn", "backbone.decoder.0.cross"} <= sites
    assert cochi.nll_after_ <= cochi.nll_before_


def test_cochi_on_a_hugging_face_classifier() -> None:
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=32, max_position_embeddings=16, num_labels=3,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForSequenceClassification(config).eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 40, (48, 6), generator=g)
    labels = (ids[:, 1] % 3)  # a rule of one token; the random model mostly misses it
    task = TensorTask({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, labels, batch_size=16)
    logits, y = collect(model, task)
    assert logits.shape == (48, 3) and torch.equal(y, labels)
    cochi = CoCHI(progress=False, max_heads=2).fit(model, task)
    assert len(cochi.heads_) == 8 and cochi.heads_[0] == ("bert.encoder.layer.0.attention", 0)
    assert cochi.nll_after_ <= cochi.nll_before_
    assert all(not m._forward_hooks for m in model.modules())


# ------------------------------------------------------------------------------- multiple choice, callback
def test_genre_questions_have_one_right_option_each() -> None:
    from calib_ext.cochi.multiple_choice import genre_questions, split_questions

    genres = ["Action", "Comedy", "Drama", "Horror", "Sci-Fi", "War"]
    titles = ["", "A", "B", "", "D", "E", "F"]
    cats = [[], ["Comedy"], ["Drama", "War"], ["Action"], ["unknown"], genres[:3], ["Horror", "Sci-Fi"]]
    qs = genre_questions(titles, cats, n_options=4, seed=3)
    assert [q.item for q in qs] == [1, 2, 5, 6]  # item 3 has no title, item 4 only 'unknown'
    for q in qs:
        assert len(set(q.options)) == 4 and q.options[q.label] in cats[q.item]
        assert sum(o in cats[q.item] for o in q.options) == 1
    assert qs == genre_questions(titles, cats, n_options=4, seed=3)  # reproducible
    val, test = split_questions(qs, 0.5, seed=0)
    assert sorted(q.item for q in val + test) == [1, 2, 5, 6] and not set(val) & set(test)


def test_multiple_choice_logits_are_scaled_cosines() -> None:
    from calib_ext.cochi.multiple_choice import MultipleChoiceTask, Question

    class Fake(nn.Module):  # "encodes" a text as a fixed vector, with SentenceTransformer's interface
        table = {"a x movie": [1.0, 0.0], "a y movie": [0.0, 2.0], "q1": [3.0, 4.0], "q2": [1.0, 1.0]}

        def tokenize(self, texts: list[str]) -> dict[str, Tensor]:
            return {"vectors": torch.tensor([self.table[t] for t in texts])}

        def forward(self, features: dict[str, Tensor]) -> dict[str, Tensor]:
            return {"sentence_embedding": features["vectors"]}

    qs = [Question(1, "q1", ("x", "y"), 1), Question(2, "q2", ("y", "x"), 0)]
    logits, labels = collect(Fake(), MultipleChoiceTask(qs, scale=10.0))
    expected = 10.0 * torch.tensor([[0.6, 0.8], [2 ** -0.5, 2 ** -0.5]], dtype=torch.float64)
    torch.testing.assert_close(logits, expected)
    assert labels.tolist() == [1, 0]


def test_the_callback_reports_after_fit_and_leaves_the_model_unchanged(tmp_path) -> None:
    import json

    import lightning as L

    from calib_ext.cochi import CoCHICallback
    from recframe.data.datamodule import RecDataModule
    from recframe.models.sasrec import SASRec

    L.seed_everything(0)
    dm = RecDataModule(dataset="synthetic", synthetic={"n_users": 120, "n_items": 40, "mean_length": 12,
                                                       "seed": 1}, split="loo", max_len=8, batch_size=64)
    model = SASRec(n_items=dm.n_items, n_users=dm.n_users, max_len=8, hidden=16, n_heads=2, n_layers=1,
                   inner=32)
    out = tmp_path / "cochi.json"
    cb = CoCHICallback(output=str(out))
    trainer = L.Trainer(max_epochs=1, logger=False, callbacks=[cb], enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        limit_val_batches=0)
    trainer.fit(model, dm)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    report = json.loads(out.read_text())
    assert report == cb.report_ and report["weights"] == "last"
    assert report["cochi"]["heads"] == ["blocks.0.attn#0", "blocks.0.attn#1"]
    assert set(report["test_before"]) >= {"ece", "nll", "brier", "accuracy"}
    assert report["cochi"]["nll_after"] <= report["cochi"]["nll_before"]
    assert sum(report["cochi"]["pattern_counts"].values()) == len(dm.eval_view("valid"))
    assert all(torch.equal(v, weights[k]) for k, v in model.state_dict().items())
    assert all(b.attn.head_hook is None for b in model.blocks)


def test_gradient_attribution_is_the_first_order_ablation_effect() -> None:
    # Planted logits are linear in each head's gate g, z = z_rest + g z_h, so the slope at g = 1 is exactly
    # d/dg log p = z_h[yhat] - E_p[z_h]; checked against finite differences of scale_heads
    from calib_ext.cochi.attribution import head_effects, head_gradient_effects, predicted_log_prob
    from recframe.heads import scale_heads

    model = Planted().eval()
    task = TensorTask(*planted_data(400, 6), batch_size=128)
    logits, labels = collect(model, task)
    yhat, conf = predictions(logits)
    codes = classify(logits, labels, confidence_threshold(conf, yhat == labels))
    heads = all_heads(model)
    grad = head_gradient_effects(model, task, heads, yhat, codes, progress=False)
    eps = 1e-4
    for j, head in enumerate(heads):
        with scale_heads(model, {head: 1 - eps}):
            lo = predicted_log_prob(collect(model, task)[0], yhat)
        with scale_heads(model, {head: 1 + eps}):
            hi = predicted_log_prob(collect(model, task)[0], yhat)
        slope = (hi - lo) / (2 * eps)
        for code, p in enumerate(["CC", "CU", "WC", "WU"]):
            sel = codes == code
            assert grad["log_effect"][p][j] == pytest.approx(float(slope[sel].mean()), rel=1e-3, abs=1e-4)
    # and it ranks the planted trap head first among the overconfident errors, as exact ablation does
    exact = head_effects(model, task, heads, yhat, codes, progress=False)
    assert int(grad["log_effect"]["WC"].argmax()) == int(exact["log_effect"]["WC"].argmax()) == 1
    cochi = CoCHI(attribution="gradient", progress=False).fit(model, task)
    assert cochi.selected_heads_ == [("attn", 1)]
