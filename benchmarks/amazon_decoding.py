"""Decoding speed at a 12k-18k-item catalogue: FLASH's one-gather ranking against TIGER's beam search and
TIGER's cached exact scoring, end to end on Amazon Beauty's and Sports' catalogues (issue 34, item 5).

Run (after ``recframe data prepare amazon-beauty`` and ``amazon-sports``)::

    python -m benchmarks.amazon_decoding                       # Beauty and Sports, 1 thread (~5-10 minutes)
    python -m benchmarks.amazon_decoding --datasets beauty --users 64 --exact-users 4 --no-write   # smoke

Setup (``benchmarks/flash_decoding.py``'s, on these catalogues). Users: a fixed random sample (seed
``--seed``) of the dataset's leave-one-out test users, each with the last ``--history`` items before the test
item. Item IDs: each model's own table as its Amazon config builds it, over the item attributes (the
multi-hot of ``features: none``; these data have no text): TIGER's RQ-KMeans 3 x 64 + disambiguation
(``configs/amazon/tiger_<dataset>.yaml``), FLASH's SimHash 4 x 8 bits + disambiguation
(``configs/amazon/flash_<dataset>.yaml``). Models are the shipped classes at random initialisation (speed
does not depend on the weights, only on the sizes and the tables):

* ``TIGER`` sized as its Amazon config (width 64, 2 encoder + 2 decoder layers, 4 heads, FFN 256, one token
  per history item, softmax over valid codes), ranking by :meth:`TIGER.generate` (trie-constrained beam
  search, beam ``--beam``, top 10), by the validation's beam search (:meth:`TIGER.beam_scores`, beam 50: the
  Amazon configs' model selection), and by exact scoring of the whole catalogue (:meth:`TIGER.score`, cached
  K/V) on the first ``--exact-users`` users; for reference also with ``L`` code tokens per history item
  and a softmax over the whole codebook (``history_tokens: codes``, ``normalize: codebook``: the layout
  ``benchmarks/flash_decoding.py`` timed on ML-100K, which takes only the sizes from the config);
* ``FLASH`` with TIGER's width, heads and FFN (the same backbone size), once with 2 layers (its config's
  depth) and once with 4 (TIGER's encoder + decoder depth), ranking every item with :meth:`FLASH.score` (one
  gather per head) plus a top 10.

Every timing covers the whole call on a batch of ``--batch`` users (history encoding included), in
``torch.inference_mode`` on the CPU with ``--threads`` threads; the measure is the process's CPU time (wall
time is reported too; the machine may be shared), best of ``--repeats``. The ratio is a row's users/s over
TIGER's beam search (beam ``--beam``). Writes ``benchmarks/results/amazon_decoding.{json,md}`` with the
device.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from benchmarks.common import write_results
from benchmarks.flash_decoding import timed
from recframe.models.generative import FLASH, TIGER

CONFIGS = Path(__file__).resolve().parent.parent / "configs" / "amazon"
DATASETS = {"beauty": "Beauty", "sports": "Sports and Outdoors", "toys": "Toys and Games"}
#: TIGER settings taken from its config (the rest: validation, optimiser, features, are not inference)
TIGER_KEYS = ("dim", "n_layers", "n_heads", "inner", "dropout", "attn_dropout", "embedding_std", "normalize",
              "history_tokens")
VALIDATION_BEAM = 50


def model_init(dataset: str, stem: str) -> dict[str, Any]:
    """``model.init_args`` of ``configs/amazon/<stem>_<dataset>.yaml``."""
    return yaml.safe_load((CONFIGS / f"{stem}_{dataset}.yaml").read_text())["model"]["init_args"]


def sample_test_users(inter: Any, n_users: int | None, history: int,
                      seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A fixed random sample of leave-one-out test users (sorted) and their left-padded histories ``[U, T]``.

    A test user has at least 3 interactions (one each for training, validation, test); the history is
    everything before the last item, its last ``history`` items.
    """
    hist = inter.histories
    users = np.flatnonzero(hist.lengths() >= 3)
    if n_users is not None and n_users < len(users):
        users = np.sort(np.random.default_rng(seed).choice(users, size=n_users, replace=False))
    out = np.zeros((len(users), history), dtype=np.int64)
    for row, user in enumerate(users):
        before = hist.of(int(user))[:-1][-history:]
        out[row, history - len(before):] = before
    return users, out


def sid_table(spec: dict[str, Any], features: np.ndarray, seed: int) -> tuple[np.ndarray, tuple[int, ...]]:
    """Fit the config's tokenizer (``{class_path, init_args}``, its seed replaced by ``seed``)."""
    module, name = spec["class_path"].rsplit(".", 1)
    tokenizer = getattr(importlib.import_module(module), name)(**{**spec.get("init_args", {}), "seed": seed})
    table = tokenizer.fit(features)
    return np.array(table.codes), tuple(table.codebook_sizes)


def trie_nodes(codes: np.ndarray) -> int:
    """Distinct non-empty prefixes of the item paths (row 0, the padding item, left out)."""
    paths = codes[1:]
    return sum(len({tuple(p[:level]) for p in paths}) for level in range(1, paths.shape[1] + 1))


def measure(dataset: str, ns: argparse.Namespace) -> dict[str, Any]:
    """Every ranking's timing on one dataset's catalogue, with the tables' and models' sizes."""
    from recframe.data import catalog
    from recframe.features import item_content_features

    inter = catalog.load(f"amazon-{dataset}")
    users, histories = sample_test_users(inter, ns.users, ns.history, ns.seed)
    features = item_content_features(inter.item_features, encoder="none")  # the attribute multi-hot
    tiger_init, flash_init = model_init(dataset, "tiger"), model_init(dataset, "flash")
    tiger_codes, tiger_sizes = sid_table(tiger_init["tokenizer"], features, ns.seed)
    flash_codes, flash_sizes = sid_table(flash_init["tokenizer"], features, ns.seed)
    n_items = inter.n_items

    tiger_kw = {key: tiger_init[key] for key in TIGER_KEYS if key in tiger_init}
    torch.manual_seed(ns.seed)
    tiger = TIGER(n_items=n_items, max_len=ns.history, **tiger_kw)
    tiger.build_backbone(tiger_codes, tiger_sizes)
    tiger.eval()
    torch.manual_seed(ns.seed)  # the layout of benchmarks/flash_decoding.py's ML-100K TIGER, for reference
    tiger_codes_layout = TIGER(n_items=n_items, max_len=ns.history,
                               **{**tiger_kw, "history_tokens": "codes", "normalize": "codebook"})
    tiger_codes_layout.build_backbone(tiger_codes, tiger_sizes)
    tiger_codes_layout.eval()
    flashes = {}
    for depth in (flash_init["n_layers"], 2 * tiger_kw["n_layers"]):
        torch.manual_seed(ns.seed)
        model = FLASH(n_items=n_items, max_len=ns.history, dim=tiger_kw["dim"], n_layers=depth,
                      n_heads=tiger_kw["n_heads"], inner=tiger_kw["inner"])
        model.build_heads(flash_codes, flash_sizes)
        flashes[depth] = model.eval()

    beam_row = f"TIGER, beam search (beam {ns.beam}, top 10)"
    rankings: list[tuple[str, Callable[[torch.Tensor], Any], np.ndarray, int]] = [
        (beam_row, lambda h: tiger.generate(h, k=10, beam=ns.beam), histories, ns.repeats),
        (f"TIGER, validation beam search (beam {VALIDATION_BEAM}, its items scored exactly)",
         lambda h: tiger.beam_scores(h, VALIDATION_BEAM), histories, ns.repeats),
        ("TIGER, the same validation beam search re-running every hypothesis's whole prefix (no beam cache)",
         lambda h: tiger.beam_scores(h, VALIDATION_BEAM, cached=False), histories, ns.repeats),
        ("TIGER, exact scoring of every item (cached K/V)", lambda h: tiger.score({"history": h}),
         histories[: ns.exact_users], 1),
        (f"TIGER, code-token history (the ML-100K benchmark's layout), beam {ns.beam}, top 10",
         lambda h: tiger_codes_layout.generate(h, k=10, beam=ns.beam), histories, ns.repeats),
    ]
    for depth, model in flashes.items():
        rankings.append((f"FLASH ({depth} layers), every item in one gather + top 10",
                         lambda h, m=model: torch.topk(m.score({"history": h}), 10), histories, ns.repeats))
    rows: dict[str, dict[str, float]] = {}
    with torch.inference_mode():
        warm = torch.as_tensor(histories[: min(8, len(histories))])
        tiger.generate(warm, k=10, beam=ns.beam)
        for model in flashes.values():
            model.score({"history": warm})
        for name, fn, users_in, repeats in rankings:
            rows[name] = timed(fn, users_in, ns.batch, repeats)
            print(f"  {DATASETS[dataset]}: {name}: {rows[name]['users_per_s']:.1f} users/s (CPU)", flush=True)
    ratios = {name: row["users_per_s"] / rows[beam_row]["users_per_s"] for name, row in rows.items()}
    return {"dataset": f"amazon-{dataset}", "n_items": n_items, "test_users": len(users),
            "rows": rows, "ratio_vs_beam": ratios,
            "tiger": {**tiger_kw, "codebook_sizes": list(tiger_sizes), "trie_nodes": trie_nodes(tiger_codes)},
            "flash": {"dim": tiger_kw["dim"], "n_heads": tiger_kw["n_heads"], "inner": tiger_kw["inner"],
                      "layers": list(flashes), "codebook_sizes": list(flash_sizes)}}


def render(results: dict[str, dict[str, Any]], ns: argparse.Namespace, device: str) -> str:
    """The markdown table: one block of rows per dataset."""
    lines = ["# Decoding speed at a 12k-18k-item catalogue (Amazon, end to end)", "",
             f"{ns.users or 'all'} random test users per dataset (seed {ns.seed}; exact scoring on the first "
             f"{ns.exact_users}), history {ns.history}, batches of {ns.batch}, {ns.threads} thread(s) on "
             f"{device}; random-init shipped models of the same width, heads and FFN (64, 4, 256); each "
             "model's own table over the item attributes, as its Amazon config builds it; best of "
             f"{ns.repeats} runs, CPU time. `python -m benchmarks.amazon_decoding`.", "",
             "| dataset (items) | ranking | users/s (CPU) | users/s (wall) | vs beam search |",
             "|---|---|---:|---:|---:|"]
    for ds, res in results.items():
        label = f"{DATASETS[ds]} ({res['n_items']:,})"
        for name, row in res["rows"].items():
            lines.append(f"| {label} | {name} | {row['users_per_s']:.1f} | {row['users_per_s_wall']:.1f} | "
                         f"x{res['ratio_vs_beam'][name]:.2f} |")
    lines.append("")
    for ds, res in results.items():
        tiger, flash = res["tiger"], res["flash"]
        lines.append(f"- {DATASETS[ds]}: TIGER table {tiger['codebook_sizes']} ({tiger['trie_nodes']:,} trie "
                     f"nodes), FLASH table {flash['codebook_sizes']}.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["beauty", "sports"], choices=list(DATASETS))
    parser.add_argument("--users", type=int, default=1024, help="random test users per dataset (0: all)")
    parser.add_argument("--exact-users", type=int, default=256, help="users for TIGER's exact scoring")
    parser.add_argument("--history", type=int, default=50)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--beam", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true")
    ns = parser.parse_args(argv)
    for flag in ("users", "exact_users", "history", "batch", "beam", "repeats", "threads"):
        low = 0 if flag == "users" else 1
        if getattr(ns, flag) < low:
            parser.error(f"--{flag.replace('_', '-')} must be a whole number >= {low}; "
                         f"got {getattr(ns, flag)}.")
    ns.users = ns.users or None
    torch.set_num_threads(ns.threads)
    device = "cpu"  # every model here runs on the CPU: the users/s at one thread
    results = {ds: measure(ds, ns) for ds in ns.datasets}
    text = render(results, ns, device)
    print(text)
    if not ns.no_write:
        write_results("amazon_decoding", {"device": device, "threads": ns.threads, "args": vars(ns),
                                          "datasets": results}, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
