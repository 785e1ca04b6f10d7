"""CAE of "the recommendations depend on the history only through its genre histogram" on ML-100K.

Run (after ``recframe data prepare ml-100k``)::

    python -m benchmarks.cae_recommender                    # trains SASRec from configs/sasrec_ml100k.yaml
    python -m benchmarks.cae_recommender --ckpt runs/.../best-....ckpt   # reuses a trained SASRec

The real-data run of :class:`causal_ext.abstraction.callback.GenreHistogramCAE`. Four history models are
tested on the leave-one-out test users, each with the callback attached to ``trainer.test``:

* two **calibration** models whose answer is known by construction
  (:class:`causal_ext.abstraction.reference_models.GenreScorer`): one ranks items by the history's genre
  histogram (the explanation is true: CAE must be 0), one by the last item's genre only (false: CAE > 0);
* **SASRec** trained on ML-100K (best-validation checkpoint) and the same network untrained (its initial
  weights), to see how far training moves the model from, or towards, the explanation.

The genre of an item is its first ML-100K genre (the 8 most frequent kept, the rest pooled as ``other``); the
prediction is the genre mix of the top-10 (seen items masked). 30 interventions per direction (the abstract's
number, confirmed by ``benchmarks/cae_systems.py``), 512 test histories. Writes
``benchmarks/results/cae_recommender.{json,md}``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import lightning as L

from benchmarks.common import fit_and_test, write_results
from causal_ext.abstraction.callback import GenreHistogramCAE, primary_genres
from causal_ext.abstraction.reference_models import GenreScorer
from recframe.checkpoint_io import AtomicCheckpointIO
from recframe.cli import run_cli

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "sasrec_ml100k.yaml"
DISTANCES = ["mse", "js", "mmd"]


def cae_of(model: L.LightningModule, dm: Any, ns: argparse.Namespace,
           ckpt: str | None = None) -> dict[str, Any]:
    """Test ``model`` on ``dm`` with the callback attached; its report plus the test NDCG@10 and seconds."""
    cb = GenreHistogramCAE(n_interventions=ns.interventions, top_k=10, distances=DISTANCES,
                           max_histories=ns.histories, seed=ns.seed)
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[cb], plugins=[AtomicCheckpointIO()])
    start = time.perf_counter()
    metrics = trainer.test(model, dm, ckpt_path=ckpt, verbose=False)[0]
    return {**cb.report_, "test_ndcg@10": metrics["test/ndcg@10"], "seconds": time.perf_counter() - start}


def render(rows: dict[str, dict[str, Any]], command: str) -> str:
    """Markdown: CAE per distance and direction (± standard error) and test NDCG@10, one row per model."""
    head = ["model", "expected", "test NDCG@10"] + [f"CAE {d} {arrow}" for d in DISTANCES for arrow in "↓↑"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|---:|" + "---:|" * (2 * len(DISTANCES))]
    for name, r in rows.items():
        cells = [f"{r['scores'][direction][d]:.3f} ± {r['se'][direction][d]:.3f}"
                 for d in DISTANCES for direction in ("top_down", "bottom_up")]
        lines.append(f"| {name} | {r['expected']} | {r['test_ndcg@10']:.4f} | " + " | ".join(cells) + " |")
    any_row = next(iter(rows.values()))
    return ("## CAE of the genre-histogram explanation of recommenders on ML-100K\n\n"
            f"Command: `{command}`. Explanation: *{any_row['explanation']}*. ↓ top-down (a test user's "
            "histogram, realised by a random history), ↑ bottom-up (test users' own histories); ± standard "
            f"error over interventions. {any_row['n_histories']} test histories (mean length "
            f"{any_row['mean_history_length']:.1f}), {any_row['n_interventions']} interventions per "
            f"direction, top-{any_row['top_k']} genre mix over {len(any_row['genres'])} genres "
            f"({', '.join(any_row['genres'])}).\n\n" + "\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", default=None, help="a trained SASRec checkpoint of "
                        "configs/sasrec_ml100k.yaml (default: train one first, about 5 minutes)")
    parser.add_argument("--interventions", type=int, default=30)
    parser.add_argument("--histories", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args(argv)
    ckpt, trained = ns.ckpt, None
    if ckpt is None:
        trained = fit_and_test(CONFIG, ["--trainer.logger.init_args.name", "cae_recommender_sasrec"])
        ckpt = trained["best_checkpoint"]
    cli = run_cli(["--config", str(CONFIG), "--trainer.logger", "false"], run=False)
    dm, sasrec = cli.datamodule, cli.model
    dm.setup("test")
    genre, _ = primary_genres(dm.split.train.item_features, dm.n_items)
    rows = {
        "GenreScorer, reads the histogram": {**cae_of(GenreScorer(genre, "histogram"), dm, ns),
                                             "expected": "0 (true by construction, up to seen-item masking)"},
        "GenreScorer, reads the last item": {**cae_of(GenreScorer(genre, "last"), dm, ns),
                                             "expected": "> 0 (false by construction)"},
        "SASRec, untrained (initial weights)": {**cae_of(sasrec, dm, ns), "expected": "unknown"},
        "SASRec, trained (best validation)": {**cae_of(sasrec, dm, ns, ckpt=str(ckpt)),
                                              "expected": "unknown"},
    }
    command = "python -m benchmarks.cae_recommender" + (f" --ckpt {ns.ckpt}" if ns.ckpt else "")
    js, md = write_results("cae_recommender", {"command": command, "checkpoint": str(ckpt),
                                               "sasrec_fit": trained, "rows": rows}, render(rows, command))
    print(md.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
