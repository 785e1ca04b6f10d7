"""The retrieval benchmark's pieces, and one tiny end-to-end run (no files written)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import retrieval as bench


def test_data_is_deterministic_clustered_and_low_rank() -> None:
    items, queries = bench.make_data(4000, 100, 64, seed=3)
    again, _ = bench.make_data(4000, 100, 64, seed=3)
    np.testing.assert_array_equal(items, again)
    assert items.shape == (4000, 64) and queries.shape == (100, 64) and items.dtype == np.float32
    s = np.linalg.svd(items - items.mean(0), compute_uv=False)
    assert (s[:32] ** 2).sum() / (s ** 2).sum() > 0.95  # rank-32 signal plus 5% isotropic noise
    norms = np.linalg.norm(items, axis=1)
    assert norms.std() / norms.mean() > 0.2  # popularity spreads the item norms


def test_recall_and_torch_topk() -> None:
    truth = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    found = np.array([[4, 3, 9, 0], [5, 6, 7, 8]])
    assert bench.recall_at_k(found, truth) == pytest.approx((2 / 4 + 1) / 2)
    items, queries = bench.make_data(500, 20, 16, seed=1)
    ids = bench.torch_topk(items, queries, 5, chunk=7)
    ref = np.argsort(-(queries @ items.T), axis=1)[:, :5] + 1
    np.testing.assert_array_equal(ids, ref)


def test_tiny_end_to_end_run(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--items", "3000", "--queries", "40", "--k", "10", "--ivf", "IVF16,Flat", "--nprobe", "16",
            "--ivfpq", "IVF16,PQ16x4fs,RFlat", "--ivfpq-settings", "16:4", "--hnsw", "HNSW8",
            "--ef-search", "64", "--gemm-repeats", "1", "--threads", "1", "--no-write"]
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    assert "| exact ItemIndex (Flat) |" in out and "| IVF (IVF16,Flat) | nprobe=16 |" in out
    assert "| HNSW (HNSW8) | efSearch=64 |" in out
    assert "| IVF-PQ fast-scan + re-rank (IVF16,PQ16x4fs,RFlat) | nprobe=16, k_factor=4 |" in out
    # nprobe = nlist probes every list: IVF is exact there, so its recall must be 1
    ivf_line = next(ln for ln in out.splitlines() if ln.startswith("| IVF (IVF16,Flat) | nprobe=16 |"))
    assert ivf_line.split("|")[7].strip() == "1.0000"
