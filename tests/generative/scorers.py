"""Small scorers and brute-force references for the trie/decoding tests."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor, nn


def random_codes(rng: np.random.Generator, sizes: tuple[int, ...], n_items: int) -> np.ndarray:
    """``[n_items + 1, L]`` table of distinct random paths (row 0 = zeros, the padding item)."""
    flat = rng.choice(math.prod(sizes), size=n_items, replace=False)
    codes = np.zeros((n_items + 1, len(sizes)), dtype=np.int64)
    for lvl in range(len(sizes) - 1, -1, -1):
        codes[1:, lvl] = flat % sizes[lvl]
        flat = flat // sizes[lvl]
    return codes


def prefix_ids(prefix: Tensor, sizes: tuple[int, ...]) -> Tensor:
    """Mixed-radix id of each prefix ``[..., l]`` among the ``prod(sizes[:l])`` prefixes of length ``l``."""
    pid = torch.zeros(prefix.shape[:-1], dtype=torch.long)
    for lvl in range(prefix.shape[-1]):
        pid = pid * sizes[lvl] + prefix[..., lvl]
    return pid


class TableScorer:
    """Fixed random logits per (user, prefix): level ``l`` holds ``[n_users, prod(C_<l), C_l]`` numbers.

    The state is the tensor of user ids ``[B]``; ``step`` follows the grouped ``StepLogits`` protocol.
    """

    def __init__(self, sizes: tuple[int, ...], n_users: int, seed: int, scale: float = 2.0) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.sizes = sizes
        self.tables = [scale * torch.randn(n_users, math.prod(sizes[:lvl]), sizes[lvl], generator=gen)
                       for lvl in range(len(sizes))]

    def __call__(self, users: Tensor, prefix: Tensor) -> Tensor:
        table = self.tables[prefix.shape[-1]]
        return table[users[:, None], prefix_ids(prefix, self.sizes)]

    def rows(self, users: Tensor, prefix: Tensor) -> Tensor:
        """The per-row form ``(users [N], prefix [N, l]) -> [N, C_l]`` (for ``rowwise``)."""
        return self.tables[prefix.shape[-1]][users, prefix_ids(prefix, self.sizes)]


def brute_force_scores(step, users: Tensor, codes: np.ndarray, normalize: str) -> np.ndarray:
    """Per-item Python loop: log-probability of each item's path, ``[B, n_items + 1]``, column 0 = -inf."""
    n_items, depth = codes.shape[0] - 1, codes.shape[1]
    out = np.full((len(users), n_items + 1), -np.inf)
    for b in range(len(users)):
        for item in range(1, n_items + 1):
            total = 0.0
            for lvl in range(depth):
                prefix = torch.as_tensor(codes[item, :lvl]).reshape(1, 1, lvl)
                logits = step(users[b:b + 1], prefix)[0, 0].double()
                if normalize == "valid":
                    same = np.all(codes[1:, :lvl] == codes[item, :lvl], axis=1)
                    allowed = sorted(set(codes[1:][same, lvl].tolist()))
                    logp = torch.log_softmax(logits[allowed], 0)[allowed.index(codes[item, lvl])]
                else:
                    logp = torch.log_softmax(logits, 0)[codes[item, lvl]]
                total += float(logp)
            out[b, item] = total
    return out


class MLPScorer(nn.Module):
    """A tiny trainable autoregressive scorer: user + prefix-code embeddings -> MLP -> level head."""

    def __init__(self, sizes: tuple[int, ...], n_users: int, dim: int = 32) -> None:
        super().__init__()
        self.sizes = sizes
        self.user = nn.Embedding(n_users, dim)
        self.code = nn.ModuleList(nn.Embedding(c, dim) for c in sizes)
        self.level = nn.Embedding(len(sizes), dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.heads = nn.ModuleList(nn.Linear(dim, c) for c in sizes)

    def forward(self, users: Tensor, prefix: Tensor) -> Tensor:
        lvl = prefix.shape[-1]
        h = self.user(users)[:, None, :] + self.level.weight[lvl]
        for j in range(lvl):
            h = h + self.code[j](prefix[..., j])
        return self.heads[lvl](self.mlp(h))

    def nll(self, users: Tensor, paths: Tensor) -> Tensor:
        """Teacher-forced cross-entropy of item paths ``[N, L]`` over the full codebook at each level."""
        loss = torch.zeros(())
        for lvl in range(len(self.sizes)):
            logits = self(users, paths[:, None, :lvl])[:, 0]
            loss = loss + nn.functional.cross_entropy(logits, paths[:, lvl])
        return loss
