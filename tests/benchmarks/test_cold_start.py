"""The cold-start benchmark's content-kNN reference and its per-case aggregation."""

from __future__ import annotations

import numpy as np
import torch

from benchmarks.cold_start import ContentKNN, per_case_ndcg


def test_content_knn_scores_cosine_to_the_mean_history_vector() -> None:
    content = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [-1, 0]], dtype=np.float32)
    model = ContentKNN(content)
    scores = model.score({"history": torch.tensor([[0, 1, 1]])})[0]  # profile (2, 0) -> direction (1, 0)
    expected = torch.tensor([0.0, 1.0, 0.0, 1 / np.sqrt(2), -1.0], dtype=torch.float32)
    torch.testing.assert_close(scores, expected, rtol=1e-6, atol=1e-6)


def test_per_case_ndcg_averages_each_case_over_seeds() -> None:
    runs = [{"cold_ranks": [0, 9, 10]}, {"cold_ranks": [1, 9, 50]}]
    got = per_case_ndcg(runs)
    np.testing.assert_allclose(got, [(1.0 + 1 / np.log2(3)) / 2, 1 / np.log2(11), 0.0])
