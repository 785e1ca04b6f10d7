"""The head probe (recframe.heads) on its three site kinds: SASRec, the generative row attention, HF BERT."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from torch import Tensor, nn

from recframe.heads import (
    attention_sites,
    head_projections,
    head_value_output_maps,
    patch_heads,
    read_heads,
    scale_heads,
)
from recframe.models.generative.attention import RowBlock
from recframe.models.sasrec import SASRec


class RowStack(nn.Module):
    """TIGER's attention roles on the shared generative layers, then a decoder-only block.

    Encoder self-attention over ``K`` history tokens, a decoder block (causal self-attention over ``N``
    prefix rows of ``q`` tokens, cross-attention to the encoder memory), and a decoder-only block whose
    self-attention also sees a cached context (the memory).
    """

    def __init__(self, dim: int = 16, n_heads: int = 4) -> None:
        super().__init__()
        self.enc = RowBlock(dim, n_heads, 2 * dim, 0.0)
        self.dec = RowBlock(dim, n_heads, 2 * dim, 0.0, cross=True)
        self.donly = RowBlock(dim, n_heads, 2 * dim, 0.0, self_sees_context=True)

    def forward(self, history: Tensor, rows: Tensor) -> Tensor:
        K, q = history.shape[2], rows.shape[2]
        memory = self.enc(history, self_mask=torch.ones(K, K, dtype=torch.bool).tril())[:, 0]
        causal = torch.ones(q, q, dtype=torch.bool).tril()
        x = self.dec(rows, self_mask=causal, memory_kv=self.dec.cross.context_kv(memory))
        return self.donly(x, self_mask=causal, past_kv=self.donly.attn.context_kv(memory))


@dataclass
class Case:
    kind: str
    model: nn.Module
    run: Callable[[], Tensor]
    other: Callable[[], Tensor]  # the same model on a different input
    sites: list[str]


def sasrec_case() -> Case:
    torch.manual_seed(0)
    model = SASRec(n_items=30, hidden=16, n_heads=4, n_layers=3, n_kv_heads=2, max_len=8).eval()
    a = torch.tensor([[0, 0, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6]])
    b = torch.tensor([[0, 7, 8, 9, 1, 2], [9, 8, 7, 6, 5, 4]])
    return Case("sasrec", model, lambda: model.encode(a), lambda: model.encode(b),
                ["blocks.0.attn", "blocks.1.attn", "blocks.2.attn"])


def row_case() -> Case:
    torch.manual_seed(1)
    model = RowStack().eval()
    hist, rows = torch.randn(2, 1, 5, 16), torch.randn(2, 3, 2, 16)
    hist2, rows2 = torch.randn(2, 1, 5, 16), torch.randn(2, 3, 2, 16)
    return Case("row", model, lambda: model(hist, rows), lambda: model(hist2, rows2),
                ["enc.attn", "dec.attn", "dec.cross", "donly.attn"])


def bert_case() -> Case:
    from transformers import BertConfig, BertModel

    torch.manual_seed(2)
    config = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=32, max_position_embeddings=16, hidden_dropout_prob=0.0,
                        attention_probs_dropout_prob=0.0)
    model = BertModel(config, add_pooling_layer=False).eval()
    ids = torch.tensor([[2, 5, 7, 9, 3, 0], [2, 11, 12, 13, 14, 3]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    ids2 = torch.tensor([[2, 15, 16, 3, 0, 0], [2, 17, 18, 19, 20, 3]])
    mask2 = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    return Case("hf-bert", model, lambda: model(input_ids=ids, attention_mask=mask).last_hidden_state,
                lambda: model(input_ids=ids2, attention_mask=mask2).last_hidden_state,
                [f"encoder.layer.{i}.attention" for i in range(3)])


def generative_case(name: str) -> Case:
    """The shipped generative backbones: next-code logits of 3 prefixes for 2 users (context, then step)."""
    from recframe.models.generative.decoder import DecoderBackbone
    from recframe.models.generative.tiger import TigerBackbone

    torch.manual_seed(3)
    codes = np.array([[0, 0], *[(a, b) for a in range(4) for b in range(3)]])  # 12 items on a 4 x 3 trie
    cls = TigerBackbone if name == "tiger" else DecoderBackbone
    model = cls(codes, (4, 3), dim=16, n_layers=2, n_heads=4, inner=32, dropout=0.0, window=4).eval()
    prefixes = torch.tensor([[[0], [2], [3]]] * 2)
    history, history2 = torch.tensor([[0, 3, 5, 7], [1, 2, 3, 4]]), torch.tensor([[0, 0, 9, 2], [8, 6, 4, 2]])
    sites = ([f"encoder.{i}.attn" for i in range(2)]
             + [f"decoder.{i}.{part}" for i in range(2) for part in ("attn", "cross")]
             if name == "tiger" else [f"blocks.{i}.attn" for i in range(2)])
    return Case("row", model, lambda: model.step(model.context(history), prefixes),
                lambda: model.step(model.context(history2), prefixes), sites)


CASES = {"sasrec": sasrec_case, "row": row_case, "hf-bert": bert_case,
         "tiger": lambda: generative_case("tiger"), "sid-decoder": lambda: generative_case("sid-decoder")}
kinds = pytest.mark.parametrize("kind", list(CASES))
base_kinds = pytest.mark.parametrize("kind", ["sasrec", "row", "hf-bert"])


def no_hooks_left(model: nn.Module) -> bool:
    """No probe hook anywhere: recframe layers' ``head_hook`` unset, no torch forward (pre-)hooks."""
    return all(getattr(m, "head_hook", None) is None and not m._forward_hooks and not m._forward_pre_hooks
               for m in model.modules())


@kinds
def test_sites_are_listed_with_names_heads_and_head_dim(kind: str) -> None:
    case = CASES[kind]()
    sites = attention_sites(case.model)
    assert [s.name for s in sites] == case.sites
    assert {s.kind for s in sites} == {case.kind}
    assert all(s.n_heads == 4 and s.head_dim == 4 for s in sites)
    assert all(dict(case.model.named_modules())[s.name] is s.module for s in sites)
    assert [s.n_kv_heads for s in sites] == [2 if kind == "sasrec" else 4] * len(sites)


@kinds
def test_scaling_a_head_by_zero_changes_exactly_that_head_and_nothing_upstream(kind: str) -> None:
    case = CASES[kind]()
    with torch.no_grad(), read_heads(case.model) as clean:
        y = case.run()
    for i, target in enumerate(case.sites[:-1]):  # every site but the last, so something lies downstream
        h = (i + 1) % 4
        with torch.no_grad(), scale_heads(case.model, {(target, h): 0.0}), read_heads(case.model) as cap:
            y0 = case.run()
        assert not torch.equal(y0, y)
        for j, site in enumerate(case.sites):
            for head in range(4):
                old, new = clean.calls(site, head), cap.calls(site, head)
                same = all(torch.equal(a, b) for a, b in zip(old, new))
                if j < i or (j == i and head != h):  # upstream, and the other heads of the site
                    assert same, (target, h, site, head)
                elif j == i:  # the head itself: changed, and now exactly zero
                    assert not same and all(torch.count_nonzero(t) == 0 for t in new)
        downstream = [s for s in case.sites[i + 1:]
                      if not all(torch.equal(a, b) for a, b in zip(clean.calls(s, 0), cap.calls(s, 0)))]
        assert downstream  # the change propagates


@kinds
def test_scaling_by_one_is_the_identity_bit_for_bit(kind: str) -> None:
    case = CASES[kind]()
    with torch.no_grad():
        y = case.run()
        with scale_heads(case.model, {(s, h): 1.0 for s in case.sites for h in range(4)}):
            assert torch.equal(case.run(), y)
        with scale_heads(case.model, {(case.sites[0], 2): 1.5}):  # and a real factor is not
            assert not torch.equal(case.run(), y)


@kinds
def test_patching_heads_with_their_own_capture_is_the_identity(kind: str) -> None:
    case = CASES[kind]()
    with torch.no_grad():
        with read_heads(case.model) as cap:
            y = case.run()
        patches = {key: cap.calls(*key) for key in cap.keys()}
        with patch_heads(case.model, patches):
            assert torch.equal(case.run(), y)
        # a patch carries a head's output over to another input: read back, it is the patched value
        site = case.sites[1]
        with read_heads(case.model, [(site, 3)]) as other:
            case.other()
        with patch_heads(case.model, {(site, 3): other.calls(site, 3)}), read_heads(case.model, site) as seen:
            case.run()
        assert all(torch.equal(a, b) for a, b in zip(seen.calls(site, 3), other.calls(site, 3)))
        assert all(torch.equal(a, b) for a, b in zip(seen.calls(site, 0), cap.calls(site, 0)))
        # a function patch: zeroing by function equals scaling by zero
        with scale_heads(case.model, {(site, 1): 0.0}):
            scaled = case.run()
        with patch_heads(case.model, {(site, 1): torch.zeros_like}):
            assert torch.equal(case.run(), scaled)


@kinds
def test_the_probe_works_under_inference_mode(kind: str) -> None:
    case = CASES[kind]()
    site = case.sites[1]
    with torch.no_grad():
        y = case.run()
        with scale_heads(case.model, {(site, 0): 0.0}):
            y_scaled = case.run()
    with torch.inference_mode():
        with read_heads(case.model) as cap:
            assert torch.equal(case.run(), y)
        assert len(cap.calls(site, 0)) >= 1 and cap.calls(site, 0)[0].is_inference()
        with scale_heads(case.model, {(site, 0): 0.0}):
            assert torch.equal(case.run(), y_scaled)
        with patch_heads(case.model, {k: cap.calls(*k) for k in cap.keys()}):
            assert torch.equal(case.run(), y)
    assert no_hooks_left(case.model)


@kinds
def test_no_hook_is_left_behind_after_exit_or_an_exception(kind: str) -> None:
    case = CASES[kind]()
    assert no_hooks_left(case.model)
    with torch.no_grad():
        y = case.run()
        with read_heads(case.model), scale_heads(case.model, {(case.sites[0], 0): 0.0}):
            assert not no_hooks_left(case.model)
            case.run()
        assert no_hooks_left(case.model)
        for probe in (lambda: read_heads(case.model),
                      lambda: scale_heads(case.model, {(case.sites[1], 1): 0.0}),
                      lambda: patch_heads(case.model, {(case.sites[1], 1): torch.zeros_like})):
            with pytest.raises(RuntimeError, match="boom"), probe():
                case.run()
                raise RuntimeError("boom")
            assert no_hooks_left(case.model)
        # an error raised by a hook in the middle of the forward pass also removes everything
        with pytest.raises(ValueError, match="head's output is"), \
                patch_heads(case.model, {(case.sites[1], 1): torch.zeros(1, 1, 4)}):
            case.run()
        assert no_hooks_left(case.model)
        assert torch.equal(case.run(), y)


@kinds
def test_probes_nest_in_entry_order_and_gradients_flow(kind: str) -> None:
    case = CASES[kind]()
    site = case.sites[1]
    with scale_heads(case.model, {(site, 2): 2.0}):
        with read_heads(case.model, [(site, 2)]) as scaled:
            case.run()
        with patch_heads(case.model, {(site, 0): torch.zeros_like}):  # inner probe on the same site
            y = case.run()
        y.square().sum().backward()  # the probe's changes are out of place: autograd still works
    with read_heads(case.model, [(site, 2)]) as plain:
        case.run()
    for a, b in zip(scaled.calls(site, 2), plain.calls(site, 2)):
        torch.testing.assert_close(a, 2.0 * b, rtol=0, atol=0)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in case.model.parameters())
    assert no_hooks_left(case.model)


def _site_io(module: nn.Module, kind: str) -> tuple[list[Tensor], list[Tensor]]:
    """Registers test hooks recording what the site's output projection produces and what the site reads."""
    outs: list[Tensor] = []
    ins: list[Tensor] = []
    proj = module.output.dense if kind == "hf-bert" else module.out
    proj.register_forward_hook(lambda m, a, out: outs.append(out.detach()))
    reader = module.self if kind == "hf-bert" else module
    reader.register_forward_pre_hook(lambda m, args: ins.append(args[0].detach()))
    return ins, outs


@kinds
def test_projections_match_the_layout_before_the_output_projection(kind: str) -> None:
    # site output projection = sum_h output[h] @ z_h + output_bias, with z_h as the probe presents it
    case = CASES[kind]()
    for site in attention_sites(case.model):
        proj = head_projections(case.model, site.name)
        _, outs = _site_io(site.module, case.kind)
        with torch.no_grad(), read_heads(case.model, site) as cap:
            case.run()
        for call, out in enumerate(outs):
            z = torch.stack([cap.calls(site, h)[call] for h in range(site.n_heads)], 1)  # [B, H, P, d_h]
            mixed = torch.einsum("hod,bhpd->bpo", proj.output, z) + proj.output_bias
            torch.testing.assert_close(mixed, out.reshape(mixed.shape), atol=1e-5, rtol=1e-5)


@base_kinds
def test_value_paths_on_a_single_token(kind: str) -> None:
    # one token attends only to itself, so head h's output is value[g(h)] @ x + value_bias[g(h)], and with
    # every bias zeroed the site's output projection is (sum_h M_h) x
    case = CASES[kind]()
    model = copy.deepcopy(case.model)
    site = attention_sites(model)[0]
    proj = head_projections(model, site.name)
    with torch.no_grad():
        for b in proj.biases():
            b.zero_()
    ins, outs = _site_io(site.module, kind)
    with torch.no_grad(), read_heads(model, site) as cap:
        if kind == "sasrec":
            model.encode(torch.tensor([[4], [7]]))
        elif kind == "row":
            model(torch.randn(2, 1, 1, 16), torch.randn(2, 1, 1, 16))
        else:
            model(input_ids=torch.tensor([[5], [9]]))
    x = ins[0].reshape(-1, ins[0].shape[-1]).double()  # the site's tokens
    for h in range(site.n_heads):
        expected = x @ proj.value[proj.kv_head[h]].double().T
        got = cap[site, h].reshape(-1, site.head_dim).double()
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    maps = head_value_output_maps(model, site)
    assert maps.shape == (site.n_heads, 16, 16) and maps.dtype == torch.float64
    torch.testing.assert_close(outs[0].reshape(-1, 16).double(), x @ maps.sum(0).T, atol=1e-5, rtol=1e-5)
    if kind == "sasrec":  # grouped-query: query heads 0, 1 read key/value head 0, heads 2, 3 head 1
        assert proj.kv_head == (0, 0, 1, 1) and proj.value.shape == (2, 4, 16)


def test_projection_views_write_through_to_the_model() -> None:
    case = sasrec_case()
    attn = case.model.blocks[0].attn
    proj = head_projections(case.model, "blocks.0.attn")
    with torch.no_grad():
        proj.value[1].fill_(0.5)
        proj.output[3].zero_()
    D = 16
    assert torch.all(attn.qkv.weight[D + 8 + 4: D + 16] == 0.5)  # values follow queries (16) and keys (8)
    assert torch.all(attn.out.weight[:, 12:16] == 0) and torch.count_nonzero(attn.out.weight[:, :12]) > 0


def test_clear_errors_for_unknown_sites_heads_and_bad_values() -> None:
    case = sasrec_case()
    m = case.model
    with pytest.raises(ValueError, match=r"no attention site named 'blocks\.9\.attn'.*'blocks\.0\.attn'"):
        with read_heads(m, [("blocks.9.attn", 0)]):
            pass
    site = "blocks.0.attn"
    with pytest.raises(ValueError, match=r"head 4 is not a head of site .blocks\.0\.attn., which has 4"):
        with scale_heads(m, {(site, 4): 0.0}):
            pass
    for bad in (-1, True, 1.0):
        with pytest.raises(ValueError, match="is not a head of site"), patch_heads(m, {(site, bad): 0}):
            pass
    with pytest.raises(ValueError, match="finite real number"), scale_heads(m, {(site, 0): float("nan")}):
        pass
    with pytest.raises(ValueError, match=r"\(site, head\) pair"), scale_heads(m, {"blocks.0.attn": 0.0}):
        pass
    with pytest.raises(ValueError, match="must be a tensor"), patch_heads(m, {("blocks.0.attn", 0): 3.0}):
        pass
    with pytest.raises(ValueError, match="has no attention site"), read_heads(nn.Linear(2, 2)):
        pass
    with pytest.raises(ValueError, match="has 3 attention sites; name one"):
        head_projections(m)
    foreign = attention_sites(sasrec_case().model)[0]
    with pytest.raises(ValueError, match="belongs to another model"), read_heads(m, foreign):
        pass
    with torch.no_grad():
        with read_heads(m, [("blocks.0.attn", 0)]) as cap:
            case.run()
            case.run()
        with pytest.raises(KeyError, match="ran 2 times"):
            cap["blocks.0.attn", 0]
        with pytest.raises(KeyError, match="was not selected"):
            cap.calls("blocks.0.attn", 1)
        with pytest.raises(ValueError, match="holds 2 tensors"), \
                patch_heads(m, {("blocks.0.attn", 0): cap.calls("blocks.0.attn", 0)}):
            case.run(), case.run(), case.run()
    assert no_hooks_left(m)


def test_a_head_hook_set_outside_the_probe_is_refused() -> None:
    case = sasrec_case()
    case.model.blocks[0].attn.head_hook = lambda module, heads: heads
    with pytest.raises(RuntimeError, match="set outside recframe.heads"), read_heads(case.model):
        pass
    assert all(block.attn.head_hook is None for block in case.model.blocks[1:])  # the partial install undone


def test_callbacks_reexports_the_probe() -> None:
    import recframe.callbacks as callbacks
    import recframe.heads as heads

    assert all(getattr(callbacks, name) is getattr(heads, name) for name in heads.__all__)


@pytest.mark.parametrize("name", ["tiger", "sid-decoder"])
def test_the_probe_sees_cached_exact_scoring(name: str) -> None:
    # the full-catalogue walk that reuses ancestors' keys/values runs the same sites, one new token per call
    from recframe.models.generative.decoding import exact_scores_cached
    from recframe.models.generative.trie import SIDTrie

    case = generative_case(name)
    model = case.model
    trie = SIDTrie.from_codes(model.codes, model.codebook_sizes)
    history = torch.tensor([[0, 3, 5, 7], [1, 2, 3, 4]])

    def scores() -> Tensor:
        ctx = model.context(history)
        return exact_scores_cached(trie, model.score_nodes, (ctx, model.node_cache(trie)), batch_size=2)

    site = case.sites[-1] if name == "sid-decoder" else "decoder.1.attn"
    with torch.no_grad():
        with read_heads(model) as cap:
            y = scores()
        # the walk's last call: one new token (position) per level-1 node and user
        assert cap.calls(site, 0)[-1].shape == (2 * int(trie.n_nodes[1]), 1, 4)
        with scale_heads(model, {(s, h): 1.0 for s in case.sites for h in range(4)}):
            assert torch.equal(scores(), y)
        with patch_heads(model, {key: cap.calls(*key) for key in cap.keys()}):
            assert torch.equal(scores(), y)
        with scale_heads(model, {(site, 2): 0.0}):
            assert not torch.equal(scores(), y)
    assert no_hooks_left(model)
