"""RowAttention against a reference written one row at a time: softmax(q k^T / sqrt(d_h) + bias) v over the
row's own tokens and its user's context, concatenated (known answer, independent of the batched layout)."""

from __future__ import annotations

import math

import pytest
import torch

from recframe.models.generative.attention import RowAttention


def _reference(attn: RowAttention, x: torch.Tensor, context: torch.Tensor | None, self_mask: torch.Tensor,
               self_bias: torch.Tensor, context_mask: torch.Tensor | None,
               context_bias: torch.Tensor | None) -> torch.Tensor:
    """One user, one row and one head at a time; ``x`` [B, N, q, D]."""
    H, dh = attn.n_heads, attn.head_dim
    B, N, q, D = x.shape
    out = torch.zeros(B, N, q, D, dtype=torch.float64)
    for b in range(B):
        xb = x[b].double()
        for n in range(N):
            rows = xb[n]  # [q, D]
            Q = rows @ attn.q.weight.double().T + attn.q.bias.double()
            kv = rows @ attn.kv.weight.double().T + attn.kv.bias.double()
            K_self, V_self = kv[:, :D], kv[:, D:]
            merged = torch.zeros(q, D, dtype=torch.float64)
            for h in range(H):
                cols = slice(h * dh, (h + 1) * dh)
                scores, values = [], []
                if attn.attend_self:
                    s = Q[:, cols] @ K_self[:, cols].T / math.sqrt(dh) + self_bias[b, n, h]
                    scores.append(s.masked_fill(~self_mask, float("-inf")))
                    values.append(V_self[:, cols])
                if context is not None:
                    ckv = context[b].double() @ attn.kv.weight.double().T + attn.kv.bias.double()
                    c = Q[:, cols] @ ckv[:, :D][:, cols].T / math.sqrt(dh) + context_bias[b, n, h]
                    scores.append(c.masked_fill(~context_mask[b, n], float("-inf")))
                    values.append(ckv[:, D:][:, cols])
                probs = torch.softmax(torch.cat(scores, -1), -1).nan_to_num(0.0)
                merged[:, cols] = probs @ torch.cat(values, 0)
            out[b, n] = merged @ attn.out.weight.double().T + attn.out.bias.double()
    return out


@pytest.mark.parametrize("attend_self", [True, False])
def test_rows_over_their_own_tokens_and_the_shared_context_match_the_reference(attend_self: bool) -> None:
    """N rows per user share its context (beams, trie nodes; a decoder-only model's history when the rows
    also attend to themselves; TIGER's cross-attention when they do not)."""
    torch.manual_seed(0)
    B, N, q, K, D, H = 3, 4, 3, 5, 8, 2
    attn = RowAttention(D, H, dropout=0.0, attend_self=attend_self, attend_context=True).eval()
    x = torch.randn(B, N, q, D)
    context = torch.randn(B, K, D)
    self_mask = torch.tril(torch.ones(q, q, dtype=torch.bool))
    self_bias = torch.randn(B, N, H, q, q)
    context_mask = torch.rand(B, N, q, K) > 0.3
    context_mask[0, 0] = False  # a row that sees no context token
    context_bias = torch.randn(B, N, H, q, K)
    got = attn(x, self_mask=self_mask, self_bias=self_bias, context_kv=attn.context_kv(context),
               context_mask=context_mask[:, :, None], context_bias=context_bias)
    want = _reference(attn, x, context, self_mask, self_bias, context_mask, context_bias)
    assert got.shape == (B, N, q, D)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


def test_cross_attention_over_memory_gathered_per_row_matches_the_reference() -> None:
    """TIGER's compact training rows: each row reads its own user's memory (gathered), with its own mask."""
    torch.manual_seed(1)
    B, R, q, K, D, H = 3, 7, 4, 6, 8, 2
    attn = RowAttention(D, H, dropout=0.0, attend_self=False, attend_context=True).eval()
    memory = torch.randn(B, K, D)
    user = torch.tensor([0, 0, 1, 2, 2, 2, 1])
    k, v = attn.context_kv(memory)
    x = torch.randn(R, 1, q, D)
    mask = torch.rand(R, 1, 1, 1, K) > 0.4
    got = attn(x, context_kv=(k[user], v[user]), context_mask=mask)
    H_, dh = H, D // H
    for r in range(R):
        Q = x[r, 0].double() @ attn.q.weight.double().T + attn.q.bias.double()
        ckv = memory[user[r]].double() @ attn.kv.weight.double().T + attn.kv.bias.double()
        merged = torch.zeros(q, D, dtype=torch.float64)
        for h in range(H_):
            cols = slice(h * dh, (h + 1) * dh)
            s = Q[:, cols] @ ckv[:, :D][:, cols].T / math.sqrt(dh)
            s = s.masked_fill(~mask[r, 0, 0], float("-inf"))
            merged[:, cols] = torch.softmax(s, -1).nan_to_num(0.0) @ ckv[:, D:][:, cols]
        want = merged @ attn.out.weight.double().T + attn.out.bias.double()
        torch.testing.assert_close(got[r, 0].double(), want, rtol=1e-5, atol=1e-5)


def test_trailing_windows_group_rows_by_where_their_kept_tokens_start() -> None:
    from recframe.models.layers import trailing_windows

    S = 50
    spans = torch.tensor([2] * 100 + [50] * 28)  # planted: many short histories, a few full ones
    keep = torch.arange(S)[None] >= (S - spans)[:, None]
    groups = trailing_windows(keep)
    assert [(sorted(rows.tolist()), start) for rows, start in groups] == [(list(range(100)), 48),
                                                                          (list(range(100, 128)), 0)]
    assert trailing_windows(torch.ones(16, S, dtype=torch.bool)) is None  # full rows: nothing to trim
    torch.manual_seed(0)
    spans = torch.randint(1, S + 1, (64,))
    keep = torch.arange(S)[None] >= (S - spans)[:, None]
    keep[5] = False
    keep[5, -1] = True  # a row with no real token keeps its last position
    groups = trailing_windows(keep) or [(torch.arange(64), 0)]
    assert sorted(r for rows, _ in groups for r in rows.tolist()) == list(range(64))  # a partition
    for rows, start in groups:
        assert not keep[rows, :start].any()  # no kept token is left out of its window


def test_packed_self_attention_over_trailing_windows_is_the_dense_function() -> None:
    """Values and gradients of the kept tokens: packed rows attend over their group's window only."""
    from recframe.models.layers import trailing_windows

    torch.manual_seed(2)
    B, S, D, H = 12, 20, 8, 2
    spans = torch.tensor([1, 2, 2, 3, 3, 3, 4, 20, 19, 2, 1, 3])
    valid = torch.arange(S)[None] >= (S - spans)[:, None]
    keep = valid.clone()
    keep[:, -1] = True
    assert trailing_windows(keep) is not None and len(trailing_windows(keep)) > 1
    mask = (torch.tril(torch.ones(S, S, dtype=torch.bool))[None] & valid[:, None, :]) | torch.eye(
        S, dtype=torch.bool)[None]
    bias = torch.randn(B, 1, H, S, S)
    attn = RowAttention(D, H, dropout=0.0).eval()
    x = torch.randn(B, 1, S, D, requires_grad=True)
    dense = attn(x, self_mask=mask[:, None, None], self_bias=bias)[keep[:, None]]
    packed_in = x[keep[:, None]].detach().requires_grad_()
    packed = attn.forward_packed(packed_in, keep[:, None], self_mask=mask[:, None, None], self_bias=bias)
    torch.testing.assert_close(packed, dense, rtol=1e-5, atol=1e-6)
    weights = torch.randn_like(dense)
    (dense * weights).sum().backward()
    grad_dense = x.grad[keep[:, None]]
    (packed * weights).sum().backward()
    torch.testing.assert_close(packed_in.grad, grad_dense, rtol=1e-5, atol=1e-6)
