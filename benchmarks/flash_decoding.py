"""FLASH's one-gather ranking against TIGER's trie-constrained beam search, end to end (model included).

Run (ML-100K test users; smoke: ``--users 64 --no-write``)::

    python -m benchmarks.flash_decoding
    python -m benchmarks.flash_decoding --users 64 --no-write

Setup (it extends ``benchmarks/decoding.py`` and reuses its data and timing helpers). ML-100K leave-one-out
test users with their last ``--history`` items; one SimHash SID table (4 codebooks x 8 bits + the
disambiguation level, over the same item content features as ``decoding.py``) shared by both models, so the
comparison is decoding alone. Models are the shipped classes at random init (speed does not depend on the
weights):

* ``TIGER``, sized as ``configs/tiger_simhash_ml100k.yaml`` (d = 64, 2 encoder + 2 decoder layers, 4 heads,
  FFN 256), ranking by :meth:`TIGER.generate` (trie-constrained beam search, beam 20, top 10) and, for
  reference, by exact scoring of the whole catalogue (:meth:`TIGER.score`, cached K/V);
* ``FLASH`` with the same width, heads and FFN, once with 2 layers (its config) and once with 4 (the same
  total depth as TIGER's encoder + decoder), ranking the whole catalogue with :meth:`FLASH.score` (one gather
  per head) plus a top-10.

Every timing covers the whole call on a batch of ``--batch`` users (history encoding included), in
``torch.inference_mode`` with ``--threads`` threads; CPU time of the process is the measure (wall time is
reported too), best of ``--repeats``. The ratio is FLASH's users/s over beam search's. Writes
``benchmarks/results/flash_decoding.{json,md}``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from benchmarks.common import write_results
from benchmarks.decoding import clock, load_users, text_encoder
from recframe.models.generative import FLASH, TIGER
from recframe.tokenizers import SimHashTokenizer

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def simhash_codes(inter: Any, seed: int) -> tuple[np.ndarray, tuple[int, ...], str]:
    """FLASH's SID table (4 x 8 bits) over the item content features, and which features were used."""
    from recframe.features.item_content import item_content_features

    encoder, label = text_encoder()
    table = SimHashTokenizer(n_levels=4, bits_per_level=8, seed=seed).fit(
        item_content_features(inter.item_features, encoder=encoder))
    return np.array(table.codes), tuple(table.codebook_sizes), label


def model_sizes(config: str) -> dict[str, Any]:
    """The width/depth settings of a config's model."""
    init = yaml.safe_load((CONFIGS / config).read_text())["model"]["init_args"]
    return {key: init[key] for key in ("dim", "n_layers", "n_heads", "inner") if key in init}


def timed(fn: Any, histories: np.ndarray, batch: int, repeats: int) -> dict[str, float]:
    """Best-of-``repeats`` CPU and wall time of ``fn(history_batch)`` over all users."""
    best: dict[str, float] | None = None
    for _ in range(repeats):
        t0 = clock()
        for start in range(0, len(histories), batch):
            fn(torch.as_tensor(histories[start:start + batch]))
        wall, cpu = clock() - t0
        n = len(histories)
        row = {"cpu_s": float(cpu), "wall_s": float(wall), "users": n, "users_per_s": n / cpu,
               "users_per_s_wall": n / wall}
        if best is None or row["cpu_s"] < best["cpu_s"]:
            best = row
    assert best is not None
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=None, help="test users (default: all)")
    parser.add_argument("--history", type=int, default=50)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--beam", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true")
    ns = parser.parse_args(argv)
    torch.set_num_threads(ns.threads)
    inter, users, histories = load_users(ns.users, ns.history)
    codes, sizes, features = simhash_codes(inter, ns.seed)
    n_items = inter.n_items

    tiger_kw = model_sizes("tiger_simhash_ml100k.yaml")
    torch.manual_seed(ns.seed)
    tiger = TIGER(n_items=n_items, max_len=ns.history, **tiger_kw)
    tiger.build_backbone(codes, sizes)
    tiger.eval()
    flash_kw = model_sizes("flash_ml100k.yaml")
    flashes = {}
    for depth in (flash_kw["n_layers"], 2 * tiger_kw["n_layers"]):
        torch.manual_seed(ns.seed)
        model = FLASH(n_items=n_items, max_len=ns.history, **{**flash_kw, "dim": tiger_kw["dim"],
                      "n_heads": tiger_kw["n_heads"], "inner": tiger_kw["inner"], "n_layers": depth})
        model.build_heads(codes, sizes)
        flashes[depth] = model.eval()

    rows: dict[str, dict[str, float]] = {}
    with torch.inference_mode():
        warm = histories[: min(8, len(histories))]
        tiger.generate(torch.as_tensor(warm), k=10, beam=ns.beam)
        rows[f"TIGER, beam search (beam {ns.beam}, top 10)"] = timed(
            lambda h: tiger.generate(h, k=10, beam=ns.beam), histories, ns.batch, ns.repeats)
        rows["TIGER, exact scoring of every item (cached K/V)"] = timed(
            lambda h: tiger.score({"history": h}), histories, ns.batch, 1)
        for depth, model in flashes.items():
            model.score({"history": torch.as_tensor(warm)})
            rows[f"FLASH ({depth} layers), every item in one gather + top 10"] = timed(
                lambda h, m=model: torch.topk(m.score({"history": h}), 10), histories, ns.batch, ns.repeats)
    beam_row = rows[f"TIGER, beam search (beam {ns.beam}, top 10)"]
    ratios = {name: row["users_per_s"] / beam_row["users_per_s"] for name, row in rows.items()}
    lines = ["# FLASH's parallel decoding against TIGER's beam search (ML-100K, end to end)", "",
             f"{len(histories)} test users, history {ns.history}, batches of {ns.batch}, "
             f"{ns.threads} thread(s); "
             f"one SimHash table (4 x 8 bits + disambiguation, sizes {list(sizes)}; features: {features}); "
             "random-init shipped models; best of "
             f"{ns.repeats} runs (CPU time). `python -m benchmarks.flash_decoding`.", "",
             "| ranking | users/s (CPU) | users/s (wall) | vs beam search |", "|---|---|---|---|"]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['users_per_s']:.1f} | {row['users_per_s_wall']:.1f} | "
                     f"x{ratios[name]:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not ns.no_write:
        write_results("flash_decoding", {"rows": rows, "ratio_vs_beam": ratios, "sizes": list(sizes),
                                         "features": features, "args": vars(ns),
                                         "tiger": tiger_kw, "flash": flash_kw}, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
