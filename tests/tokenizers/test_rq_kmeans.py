"""RQ-KMeans and the k-means core: planted clusters, residual error, balanced sizes, determinism
(both k-means backends: FAISS and the hand-written Lloyd loop)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from recframe.tokenizers import RQKMeansTokenizer
from recframe.tokenizers.kmeans import balanced_assign, kmeans, kmeans_fit
from tests.tokenizers.planted import planted


def test_level_one_recovers_planted_clusters(clusters):
    x, labels = clusters
    table = RQKMeansTokenizer(n_levels=3, codebook_size=8, seed=0).fit(x)
    assert adjusted_rand_score(labels, table.codes[1:, 0]) >= 0.9
    assert table.codes.dtype == np.int64 and table.codes.shape[0] == 301
    assert not table.codes[0].any()
    assert len(np.unique(table.codes[1:], axis=0)) == 300  # unique after disambiguation


def test_residual_levels_lower_reconstruction_error(clusters):
    x, _ = clusters
    for balanced in (False, True):
        tok = RQKMeansTokenizer(n_levels=4, codebook_size=8, balanced=balanced, seed=1)
        table = tok.fit(x)
        mse = table.stats["residual_mse"]
        assert len(mse) == 5
        assert all(b < a for a, b in zip(mse, mse[1:])), mse  # every level helps
        assert mse[1] < 0.2 * mse[0]  # level 1 explains the planted cluster structure
        # the recorded error is the error of the codebook reconstruction
        recon = tok.reconstruct(table.codes[1:, :4])
        assert np.mean(((x[1:] - recon) ** 2).sum(1)) == pytest.approx(mse[-1], rel=1e-4)


def test_encode_reproduces_fitted_codes(clusters):
    x, _ = clusters
    tok = RQKMeansTokenizer(n_levels=2, codebook_size=8, seed=0)
    table = tok.fit(x)
    assert np.array_equal(tok.encode(x[1:]), table.codes[1:, :2])


def test_balanced_gives_equal_cluster_sizes():
    x, _ = planted(n=301, k=8, seed=3)  # 301 = 8 * 37 + 5: sizes must be 37 or 38
    table = RQKMeansTokenizer(n_levels=2, codebook_size=8, balanced=True, seed=0).fit(x)
    for level in range(2):
        sizes = np.bincount(table.codes[1:, level], minlength=8)
        assert sizes.min() == 37 and sizes.max() == 38 and (sizes == 38).sum() == 5
    assert table.stats["codebook_usage"][:2] == [1.0, 1.0]
    # unconstrained k-means on the same data has unequal sizes (uniform random labels)
    plain = RQKMeansTokenizer(n_levels=1, codebook_size=8, seed=0).fit(x)
    assert np.bincount(plain.codes[1:, 0]).max() - np.bincount(plain.codes[1:, 0]).min() > 5


def test_balanced_assign_respects_capacity_and_prefers_near_clusters():
    # 4 points near cluster 0, 2 near cluster 1, capacity 3 each: the farthest of the 4 moves
    dist = np.array([[0.0, 9.0], [0.1, 9.0], [0.2, 9.0], [0.5, 1.0], [9.0, 0.0], [9.0, 0.1]])
    assert balanced_assign(dist).tolist() == [0, 0, 0, 1, 1, 1]
    rng = np.random.default_rng(0)
    labels = balanced_assign(rng.random((103, 10)))
    assert sorted(np.bincount(labels, minlength=10).tolist()) == [10] * 7 + [11] * 3


def test_kmeans_rejects_too_many_codes():
    with pytest.raises(ValueError, match="codebook size 20 for 10 points"):
        kmeans(np.zeros((10, 2)), 20, rng=np.random.default_rng(0))


@pytest.mark.parametrize("backend", ["faiss", "lloyd"])
def test_determinism_and_seed_dependence(clusters, backend):
    x, _ = clusters
    a = RQKMeansTokenizer(n_levels=3, codebook_size=16, seed=7, backend=backend).fit(x)
    b = RQKMeansTokenizer(n_levels=3, codebook_size=16, seed=7, backend=backend).fit(x)
    c = RQKMeansTokenizer(n_levels=3, codebook_size=16, seed=8, backend=backend).fit(x)
    assert np.array_equal(a.codes, b.codes) and a.fingerprint == b.fingerprint
    assert not np.array_equal(a.codes, c.codes) and a.fingerprint != c.fingerprint
    assert a.stats["kmeans_backend"] == [backend] * 3


def test_faiss_kmeans_is_deterministic_for_a_fixed_seed():
    x = np.random.default_rng(0).standard_normal((2000, 16))
    runs = [kmeans_fit(x, 32, rng=np.random.default_rng(s), backend="faiss", n_iter=50) for s in (5, 5, 6)]
    assert np.array_equal(runs[0].labels, runs[1].labels)
    assert np.array_equal(runs[0].centroids, runs[1].centroids) and runs[0].inertia == runs[1].inertia
    assert not np.array_equal(runs[0].labels, runs[2].labels)
    assert runs[0].backend == "faiss" and 1 <= runs[0].n_iter <= 50


def test_faiss_and_lloyd_find_the_planted_clusters_and_report_convergence(clusters):
    x, labels = clusters
    fits = {b: kmeans_fit(x[1:], 8, rng=np.random.default_rng(0), backend=b) for b in ("faiss", "lloyd")}
    for fit in fits.values():
        assert adjusted_rand_score(labels, fit.labels) >= 0.9
        assert fit.converged and fit.n_iter < 100
        # labels are the nearest centroids and the inertia is theirs
        assert fit.inertia == pytest.approx(((x[1:] - fit.centroids[fit.labels]) ** 2).sum(), rel=1e-9)
    assert fits["faiss"].inertia == pytest.approx(fits["lloyd"].inertia, rel=0.05)
    table = RQKMeansTokenizer(n_levels=2, codebook_size=8, seed=0).fit(x)
    assert table.stats["kmeans_converged"] == [True, True]
    assert len(table.stats["kmeans_iterations"]) == len(table.stats["kmeans_inertia"]) == 2
    # a cap of one iteration is reported as not converged
    capped = kmeans_fit(x[1:], 8, rng=np.random.default_rng(0), backend="faiss", n_iter=1, tol=0.0)
    assert capped.n_iter == 1 and not capped.converged


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_levels=0), "n_levels"),
    (dict(codebook_size=1), "codebook_size"),
    (dict(n_levels=2, codebook_size=(4, 4, 4)), "n_levels=2"),
    (dict(seed=-1), "seed"),
    (dict(backend="sklearn"), "backend"),
    (dict(tol=1.5), "tol"),
])
def test_bad_settings_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RQKMeansTokenizer(**kwargs)


def test_auto_backend_picks_faiss_only_with_enough_points_per_code():
    """``auto``: the hand-written loop below 39 points per code (small catalogues), FAISS from there."""
    from recframe.tokenizers.kmeans import FAISS_MIN_POINTS

    rng = np.random.default_rng(0)
    k = 4
    small = rng.normal(size=(FAISS_MIN_POINTS * k - 1, 3))
    large = rng.normal(size=(FAISS_MIN_POINTS * k, 3))
    assert kmeans_fit(small, k, rng=np.random.default_rng(1), backend="auto").backend == "lloyd"
    assert kmeans_fit(large, k, rng=np.random.default_rng(1), backend="auto").backend == "faiss"
    assert RQKMeansTokenizer().backend == "auto"
