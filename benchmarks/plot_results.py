"""Plots of the committed benchmark results, for people who would rather look than read.

Run: ``python -m benchmarks.plot_results`` (needs matplotlib: ``pip install -e '.[dev]'``).
Reads ``benchmarks/results/ml100k_baselines_{loo,ratio}.json`` and writes
``docs/img/ml100k_baselines.png``: test NDCG@10 on leave-one-out, and on the
signed protocol conventional NDCG@10 (liked items) beside Signed NDCG@10 and
Signed Recall@10.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.common import RESULTS, save_figure

OUT = Path(__file__).resolve().parent.parent / "docs" / "img" / "ml100k_baselines.png"


def main() -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loo = json.loads((RESULTS / "ml100k_baselines_loo.json").read_text())["runs"]
    ratio = json.loads((RESULTS / "ml100k_baselines_ratio.json").read_text())["runs"]
    models = list(loo)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1, 1.6]})
    left.bar(models, [loo[m]["test"]["ndcg@10"] for m in models], color="#4c72b0")
    left.set_title("Leave-one-out: test NDCG@10")
    left.axhline(0.065, color="grey", linestyle="--", linewidth=1)
    left.text(-0.4, 0.067, "issue target for SASRec", fontsize=8, color="grey")
    width = 0.27
    series = [("ndcg@10", "NDCG@10 (liked relevant)", "#4c72b0"),
              ("signed_ndcg@10", "Signed NDCG@10", "#dd8452"),
              ("signed_recall@10", "Signed Recall@10", "#55a868")]
    for j, (key, label, color) in enumerate(series):
        xs = [i + (j - 1) * width for i in range(len(models))]
        right.bar(xs, [ratio[m]["test"][key] for m in models], width, label=label, color=color)
    right.set_xticks(range(len(models)), models)
    right.set_title("Signed protocol (chronological 80/10/10): test @10")
    right.legend(fontsize=8, loc="upper left")
    for ax in (left, right):
        ax.spines[["top", "right"]].set_visible(False)
    fig.suptitle("ML-100K, full ranking, seen items masked (docs/results.md)", fontsize=10)
    fig.tight_layout()
    save_figure(fig, OUT, dpi=110)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
