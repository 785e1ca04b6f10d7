"""Semantic-ID tokenizers on ML-100K item text embeddings: usage, perplexity, collisions, fit time.

Run (needs ML-100K prepared: ``recframe data prepare ml-100k``)::

    python -m benchmarks.tokenizer_stats                  # full run (a few minutes, mostly RQ-VAE)
    python -m benchmarks.tokenizer_stats --vae-epochs 20 --no-write   # smoke run

Features: ``item_content_features`` of the 1682 items -- all-MiniLM-L6-v2 embeddings (384-d,
unit norm) of ``"title (year); genres"``, cached under ``<dataset root>/.cache/item_text``
(``--encoder none`` uses the non-text fallback features instead).

Tokenizers (seed 0):

* RQ-KMeans 3 x 64 (plain and balanced) -- the headline size. TIGER's 3 x 256 was sized for
  catalogues of 10^4-10^5 items; with 1682 items a 256-code first level averages 6.6 items per code,
  so the first token already nearly identifies the item and the later levels have little left
  to refine. 3 x 64 gives ~26 items per first-level code and 64^3 = 262k paths, ample for unique
  IDs with a short disambiguation level. RQ-KMeans 3 x 256 is included for comparison.
* RQ-VAE 3 x 64, TIGER's architecture (384 -> 512 -> 256 -> 128 -> 32, beta 0.25, k-means init),
  Adam lr 1e-3, ``--vae-epochs`` (default 300) epochs of batch 256, one torch thread.
* SimHash 3 levels x 8 bits (256 codes per level; FLASH-style), centred (the default) and
  textbook (``center=False``).

Reported per tokenizer: codebook usage and perplexity per semantic level, collision rate (items
sharing their full pre-disambiguation path), size of the disambiguation level (0 = none needed),
number of distinct paths, mean squared reconstruction error where the tokenizer reconstructs,
fit seconds, and a semantic check: the fraction of item pairs with the same first-level code that
share at least one genre (beside the same fraction over all item pairs).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from typing import Any

import numpy as np

from benchmarks.common import write_results
from recframe.data import catalog
from recframe.features import item_content_features
from recframe.tokenizers import RQKMeansTokenizer, RQVAETokenizer, SIDTable, SIDTokenizer, SimHashTokenizer


def tokenizers(seed: int, vae_epochs: int) -> dict[str, SIDTokenizer]:
    """The tokenizers compared, by row label."""
    return {
        "RQ-KMeans 3x64": RQKMeansTokenizer(3, 64, seed=seed),
        "RQ-KMeans 3x64 balanced": RQKMeansTokenizer(3, 64, balanced=True, seed=seed),
        "RQ-KMeans 3x256 (TIGER size)": RQKMeansTokenizer(3, 256, seed=seed),
        "RQ-VAE 3x64": RQVAETokenizer(3, 64, epochs=vae_epochs, seed=seed, device="cpu"),
        "SimHash 3x8 bits, centred": SimHashTokenizer(3, 8, center=True, seed=seed),
        "SimHash 3x8 bits, textbook": SimHashTokenizer(3, 8, center=False, seed=seed),
    }


def genre_sets(categories: list[list[str]]) -> np.ndarray:
    """Multi-hot genre matrix of the real items (row 0 dropped), bool."""
    names = sorted({c for cats in categories for c in cats})
    col = {c: j for j, c in enumerate(names)}
    out = np.zeros((len(categories) - 1, len(names)), dtype=bool)
    for i, cats in enumerate(categories[1:]):
        out[i, [col[c] for c in cats]] = True
    return out


def share_genre_rate(genres: np.ndarray, groups: np.ndarray | None = None) -> float:
    """Fraction of item pairs (within the same group, or all pairs) sharing at least one genre."""
    g = genres.astype(np.float64)
    shared = (g @ g.T) > 0
    same = np.ones_like(shared) if groups is None else groups[:, None] == groups[None, :]
    np.fill_diagonal(same, False)
    return float(shared[same].mean())


def describe(table: SIDTable, genres: np.ndarray) -> dict[str, Any]:
    """One result row from a fitted table."""
    s = table.stats
    recon = s.get("residual_mse", [None])[-1] if "residual_mse" in s else s.get("reconstruction_mse")
    return {"codebook_sizes": list(table.codebook_sizes[:table.semantic_depth]),
            "codebook_usage": s["codebook_usage"], "perplexity": s["perplexity"],
            "collision_rate": s["collision_rate"], "disambiguation_size": s["disambiguation_size"],
            "depth": table.depth, "n_unique_paths": s["n_unique_paths"], "reconstruction_mse": recon,
            "fit_seconds": s["fit_seconds"],
            "same_l1_share_genre": share_genre_rate(genres, table.codes[1:, 0]),
            "sid_fingerprint": table.fingerprint}


def markdown(rows: dict[str, dict[str, Any]], meta: dict[str, Any]) -> str:
    """The results table with its provenance line and column notes."""
    fmt = lambda vals, p: " / ".join(f"{v:.{p}f}" for v in vals)  # noqa: E731
    lines = [
        f"## Semantic-ID tokenizers on ML-100K item text ({meta['n_items']} items, {meta['encoder']} "
        f"features, d={meta['dim']})", "",
        f"Command: `{meta['command']}` (total wall time {meta['wall_seconds']:.0f} s, seed {meta['seed']}). "
        f"Features sha256 {meta['features_sha256'][:16]}. Pairs sharing a genre over all item pairs: "
        f"{meta['share_genre_all_pairs']:.3f}.", "",
        "| tokenizer | codes/level | usage per level | perplexity per level | collision rate | "
        "disamb. size | unique paths | recon. MSE | same-L1 share genre | fit s |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        recon = "-" if r["reconstruction_mse"] is None else f"{r['reconstruction_mse']:.3f}"
        lines.append(
            f"| {name} | {' x '.join(map(str, r['codebook_sizes']))} | {fmt(r['codebook_usage'], 2)} | "
            f"{fmt(r['perplexity'], 1)} | {r['collision_rate']:.3f} | {r['disambiguation_size']} | "
            f"{r['n_unique_paths']} | {recon} | {r['same_l1_share_genre']:.3f} | {r['fit_seconds']:.1f} |")
    lines += ["", "usage: fraction of a level's codes used; perplexity: exp(entropy) of a level's code "
              "distribution (max = codes per level); collision rate: fraction of items whose full path is "
              "shared before disambiguation; disamb. size: codes of the appended disambiguation level (0 = "
              "none needed); recon. MSE: mean squared error of the reconstructed embedding (RQ-KMeans: sum "
              "of centroids; RQ-VAE: decoder output); same-L1 share genre: fraction of item pairs with the "
              "same first-level code that share a genre. Fit times on a shared 2-core CPU.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoder", default="all-MiniLM-L6-v2", help="item text encoder, or 'none'")
    parser.add_argument("--vae-epochs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--root", default=None, help="dataset root (default $RECFRAME_DATA or datasets)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    items = catalog.load("ml-100k", args.root).item_features
    x = item_content_features(items, encoder=args.encoder)
    genres = genre_sets(items.categories)
    rows = {}
    for name, tok in tokenizers(args.seed, args.vae_epochs).items():
        rows[name] = describe(tok.fit(x), genres)
        rows[name]["settings"] = tok.get_settings()
        print(f"{name}: {rows[name]['fit_seconds']:.1f} s, collision rate {rows[name]['collision_rate']:.3f}",
              flush=True)
    given = sys.argv[1:] if argv is None else argv
    meta = {"command": " ".join(["python -m benchmarks.tokenizer_stats", *given]),
            "seed": args.seed, "encoder": args.encoder, "n_items": int(len(x) - 1), "dim": int(x.shape[1]),
            "features_sha256": hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest(),
            "share_genre_all_pairs": share_genre_rate(genres), "vae_epochs": args.vae_epochs,
            "wall_seconds": time.perf_counter() - start}
    md = markdown(rows, meta)
    print(md)
    if not args.no_write:
        write_results("tokenizer_stats", {**meta, "rows": rows}, md)
    return {**meta, "rows": rows}


if __name__ == "__main__":
    main()
