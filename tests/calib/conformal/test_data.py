"""The two tasks: the synthetic EHR generator (planted sibling-correlated errors, end to end) and ML-100K."""

from __future__ import annotations

import numpy as np
import pytest

from calib_ext.conformal import ConformalSeverityControl, fnr_baseline
from calib_ext.conformal.data import GENRE_GROUPS, genre_hierarchy, synthetic_atc_codes, synthetic_ehr
from calib_ext.conformal.hierarchy import ATC_PATTERN


def test_synthetic_atc_codes_look_real() -> None:
    codes = synthetic_atc_codes(np.random.default_rng(0))
    assert len(codes) == len(set(codes)) == 96
    assert all(len(c) == 7 and ATC_PATTERN.fullmatch(c) for c in codes)
    with pytest.raises(ValueError, match="n_anatomical must be in 1..14"):
        synthetic_atc_codes(np.random.default_rng(0), n_anatomical=20)


def test_genre_tree_is_two_levels_over_18_genres() -> None:
    tree = genre_hierarchy()
    genres = [g for gs in GENRE_GROUPS.values() for g in gs]
    assert len(genres) == len(set(genres)) == 18
    assert {tree.depth[g] for g in genres} == {2}
    assert tree.distance("Crime", "Thriller") == 2 and tree.distance("Crime", "Comedy") == 4


def test_end_to_end_on_synthetic_ehr() -> None:
    """Planted structure: errors land on siblings; CSC meets its target on held-out visits and, at the
    set size of the FNR baseline, misses fewer labels distantly."""
    task = synthetic_ehr(seed=0, n_train=2000, n_pool=1200)
    assert task.info["top_error_sibling_share"] > 3 * task.info["random_error_sibling_share"]
    alpha, splits, n = 0.1, 30, len(task.scores)
    csc = ConformalSeverityControl(task.hierarchy, task.labels, alpha)
    base = fnr_baseline(task.hierarchy, task.labels, alpha)
    hier, flat = csc.curves(task.scores, task.true), base.curves(task.scores, task.true)
    rng = np.random.default_rng(0)
    sev, distant_csc, distant_base = [], [], []
    for _ in range(splits):
        perm = rng.permutation(n)
        cal, test = perm[: n // 2], perm[n // 2:]
        lam = csc.fit_curves(hier.subset(cal)).lambda_
        sev.append(hier.subset(test).risk(lam))
        size = hier.subset(cal).set_sizes(lam).mean()
        t = np.sort(flat.subset(cal).entry_times.ravel())
        lam_b = t[int(np.ceil(size * len(cal))) - 1]  # flat threshold with the same calibration set size
        distant_csc.append(hier.subset(test).distance_shares(lam)["distant"])
        distant_base.append(flat.subset(test).distance_shares(lam_b)["distant"])
    assert abs(np.mean(sev) - alpha) < 0.01
    assert np.mean(distant_csc) < np.mean(distant_base)
    sets = csc.fit(task.scores[:600], task.true[:600]).predict_labels(task.scores[600:603])
    assert all(set(s) <= set(task.labels) for s in sets)


@pytest.mark.slow
def test_ml100k_genres_meet_the_target(ml100k_root) -> None:  # noqa: ANN001
    from calib_ext.conformal.data import ml100k_genres

    task = ml100k_genres(seed=0, root=str(ml100k_root))
    assert task.true.shape[1] == 18 and task.info["n_pool"] > 800
    csc = ConformalSeverityControl(task.hierarchy, task.labels, 0.15)
    curves = csc.curves(task.scores, task.true)
    rng = np.random.default_rng(0)
    n, achieved = len(curves), []
    for _ in range(100):
        perm = rng.permutation(n)
        lam = csc.fit_curves(curves.subset(perm[: n // 2])).lambda_
        achieved.append(curves.subset(perm[n // 2:]).risk(lam))
    assert np.mean(achieved) <= 0.15 + 3 * np.std(achieved) / 10
    assert np.mean(achieved) > 0.12
