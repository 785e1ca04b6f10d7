"""Trie-constrained beam search and exact full-catalogue scoring: speed against per-beam Python references.

Run (943 ML-100K test users; smoke: ``--users 64 --no-write``)::

    python -m benchmarks.decoding
    python -m benchmarks.decoding --users 64 --no-write

Setup. ML-100K (after ``recframe data prepare ml-100k``), leave-one-out: the users with a test item, each
with the history before it (last ``--history`` items). Codes: a real SIDTable when ``recframe.tokenizers``
imports -- RQ-KMeans 3 x 64 (+ its disambiguation level) on the item content features of
``recframe.features.item_content`` (MiniLM text embeddings when the ``text`` extra is installed, else the
metadata fallback: hashed title words, genres, year; the JSON says which) -- otherwise (or with
``--codes random``) a random valid table of the same shape (3 x 64 uniform codes + disambiguation level).

Scorer (the same module for every implementation): a small randomly initialised TIGER-style transformer
(``SmallTiger``): one encoder layer over the history (an item = sum of its code embeddings, plus a position
embedding), and a 2-layer pre-LN decoder over ``[BOS, prefix codes]`` with causal self-attention and
cross-attention to the encoder memory, d = 64, 2 heads, FFN 128, one output head per level. It follows the
grouped ``StepLogits`` protocol: cross-attention runs with queries ``[B, M * (l + 1)]`` against each user's
memory, so no state is repeated per hypothesis. Encoding the history (``context``) is timed apart.

Implementations (all in ``torch.inference_mode``, ``--threads`` torch threads, user batches of ``--batch``):

* ``beam, trie (ours)``: :func:`recframe.models.generative.beam_search` (beam 20, top-10): child masks by
  one gather from the tensor trie, no Python loop per user or beam.
* ``beam, per-beam Python (HF-style)``: the same batched search (same tensor shapes, same scorer calls,
  same top-k), but the constraint comes from a Python ``prefix_allowed_tokens_fn(batch_id, sent)`` called
  for every (user, beam) at every level, which walks a dict-of-dicts trie and returns the allowed codes,
  written into a ``-inf`` mask row by row, as Hugging Face's ``PrefixConstrainedLogitsProcessor`` does.
  Its items and scores must equal ours (checked).
* the two beam searches again with ``FreeScorer`` (fixed random logits sliced per call, no model), which
  times the decoding machinery alone; both get identical logits, so their items must match (checked).
* ``exact, trie walk (ours)``: :func:`recframe.models.generative.exact_scores`, ``[B, n_items + 1]``.
* ``exact, per-item paths``: the reference without prefix sharing: every item's path is scored on its own
  (at level l the scorer gets all ``n_items`` item prefixes, then a per-level gather), ``L * n_items``
  hypotheses per user instead of ``sum_l n_nodes[l]``. Its scores must equal ours (checked). It is slow,
  so it runs on the first ``--ref-users`` users (users/s is compared).

Exact scoring on the shipped model. :class:`recframe.models.generative.TIGER` itself (not a copy), sized
as ``configs/tiger_ml100k.yaml`` (d = 64, 2 + 2 layers, 4 heads, FFN 256, window 20), random init, on the
same code table, without and with the TrieRec add-on (its zero-initialised tables given random values so
that its biases matter). ``model.score(batch)`` is timed both ways on the first ``--shipped-users`` test
users:

* ``prefix re-run (before)``: ``score(batch, cached=False)``, the walk as it was: every trie node's whole
  decoder prefix ``[start, c_1..c_l]`` is run again at each level, ``sum_l (l + 1) n_nodes[l]`` decoder
  tokens per user;
* ``cached K/V (ours)``: ``score(batch)``: one new decoder token per node, attending to its ancestors' cached
  keys/values, ``sum_l n_nodes[l]`` tokens per user. Its scores must equal the uncached ones (checked).

Reported per implementation (beam rows: the best of ``--repeats`` runs; exact rows: one run): process CPU
time (the primary measure: with one torch thread it is the work done, while wall time on a shared machine
also counts waiting for a core; wall time is reported too), users/s = users / CPU s, CPU time inside the
scorer's step calls, the history encoding time, and the decoding overhead (CPU - scorer - encoding);
speedups of ours over the reference: end to end, on the overhead, and with the free scorer. Also
checked: beam scores equal the exact scores of the returned items, and the share of users whose beam top-10
equals the exact top-10 (beam search is a heuristic below the full beam; the scorer is untrained).
Writes ``benchmarks/results/decoding.{json,md}``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
import yaml
from torch import Tensor, nn

from benchmarks.common import write_results
from recframe.data import catalog
from recframe.models.generative import TIGER, SIDTrie, TrieRec, beam_search, exact_scores

N_LEVELS, CODEBOOK = 3, 64
#: the config whose TIGER sizes the shipped-model rows use
SHIPPED_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "tiger_ml100k.yaml"


# ------------------------------------------------------------------------------------------------ data
def load_users(n_users: int | None, history: int) -> tuple[Any, np.ndarray, np.ndarray]:
    """ML-100K interactions, the test users (leave-one-out) and their left-padded histories ``[U, T]``."""
    inter = catalog.load("ml-100k")
    hist = inter.histories
    lengths = hist.lengths()
    users = np.flatnonzero(lengths >= 3)  # leave-one-out evaluates users with >= 3 interactions
    if n_users is not None:
        users = users[:n_users]
    out = np.zeros((len(users), history), dtype=np.int64)
    for row, user in enumerate(users):
        before = hist.of(int(user))[:-1][-history:]  # everything before the test item
        out[row, history - len(before):] = before
    return inter, users, out


def make_codes(inter: Any, kind: str, seed: int) -> tuple[np.ndarray, tuple[int, ...], dict[str, Any]]:
    """A real RQ-KMeans SIDTable when the tokenizers import (``kind='auto'``), else a random valid table."""
    if kind == "auto" and importlib.util.find_spec("recframe.tokenizers") is not None:
        try:
            from recframe.features.item_content import item_content_features
            from recframe.tokenizers import RQKMeansTokenizer
        except ImportError as exc:
            print(f"recframe.tokenizers not usable ({exc}); using a random code table")
        else:
            encoder, label = text_encoder()
            feats = item_content_features(inter.item_features, encoder=encoder)
            table = RQKMeansTokenizer(n_levels=N_LEVELS, codebook_size=CODEBOOK, seed=seed).fit(feats)
            info = {"codes": "RQ-KMeans SIDTable", "features": label, "feature_dim": int(feats.shape[1]),
                    "settings": table.settings, "fingerprint": table.fingerprint}
            return np.array(table.codes), tuple(table.codebook_sizes), info
    rng = np.random.default_rng(seed)
    n = inter.n_items
    sem = rng.integers(0, CODEBOOK, size=(n, N_LEVELS))
    _, inverse = np.unique(sem, axis=0, return_inverse=True)
    dis = np.zeros(n, dtype=np.int64)  # disambiguation code: rank of the item within its collision group
    seen: dict[int, int] = {}
    for i, g in enumerate(inverse.ravel()):
        dis[i] = seen.get(int(g), 0)
        seen[int(g)] = dis[i] + 1
    codes = np.zeros((n + 1, N_LEVELS + 1), dtype=np.int64)
    codes[1:, :N_LEVELS], codes[1:, N_LEVELS] = sem, dis
    sizes = (CODEBOOK,) * N_LEVELS + (int(dis.max()) + 1,)
    return codes, sizes, {"codes": "random valid table (uniform 3 x 64 + disambiguation level)"}


def text_encoder() -> tuple[str, str]:
    """``(encoder, label)``: MiniLM when the ``text`` extra is usable, else the metadata features."""
    from recframe.features.text_encoder import DEFAULT_ENCODER, TextEncoderUnavailable, resolve_encoder

    try:
        _, key = resolve_encoder(DEFAULT_ENCODER)
    except TextEncoderUnavailable:
        return "none", "metadata (hashed title words + genres + year; the text extra is not installed)"
    return DEFAULT_ENCODER, f"text embeddings ({key}) of 'title (year); genres'"


# ---------------------------------------------------------------------------------------------- scorer
class SmallTiger(nn.Module):
    """Small TIGER-style encoder-decoder scorer over semantic IDs (module docstring)."""

    def __init__(self, codes: np.ndarray, sizes: tuple[int, ...], history: int, dim: int = 64, heads: int = 2,
                 ffn: int = 128, layers: int = 2) -> None:
        super().__init__()
        self.register_buffer("codes", torch.as_tensor(codes))
        self.register_buffer("offsets", torch.as_tensor(np.concatenate([[0], np.cumsum(sizes)[:-1]])))
        self.heads, self.dim = heads, dim
        self.tok = nn.Embedding(int(sum(sizes)) + 1, dim)  # last row = BOS
        self.pos = nn.Embedding(history, dim)
        self.level = nn.Embedding(len(sizes) + 1, dim)
        self.encoder = nn.TransformerEncoderLayer(dim, heads, ffn, dropout=0.0, batch_first=True,
                                                  norm_first=True)
        self.blocks = nn.ModuleList(_DecoderBlock(dim, heads, ffn) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.out = nn.ModuleList(nn.Linear(dim, c) for c in sizes)

    def context(self, history: Tensor) -> tuple[list[tuple[Tensor, Tensor]], Tensor]:
        """Per-layer cross-attention keys/values ``[B, h, T, d_h]`` and the visible-memory mask."""
        pad = history == 0
        x = self.tok(self.codes[history] + self.offsets).sum(2) + self.pos.weight[None]
        memory = self.encoder(x, src_key_padding_mask=pad)
        kv = [block.memory_kv(memory) for block in self.blocks]
        return kv, (~pad)[:, None, None, :]

    def step(self, state: tuple[list[tuple[Tensor, Tensor]], Tensor], prefix: Tensor) -> Tensor:
        """Grouped ``StepLogits``: next-code logits ``[B, M, C_l]`` for prefixes ``[B, M, l]``."""
        kv, mask = state
        b, m, lvl = prefix.shape
        bos = self.tok.weight[-1].expand(b, m, 1, -1)
        x = torch.cat([bos, self.tok(prefix + self.offsets[:lvl])], dim=2) + self.level.weight[:lvl + 1]
        for i, (block, memory) in enumerate(zip(self.blocks, kv)):
            x = block(x, memory, mask, last_only=i == len(self.blocks) - 1)
        return self.out[lvl](self.norm(x[:, :, -1]))


class _DecoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.h = heads
        self.n1, self.n2, self.n3 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.o1 = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.q2, self.kv2, self.o2 = nn.Linear(dim, dim), nn.Linear(dim, 2 * dim), nn.Linear(dim, dim)
        self.ff = nn.Sequential(nn.Linear(dim, ffn), nn.GELU(), nn.Linear(ffn, dim))

    def _split(self, x: Tensor) -> Tensor:  # [..., n, d] -> [..., h, n, d_h]
        return x.unflatten(-1, (self.h, -1)).transpose(-3, -2)

    def _merge(self, x: Tensor) -> Tensor:
        return x.transpose(-3, -2).flatten(-2)

    def memory_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        k, v = self.kv2(memory).chunk(2, dim=-1)
        return self._split(k), self._split(v)

    def forward(self, x: Tensor, memory: tuple[Tensor, Tensor], mask: Tensor, last_only: bool) -> Tensor:
        b, m, n, d = x.shape
        q, k, v = (self._split(t) for t in self.qkv(self.n1(x)).chunk(3, dim=-1))  # [B, M, h, n, d_h]
        if last_only:  # the last layer only needs the last token's output
            x, q = x[:, :, -1:], q[..., -1:, :]
            att = F.scaled_dot_product_attention(q, k, v)
        else:
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o1(self._merge(att))
        n_q = x.shape[2]
        q2 = self._split(self.q2(self.n2(x)).reshape(b, m * n_q, d))  # [B, h, M * n, d_h]
        cross = F.scaled_dot_product_attention(q2, *memory, attn_mask=mask)
        x = x + self.o2(self._merge(cross)).reshape(b, m, n_q, d)
        return x + self.ff(self.n3(x))


def clock() -> np.ndarray:
    """``[wall, cpu]`` seconds now (cpu = this process's CPU time)."""
    return np.array([time.perf_counter(), time.process_time()])


class Timed:
    """Wrap a step function and add up the ``[wall, cpu]`` seconds spent inside it."""

    def __init__(self, step: Callable[[Any, Tensor], Tensor]) -> None:
        self.step, self.seconds = step, np.zeros(2)

    def __call__(self, state: Any, prefix: Tensor) -> Tensor:
        t0 = clock()
        out = self.step(state, prefix)
        self.seconds += clock() - t0
        return out


# ------------------------------------------------------------------------------------------ references
def dict_trie(codes: np.ndarray) -> tuple[dict[int, Any], dict[tuple[int, ...], int]]:
    """Dict-of-dicts trie over the items' paths and the path -> item map."""
    root: dict[int, Any] = {}
    for path in codes[1:].tolist():
        node = root
        for code in path:
            node = node.setdefault(code, {})
    return root, {tuple(p): i + 1 for i, p in enumerate(codes[1:].tolist())}


def reference_beam_search(root: dict[int, Any], path_item: dict[tuple[int, ...], int], step: Any, state: Any,
                          n_users: int, sizes: tuple[int, ...], n_nodes: tuple[int, ...], k: int,
                          beam: int) -> tuple[Tensor, Tensor]:
    """HF-style: the same batched beam search, constrained by a per-beam ``prefix_allowed_tokens_fn``."""

    def prefix_allowed_tokens_fn(batch_id: int, sent: Tensor) -> list[int]:
        node = root
        for code in sent.tolist():
            node = node.get(code)
            if node is None:
                return []
        return list(node)

    scores = torch.zeros(n_users, 1)
    prefix = torch.zeros(n_users, 1, 0, dtype=torch.long)
    for level, size in enumerate(sizes):
        width = prefix.shape[1]
        logp = torch.log_softmax(step(state, prefix).float(), dim=-1)
        mask = torch.full_like(logp, float("-inf"))
        for batch_id in range(n_users):
            for beam_id in range(width):
                mask[batch_id, beam_id, prefix_allowed_tokens_fn(batch_id, prefix[batch_id, beam_id])] = 0
        cand = (scores.unsqueeze(-1) + logp + mask).reshape(n_users, width * size)
        scores, idx = cand.topk(min(beam, n_nodes[level + 1]), dim=1)
        kept = prefix.gather(1, (idx // size).unsqueeze(-1).expand(-1, -1, level))
        prefix = torch.cat([kept, (idx % size).unsqueeze(-1)], dim=-1)
    items = torch.tensor([[path_item.get(tuple(p), 0) for p in row] for row in prefix[:, :k].tolist()])
    return items, scores[:, :k]


def per_item_exact(codes: Tensor, step: Any, state: Any, n_users: int, sizes: tuple[int, ...]) -> Tensor:
    """Exact scores without prefix sharing: each item's path scored on its own, level by level."""
    n_items = codes.shape[0] - 1
    total = torch.zeros(n_users, n_items)
    for level in range(len(sizes)):
        pre = codes[1:, :level].unsqueeze(0).expand(n_users, -1, -1)
        logp = torch.log_softmax(step(state, pre).float(), dim=-1)
        total += logp.gather(2, codes[1:, level].expand(n_users, -1).unsqueeze(-1)).squeeze(-1)
    return torch.cat([torch.full((n_users, 1), float("-inf")), total], dim=1)


# ------------------------------------------------------------------------------------- shipped model
def shipped_tiger(codes: np.ndarray, sizes: tuple[int, ...], n_items: int, trierec: bool, seed: int) -> TIGER:
    """``recframe.models.generative.TIGER`` sized as ``configs/tiger_ml100k.yaml``, random init."""
    with open(SHIPPED_CONFIG) as fh:
        cfg = yaml.safe_load(fh)
    init = cfg["model"]["init_args"]
    sizes_kw = {key: init[key] for key in ("dim", "n_layers", "n_heads", "inner", "dropout") if key in init}
    max_len = init.get("max_len", cfg["data"]["max_len"])
    torch.manual_seed(seed)
    model = TIGER(n_items=n_items, max_len=max_len, addons=[TrieRec()] if trierec else None, **sizes_kw)
    model.build_backbone(codes, sizes)
    if trierec:  # TrieRec's tables start at zero; random values make its biases matter in the equality check
        gen = torch.Generator().manual_seed(seed + 1)
        with torch.no_grad():
            for p in model.backbone.addons.parameters():
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    return model.eval()


def run_shipped(name: str, model: TIGER, histories: np.ndarray, batch: int, cached: bool
                ) -> tuple[Tensor, dict[str, float]]:
    """Time ``model.score`` (context encoding included) over user batches."""
    t0, outs = clock(), []
    for start in range(0, len(histories), batch):
        outs.append(model.score({"history": torch.as_tensor(histories[start:start + batch])}, cached=cached))
    (wall, cpu), n = clock() - t0, len(histories)
    row = {"cpu_s": cpu, "users_per_s": n / cpu, "wall_s": wall, "users_per_s_wall": n / wall, "users": n}
    print(f"{name:52s} cpu {cpu:8.2f}s  users/s {n / cpu:7.2f}  wall {wall:8.2f}s")
    return torch.cat(outs), row


def shipped_rows(codes: np.ndarray, sizes: tuple[int, ...], n_items: int, histories: np.ndarray,
                 ns: argparse.Namespace) -> tuple[dict[str, dict[str, float]], dict[str, Any]]:
    """Exact scoring on the shipped TIGER, prefix re-run against cached K/V, without and with TrieRec."""
    rows: dict[str, dict[str, float]] = {}
    info: dict[str, Any] = {"config": "configs/tiger_ml100k.yaml", "max_abs_diff": {}, "speedup": {}}
    for trierec in (False, True):
        model = shipped_tiger(codes, sizes, n_items, trierec, ns.seed)
        label = "shipped TIGER" + (" + TrieRec" if trierec else "")
        run_shipped("warm-up", model, histories[:8], ns.batch, cached=True)
        before, rows[f"exact, {label}, prefix re-run (before)"] = run_shipped(
            f"exact, {label}, prefix re-run (before)", model, histories, ns.batch, cached=False)
        after, rows[f"exact, {label}, cached K/V (ours)"] = run_shipped(
            f"exact, {label}, cached K/V (ours)", model, histories, ns.batch, cached=True)
        info["max_abs_diff"][label] = float((after[:, 1:] - before[:, 1:]).abs().max())
        info["speedup"][label] = (rows[f"exact, {label}, cached K/V (ours)"]["users_per_s"]
                                  / rows[f"exact, {label}, prefix re-run (before)"]["users_per_s"])
        info["model"] = {key: getattr(model.backbone, key) for key in ("dim", "n_layers", "n_heads", "inner",
                                                                       "window")}
    return rows, info


# ------------------------------------------------------------------------------------------------ main
class FreeScorer:
    """A scorer that costs (almost) nothing: fixed random logits ``[B, M, C_l]`` sliced per call.

    It isolates the decoding machinery; both beam searches get identical logits, so identical results.
    """

    def __init__(self, sizes: tuple[int, ...], users: int, beam: int, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.tables = [torch.randn(users, beam, c, generator=gen) for c in sizes]

    def context(self, history: Tensor) -> Tensor:
        return history

    def step(self, state: Tensor, prefix: Tensor) -> Tensor:
        b, m, lvl = prefix.shape
        return self.tables[lvl][:b, :m]


def run(name: str, fn: Callable[[Any, Tensor, int], Any], model: SmallTiger | FreeScorer,
        histories: np.ndarray, batch: int, repeats: int = 1) -> tuple[list[Any], dict[str, float]]:
    """Run ``fn(step, state, n)`` over user batches; the repeat with the least CPU time is reported."""
    best: dict[str, float] | None = None
    for _ in range(repeats):
        timed = Timed(model.step)
        encode, outs = np.zeros(2), []
        t0 = clock()
        for start in range(0, len(histories), batch):
            h = torch.as_tensor(histories[start:start + batch])
            t1 = clock()
            state = model.context(h)
            encode += clock() - t1
            outs.append(fn(timed, state, len(h)))
        (wall, cpu), n = clock() - t0, len(histories)
        row = {"cpu_s": cpu, "users_per_s": n / cpu, "scorer_cpu_s": timed.seconds[1],
               "encode_cpu_s": encode[1], "overhead_cpu_s": cpu - timed.seconds[1] - encode[1],
               "wall_s": wall, "users_per_s_wall": n / wall, "repeats": repeats}
        best = row if best is None or cpu < best["cpu_s"] else best
    print(f"{name:36s} cpu {best['cpu_s']:8.2f}s  users/s {best['users_per_s']:9.1f}  scorer "
          f"{best['scorer_cpu_s']:7.2f}s  encode {best['encode_cpu_s']:5.2f}s  overhead "
          f"{best['overhead_cpu_s']:7.3f}s  wall {best['wall_s']:8.2f}s")
    return outs, best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=None, help="first N test users (default: all)")
    parser.add_argument("--codes", choices=["auto", "random"], default="auto")
    parser.add_argument("--beam", type=int, default=20)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--batch", type=int, default=128, help="users per batch")
    parser.add_argument("--history", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-rows", type=int, default=16384, help="exact_scores max_rows")
    parser.add_argument("--ref-users", type=int, default=128,
                        help="users for the slow per-item exact reference (0 = all)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the beam rows (best kept)")
    parser.add_argument("--shipped-users", type=int, default=256,
                        help="users for the shipped-TIGER exact-scoring rows (0 = all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true")
    ns = parser.parse_args(argv)
    torch.set_num_threads(ns.threads)
    torch.manual_seed(ns.seed)
    inter, users, histories = load_users(ns.users, ns.history)
    t0 = time.perf_counter()
    codes, sizes, code_info = make_codes(inter, ns.codes, ns.seed)
    codes_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    trie = SIDTrie.from_codes(codes, sizes)
    trie_s = time.perf_counter() - t0
    root, path_item = dict_trie(codes)
    model = SmallTiger(codes, sizes, ns.history).eval()
    print(f"{len(users)} users, {inter.n_items} items, {trie}, codes: {code_info['codes']}")
    ct = torch.as_tensor(codes)
    rows: dict[str, dict[str, float]] = {}
    with torch.inference_mode():
        def ours_beam(step: Any, state: Any, n: int) -> Any:
            return beam_search(trie, step, state, k=ns.k, beam=ns.beam, batch_size=n)

        run("warm-up", ours_beam, model, histories[:ns.batch], ns.batch)
        ours, rows["beam, trie (ours)"] = run("beam, trie (ours)", ours_beam, model, histories, ns.batch,
                                              ns.repeats)
        ref, rows["beam, per-beam Python (HF-style)"] = run(
            "beam, per-beam Python (HF-style)",
            lambda s, st, n: reference_beam_search(root, path_item, s, st, n, sizes, trie.n_nodes, ns.k,
                                                   ns.beam),
            model, histories, ns.batch, ns.repeats)
        ex, rows["exact, trie walk (ours)"] = run(
            "exact, trie walk (ours)",
            lambda s, st, n: exact_scores(trie, s, st, batch_size=n, max_rows=ns.max_rows),
            model, histories, ns.batch)
        free = FreeScorer(sizes, ns.batch, ns.beam, ns.seed)
        free_ours, rows["beam, trie (ours), free scorer"] = run(
            "beam, trie (ours), free scorer", ours_beam, free, histories, ns.batch, ns.repeats)
        free_ref, rows["beam, per-beam Python, free scorer"] = run(
            "beam, per-beam Python, free scorer",
            lambda s, st, n: reference_beam_search(root, path_item, s, st, n, sizes, trie.n_nodes, ns.k,
                                                   ns.beam),
            free, histories, ns.batch, ns.repeats)
        n_ref = min(ns.ref_users or len(users), len(users))
        naive, rows["exact, per-item paths"] = run(
            "exact, per-item paths", lambda s, st, n: per_item_exact(ct, s, st, n, sizes), model,
            histories[:n_ref], ns.batch)
        n_shipped = min(ns.shipped_users or len(users), len(users))
        shipped, shipped_info = shipped_rows(codes, sizes, inter.n_items, histories[:n_shipped], ns)
    items = torch.cat([o.items for o in ours])
    logp = torch.cat([o.log_probs for o in ours])
    ref_items, ref_logp = torch.cat([r[0] for r in ref]), torch.cat([r[1] for r in ref])
    exact, naive = torch.cat(ex), torch.cat(naive)
    exact_top = exact.topk(ns.k, dim=1).indices
    checks = {
        "beam_items_equal_reference": bool(torch.equal(items, ref_items)),
        "free_scorer_beam_items_equal_reference": bool(torch.equal(torch.cat([o.items for o in free_ours]),
                                                                   torch.cat([r[0] for r in free_ref]))),
        "beam_max_abs_diff_vs_reference": float((logp - ref_logp).abs().max()),
        "exact_max_abs_diff_vs_per_item": float((exact[:n_ref, 1:] - naive[:, 1:]).abs().max()),
        "beam_vs_exact_score_max_abs_diff": float((logp - exact.gather(1, items)).abs().max()),
        "beam_top_k_equals_exact_top_k_share": float((items == exact_top).all(1).float().mean()),
        "beam_recall_of_exact_top_k": float(np.mean([len(set(a) & set(b)) / ns.k
                                                     for a, b in zip(items.tolist(), exact_top.tolist())])),
    }
    print(checks)
    checks["shipped_cached_vs_prefix_max_abs_diff"] = max(shipped_info["max_abs_diff"].values())
    if (not checks["beam_items_equal_reference"] or not checks["free_scorer_beam_items_equal_reference"]
            or checks["exact_max_abs_diff_vs_per_item"] > 1e-3
            or checks["shipped_cached_vs_prefix_max_abs_diff"] > 1e-4):
        raise SystemExit("decoding benchmark: implementations disagree (see checks above)")
    ours_b, ref_b = rows["beam, trie (ours)"], rows["beam, per-beam Python (HF-style)"]
    speed = {
        "beam_end_to_end": ref_b["cpu_s"] / ours_b["cpu_s"],
        "beam_overhead": ref_b["overhead_cpu_s"] / ours_b["overhead_cpu_s"],
        "beam_free_scorer": rows["beam, per-beam Python, free scorer"]["cpu_s"]
        / rows["beam, trie (ours), free scorer"]["cpu_s"],
        "exact_users_per_s": rows["exact, trie walk (ours)"]["users_per_s"]
        / rows["exact, per-item paths"]["users_per_s"],
    }
    for label, value in shipped_info["speedup"].items():
        speed[f"exact_cached_vs_prefix, {label}"] = value
    speed = {key: float(v) for key, v in speed.items()}
    print({key: round(v, 1) for key, v in speed.items()})
    hyp = {"beam": 1 + sum(min(ns.beam, n) for n in trie.n_nodes[1:-1]), "exact_trie": sum(trie.n_nodes[:-1]),
           "exact_per_item": len(sizes) * trie.n_items}  # scored hypotheses per user
    shipped_info["decoder_tokens_per_user"] = {  # TIGER: [start, c_1..c_l] per depth-l node
        "prefix re-run": sum((level + 1) * n for level, n in enumerate(trie.n_nodes[:-1])),
        "cached K/V": sum(trie.n_nodes[:-1])}
    given = argv if argv is not None else sys.argv[1:]
    payload = {
        "command": " ".join(["python -m benchmarks.decoding", *(a for a in given if a != "--no-write")]),
        "args": vars(ns), "n_users": len(users), "n_items": int(inter.n_items), "codebook_sizes": list(sizes),
        "n_nodes": list(trie.n_nodes), "code_table": code_info, "code_table_seconds": codes_s,
        "trie_build_seconds": trie_s, "trie_memory_bytes": trie.memory_bytes(),
        "data_fingerprint": inter.fingerprint, "scorer": "SmallTiger d=64, 2 heads, FFN 128, 1 encoder + 2 "
        "decoder layers, random init", "scored_hypotheses": hyp, "rows": rows, "speedup": speed,
        "checks": checks, "ref_users": n_ref, "shipped_rows": shipped, "shipped": shipped_info,
    }
    md = render(payload, ns)
    print(md)
    if not ns.no_write:
        write_results("decoding", payload, md)
    return 0


def render(p: dict[str, Any], ns: argparse.Namespace) -> str:
    """Markdown table of the payload."""
    lines = [f"## Trie-constrained decoding on ML-100K ({p['n_users']} test users, {p['n_items']} items)", "",
             f"Codes: {p['code_table']['codes']}"
             + (f" on {p['code_table']['features']} features" if "features" in p["code_table"] else "")
             + f"; codebook sizes {tuple(p['codebook_sizes'])}, trie nodes per depth {tuple(p['n_nodes'])}. "
             f"Scorer: {p['scorer']}. Beam {ns.beam}, top-{ns.k}, {ns.batch} users per batch, "
             f"{ns.threads} torch thread(s), CPU. Command: `{p['command']}`.", "",
             "| implementation | users | CPU s | users/s | scorer s | encode s | overhead s | wall s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in p["rows"].items():
        n = p["ref_users"] if name == "exact, per-item paths" else p["n_users"]
        lines.append(f"| {name} | {n} | {r['cpu_s']:.2f} | {r['users_per_s']:.1f} | "
                     f"{r['scorer_cpu_s']:.2f} | {r['encode_cpu_s']:.2f} | {r['overhead_cpu_s']:.3f} | "
                     f"{r['wall_s']:.2f} |")
    lines += ["", "Times are process CPU seconds (one torch thread; the machine is shared, so wall time, "
              "also shown, includes waiting for a core); users/s = users / CPU s; overhead = CPU s - scorer "
              "- encode."]
    s, c = p["speedup"], p["checks"]
    lines += ["", f"Speedup of the trie beam search over the per-beam Python reference: "
              f"**{s['beam_overhead']:.0f}x** on the decoding overhead (CPU s - scorer - encoding), "
              f"{s['beam_end_to_end']:.1f}x end to end, **{s['beam_free_scorer']:.0f}x** with a free scorer "
              "(fixed logits: the decoding machinery alone). Exact trie walk over per-item paths: "
              f"{s['exact_users_per_s']:.1f}x in users/s (reference on the first {p['ref_users']} users; "
              f"{p['scored_hypotheses']['exact_trie']:,} vs {p['scored_hypotheses']['exact_per_item']:,} "
              "scored hypotheses per user).", "",
              f"Checks: beam items equal the reference's: {c['beam_items_equal_reference']} "
              f"(max |score diff| {c['beam_max_abs_diff_vs_reference']:.1e}); exact scores vs per-item "
              f"paths max |diff| {c['exact_max_abs_diff_vs_per_item']:.1e}; beam scores vs exact scores of "
              f"the same items {c['beam_vs_exact_score_max_abs_diff']:.1e}; users whose beam top-{ns.k} "
              f"equals the exact top-{ns.k}: {100 * c['beam_top_k_equals_exact_top_k_share']:.1f}% (recall "
              f"{c['beam_recall_of_exact_top_k']:.3f}; untrained scorer, beam {ns.beam} < full beam "
              f"{max(p['n_nodes'][1:-1])}).", ""]
    sh = p["shipped"]
    m = sh["model"]
    tokens = sh["decoder_tokens_per_user"]
    lines += ["### Exact scoring on the shipped TIGER (`recframe.models.generative.TIGER`)", "",
              f"Sizes of `{sh['config']}` (d={m['dim']}, {m['n_layers']} encoder + {m['n_layers']} decoder "
              f"layers, {m['n_heads']} heads, FFN {m['inner']}, window {m['window']}), random init, the same "
              f"code table; `model.score(batch)` including the history encoding, {ns.batch} users per batch, "
              f"{ns.threads} torch thread(s).", "",
              "| implementation | users | CPU s | users/s | wall s | speedup |",
              "|---|---:|---:|---:|---:|---:|"]
    for name, r in p["shipped_rows"].items():
        label = name.split(", ")[1]
        speed = f"**{sh['speedup'][label]:.1f}x**" if "cached" in name else ""
        lines.append(f"| {name} | {r['users']} | {r['cpu_s']:.2f} | {r['users_per_s']:.2f} | "
                     f"{r['wall_s']:.2f} | {speed} |")
    diffs = ", ".join(f"{k} {v:.1e}" for k, v in sh["max_abs_diff"].items())
    lines += ["", f"Decoder tokens per user: {tokens['prefix re-run']:,} with the prefix re-run, "
              f"{tokens['cached K/V']:,} with cached keys/values "
              f"({tokens['prefix re-run'] / tokens['cached K/V']:.2f}x fewer). Cached vs re-run scores, max "
              f"|diff|: {diffs}.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
