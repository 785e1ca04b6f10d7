"""Grouped-query attention in ``recframe.models.layers``: backward compatibility and known answers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from recframe.models.layers import CausalSelfAttention, TransformerBlock, sequence_attention_mask


def _old_forward(layer: CausalSelfAttention, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The multi-head forward pass exactly as it was written before GQA existed (reference)."""
    B, L, D = x.shape
    q, k, v = layer.qkv(x).view(B, L, 3, layer.n_heads, D // layer.n_heads).permute(2, 0, 3, 1, 4)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return layer.out(heads.transpose(1, 2).reshape(B, L, D))


def _manual_attention(x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor,
                      wo: torch.Tensor, n_heads: int, n_kv: int) -> torch.Tensor:
    """Bias-free causal GQA written out head by head with an explicit softmax."""
    B, L, D = x.shape
    dh = D // n_heads
    scores_mask = torch.ones(L, L, dtype=torch.bool).tril()
    outs = []
    for h in range(n_heads):
        g = h // (n_heads // n_kv)
        q = x @ wq[h * dh:(h + 1) * dh].T
        k = x @ wk[g * dh:(g + 1) * dh].T
        v = x @ wv[g * dh:(g + 1) * dh].T
        s = (q @ k.transpose(-1, -2)) / dh ** 0.5
        s = s.masked_fill(~scores_mask, float("-inf"))
        outs.append(torch.softmax(s, dim=-1) @ v)
    return torch.cat(outs, dim=-1) @ wo.T


def test_default_keeps_parameter_names_shapes_and_the_old_forward() -> None:
    torch.manual_seed(0)
    layer = CausalSelfAttention(12, 3, 0.0).eval()
    assert layer.n_kv_heads == 3
    shapes = {k: tuple(v.shape) for k, v in layer.state_dict().items()}
    assert shapes == {"qkv.weight": (36, 12), "qkv.bias": (36,), "out.weight": (12, 12), "out.bias": (12,)}
    x = torch.randn(2, 5, 12)
    mask = sequence_attention_mask(torch.tensor([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]))
    torch.testing.assert_close(layer(x, mask), _old_forward(layer, x, mask))
    # an old checkpoint (same keys and shapes) loads strictly into an explicit n_kv_heads == n_heads layer
    same = CausalSelfAttention(12, 3, 0.0, n_kv_heads=3).eval()
    same.load_state_dict(layer.state_dict(), strict=True)
    torch.testing.assert_close(same(x, mask), layer(x, mask))


@pytest.mark.parametrize("n_kv", [1, 2, 4])
def test_gqa_matches_a_head_by_head_reference(n_kv: int) -> None:
    torch.manual_seed(1)
    D, H = 16, 4
    layer = CausalSelfAttention(D, H, 0.0, n_kv_heads=n_kv).eval()
    dh = D // H
    assert layer.qkv.weight.shape == (D + 2 * n_kv * dh, D)
    with torch.no_grad():
        layer.qkv.bias.zero_()
        layer.out.bias.zero_()
    wq, wk, wv = layer.qkv.weight.detach().split([D, n_kv * dh, n_kv * dh])
    x = torch.randn(3, 6, D)
    mask = sequence_attention_mask(torch.ones(3, 6, dtype=torch.long))
    expected = _manual_attention(x, wq, wk, wv, layer.out.weight.detach(), H, n_kv)
    torch.testing.assert_close(layer(x, mask), expected, atol=1e-5, rtol=1e-5)


def test_gqa_equals_mha_with_repeated_key_value_heads() -> None:
    torch.manual_seed(2)
    D, H, G = 12, 6, 2
    gqa = CausalSelfAttention(D, H, 0.0, n_kv_heads=G).eval()
    mha = CausalSelfAttention(D, H, 0.0).eval()
    dh = D // H
    w, b = gqa.qkv.weight.detach(), gqa.qkv.bias.detach()

    def repeat(t: torch.Tensor) -> torch.Tensor:  # [G*dh, ...] -> [H*dh, ...], each group's head repeated
        return t.reshape(G, dh, *t.shape[1:]).repeat_interleave(H // G, dim=0).reshape(H * dh, *t.shape[1:])

    with torch.no_grad():
        wq, wk, wv = w.split([D, G * dh, G * dh])
        bq, bk, bv = b.split([D, G * dh, G * dh])
        mha.qkv.weight.copy_(torch.cat([wq, repeat(wk), repeat(wv)]))
        mha.qkv.bias.copy_(torch.cat([bq, repeat(bk), repeat(bv)]))
        mha.out.load_state_dict(gqa.out.state_dict())
    x = torch.randn(2, 7, D)
    mask = sequence_attention_mask(torch.tensor([[0, 0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6, 7]]))
    torch.testing.assert_close(gqa(x, mask), mha(x, mask), atol=1e-6, rtol=1e-5)


def test_gqa_is_causal_and_the_head_probe_sees_every_query_head() -> None:
    from recframe.heads import attention_sites, read_heads, scale_heads

    torch.manual_seed(3)
    block = TransformerBlock(8, 4, 16, 0.0, 0.0, n_kv_heads=2).eval()
    x = torch.randn(1, 5, 8)
    mask = sequence_attention_mask(torch.ones(1, 5, dtype=torch.long))
    y = block(x, mask)
    x2 = x.clone()
    x2[0, -1] += 1.0  # only the last position's future changes
    torch.testing.assert_close(block(x2, mask)[0, :4], y[0, :4])
    assert [(s.name, s.n_heads, s.n_kv_heads) for s in attention_sites(block)] == [("attn", 4, 2)]
    with scale_heads(block, {("attn", 1): 0.0}), read_heads(block, "attn") as heads:  # knock out one head
        z = block(x, mask)
    assert [tuple(heads["attn", h].shape) for h in range(4)] == [(1, 5, 2)] * 4
    assert not torch.allclose(z, y)


@pytest.mark.parametrize("bad", [0, 3, -2, 2.0, True])
def test_bad_n_kv_heads_is_one_clear_error(bad: object) -> None:
    with pytest.raises(ValueError, match="n_kv_heads"):
        CausalSelfAttention(8, 4, 0.0, n_kv_heads=bad)  # type: ignore[arg-type]


def test_sasrec_takes_n_kv_heads_and_shrinks_only_the_key_value_projection() -> None:
    from recframe.models.sasrec import SASRec

    mha = SASRec(n_items=30, hidden=16, n_heads=4, n_layers=1)
    gqa = SASRec(n_items=30, hidden=16, n_heads=4, n_layers=1, n_kv_heads=1)
    sizes = {name: p.shape for name, p in mha.named_parameters()}
    assert sizes["blocks.0.attn.qkv.weight"] == (48, 16)
    assert dict(gqa.named_parameters())["blocks.0.attn.qkv.weight"].shape == (16 + 2 * 4, 16)
    items = torch.randint(1, 31, (3, 7))
    assert gqa.encode(items).shape == (3, 7, 16)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("n_kv_heads", [None, 1])
def test_packed_encoder_equals_the_dense_one_on_real_tokens_and_last_positions(
        causal: bool, n_kv_heads: int | None) -> None:
    """``encode_sequence(packed=True)`` runs the token-wise layers on the real tokens (and each row's last
    position) only: the dense encoder's values and gradients there, zeros at the other padding; the
    default packs a mostly padded batch and keeps a mostly real one dense."""
    from torch import nn

    from recframe.models.layers import TransformerBlock, encode_sequence

    torch.manual_seed(6)
    dim, window = 16, 8
    blocks = nn.ModuleList(TransformerBlock(dim, 4, 32, 0.0, 0.0, n_kv_heads=n_kv_heads) for _ in range(2))
    pos, norm, emb = nn.Embedding(window, dim), nn.LayerNorm(dim), nn.Embedding(30, dim, padding_idx=0)
    items = torch.tensor([[0, 0, 0, 0, 0, 0, 3, 5], [0, 0, 0, 0, 1, 2, 3, 4], [0, 0, 0, 0, 0, 0, 0, 9],
                          [0, 0, 0, 0, 0, 0, 0, 0]])
    keep = items > 0
    keep[:, -1] = True
    weights = torch.randn(4, window, dim)
    params = [*blocks.parameters(), *pos.parameters(), *norm.parameters(), *emb.parameters()]

    def output_and_grads(packed: bool | None) -> tuple[torch.Tensor, list[torch.Tensor]]:
        for p in params:
            p.grad = None
        out = encode_sequence(emb(items), items, pos, nn.Identity(), blocks, norm, causal=causal,
                              packed=packed)
        (out[keep] * weights[keep]).sum().backward()
        return out.detach(), [p.grad.clone() for p in params]

    dense, g_dense = output_and_grads(False)
    packed, g_packed = output_and_grads(True)
    torch.testing.assert_close(packed[keep], dense[keep], rtol=1e-5, atol=1e-6)
    assert torch.equal(packed[~keep], torch.zeros_like(packed[~keep]))
    for a, b in zip(g_packed, g_dense):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    assert torch.equal(output_and_grads(None)[0], packed)  # 7 of 32 tokens real: packed (same process)
    full = torch.arange(1, window + 1)[None]
    assert torch.equal(encode_sequence(emb(full), full, pos, nn.Identity(), blocks, norm, causal=causal),
                       encode_sequence(emb(full), full, pos, nn.Identity(), blocks, norm, causal=causal,
                                       packed=False))  # all real: dense
