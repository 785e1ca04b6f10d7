"""The scalable-loss and k-means scale benchmarks run end to end at toy sizes (in process, no files)."""

from __future__ import annotations

import math

from benchmarks import kmeans_scale, scalable_loss


def test_scalable_loss_rows_and_table() -> None:
    args = scalable_loss.parse(["--items", "300", "--batch", "4", "--max-len", "5", "--hidden", "8",
                                "--chunk-size", "64", "--n-negatives", "16", "--steps", "1", "--warmup", "0",
                                "--device", "cpu", "--max-logits-gb", "1e-9"])
    rows = [scalable_loss.run_one(300, loss, args) for loss in ("chunked", "sampled_logq")]
    for row in rows:
        assert row["feasible"] and row["positions"] == 20 and row["peak_gb"] > 0
        assert all(math.isfinite(v) for v in row["loss_values"])
    # with the same seed, chunked CE starts at the full softmax's log(300)-ish value
    assert abs(rows[0]["loss_values"][0] - math.log(300)) < 0.5
    skipped = {"items": 300, "loss": "ce", "feasible": False, "logits_gb": scalable_loss.logits_gb(300, args)}
    table = scalable_loss.markdown([skipped, *rows], args)
    assert "not run" in table and "chunked exact CE" in table and "sampled softmax + logQ" in table


def test_kmeans_scale_rows_and_table() -> None:
    args = kmeans_scale.parse(["--items", "600", "--dim", "8", "--codebook", "8", "--levels", "2",
                               "--centres", "20", "--lloyd-n-iter", "5"])
    rows = [kmeans_scale.run_one(b, args) for b in ("faiss", "lloyd")]
    assert rows[0]["n_iter_cap"] == 100 and rows[1]["n_iter_cap"] == 5
    for row in rows:
        assert len(row["iterations"]) == len(row["converged"]) == len(row["inertia"]) == 2
        assert row["residual_mse"][-1] < row["residual_mse"][0]
    assert "hand-written Lloyd" in kmeans_scale.markdown(rows, args)
