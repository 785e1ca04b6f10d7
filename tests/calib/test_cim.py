"""CIM (seed ¶16): known answers for geodesic drift, EED, JS / Semantic Divergence, the focused view and the
intervention effects, and a planted case where errors come with unstable focus."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon
from sklearn.metrics import roc_auc_score

from calib_ext.cim import (
    CIMDetector,
    RecommenderAdapter,
    SemanticClusters,
    auroc,
    expected_embedding_drift,
    focus_mask,
    geodesic_distance,
    intervention_effects,
    js_divergence,
    semantic_divergence,
)
from calib_ext.cim.adapters import eligible_log_probs
from calib_ext.cim.focus import kept_count
from recframe.models import SASRec


class BagAdapter:
    """Bag-of-vectors classifier: e(x) = Σ_j keep_j V[x_j], p = softmax(e Uᵀ); outcome c embeds as U_c."""

    def __init__(self, vectors: torch.Tensor, classes: torch.Tensor) -> None:
        self.V, self.U = vectors, classes

    def parts(self, inputs):
        return inputs["x"] > 0

    def embed(self, inputs, keep=None):
        m = self.parts(inputs) if keep is None else keep & self.parts(inputs)
        return (self.V[inputs["x"]] * m[..., None]).sum(1)

    def log_probs(self, inputs, emb):
        return torch.log_softmax(emb @ self.U.T, dim=1)

    def errors(self, inputs, log_probs):
        return {"wrong": log_probs.argmax(1) != inputs["y"]}

    def support_embeddings(self):
        return self.U


def test_geodesic_distance_hand_values():
    u = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    v = torch.tensor([[1.0, 1.0], [-1.0, 0.0], [0.0, 2.0], [5.0, 0.0]])
    want = torch.tensor([math.pi / 4, math.pi, math.pi / 2, 0.0])
    torch.testing.assert_close(geodesic_distance(u, v), want)
    # small angles keep their precision in float32 (arccos of the rounded cosine would give 0)
    tiny = geodesic_distance(torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1e-4]))
    assert abs(float(tiny) - 1e-4) < 1e-8
    with pytest.raises(ValueError, match="equal shapes"):
        geodesic_distance(torch.zeros(2, 3), torch.zeros(2, 4))


def test_eed_is_weighted_mean_drift_and_zero_for_identical_views():
    e = torch.tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    assert float(expected_embedding_drift(e, [e.clone(), 3 * e]).abs().max()) == 0.0
    views = [torch.tensor([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]), e.clone()]   # drifts (π/2, 0) and (0, 0)
    torch.testing.assert_close(expected_embedding_drift(e, views, weights=[3, 1]),
                               torch.tensor([3 * math.pi / 8, 0.0]))
    with pytest.raises(ValueError, match="at least one"):
        expected_embedding_drift(e, [])
    with pytest.raises(ValueError, match="weights"):
        expected_embedding_drift(e, views, weights=[1.0])


def test_js_divergence_hand_value_scipy_and_bounds():
    p = torch.tensor([[0.5, 0.5], [1.0, 0.0], [0.2, 0.8]])
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.2, 0.8]])
    js = js_divergence(p, q)
    m = np.array([0.75, 0.25])
    hand = 0.5 * (0.5 * math.log(0.5 / m[0]) + 0.5 * math.log(0.5 / m[1])) + 0.5 * math.log(1 / m[0])
    assert abs(float(js[0]) - hand) < 1e-12 and abs(hand - 0.215762) < 1e-6
    assert abs(float(js[1]) - math.log(2)) < 1e-12 and float(js[2]) == 0.0
    rng = np.random.default_rng(0)
    a, b = rng.dirichlet(np.ones(7), 20), rng.dirichlet(np.ones(7), 20)
    ref = np.array([jensenshannon(x, y) ** 2 for x, y in zip(a, b, strict=True)])  # natural log by default
    ours = js_divergence(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    np.testing.assert_allclose(ours, ref, atol=1e-12)


def test_semantic_divergence_works_on_classes():
    clusters = SemanticClusters(n_clusters=2, skip_first=True)
    emb = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])  # item 0 = padding
    clusters.fit(emb)
    lab = clusters.labels_.tolist()
    assert lab[0] == 0 and lab[1] == lab[2] and lab[3] == lab[4] and lab[1] != lab[3]
    p = torch.log(torch.tensor([[0.0, 0.7, 0.1, 0.1, 0.1]]))
    q_same = torch.log(torch.tensor([[0.0, 0.1, 0.7, 0.15, 0.05]]))   # mass moves inside the classes only
    q_other = torch.log(torch.tensor([[0.0, 0.1, 0.1, 0.7, 0.1]]))
    assert float(semantic_divergence(p, q_same, clusters)) < 1e-12
    expected = js_divergence(torch.tensor([[0.8, 0.2]]), torch.tensor([[0.2, 0.8]]))
    torch.testing.assert_close(semantic_divergence(p, q_other, clusters), expected)
    one = SemanticClusters(n_clusters=1).fit(emb)
    assert float(semantic_divergence(p, q_other, one)) < 1e-12
    with pytest.raises(RuntimeError, match="not fitted"):
        SemanticClusters().aggregate(p.exp())
    with pytest.raises(ValueError, match="n_clusters"):
        SemanticClusters(n_clusters=0)


def test_focus_mask_keeps_the_largest_effects_and_only_masks():
    effects = torch.tensor([[3.0, 1.0, 2.0, float("-inf")], [1.0, 1.0, 1.0, 1.0]])
    parts = torch.tensor([[True, True, True, False], [False, True, True, True]])
    keep = focus_mask(effects, parts, 0.5)
    assert keep.tolist() == [[True, False, True, False], [False, False, True, True]]  # ties: later kept
    rng = torch.Generator().manual_seed(0)
    for rho in (0.1, 0.25, 0.5, 0.9, 1.0):
        eff = torch.randn(50, 20, generator=rng)
        pr = torch.rand(50, 20, generator=rng) < 0.6
        k = focus_mask(eff, pr, rho, min_keep=1)
        assert not bool((k & ~pr).any())                      # never keeps (adds) a part that is not there
        assert k.sum(1).tolist() == [kept_count(int(n), rho) for n in pr.sum(1)]
    assert bool((focus_mask(effects, parts, 1.0) == parts).all())
    with pytest.raises(ValueError, match="keep_fraction"):
        focus_mask(effects, parts, 0.0)


def _bag(n_items: int = 6):
    V = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.5, 0.0], [0.0, 0.5]])[:n_items]
    return BagAdapter(V, torch.eye(2))


def test_intervention_effects_known_answers():
    ad = _bag()
    inputs = {"x": torch.tensor([[0, 1, 2, 3]]), "y": torch.tensor([0])}
    emb = ad.embed(inputs)                                    # (3, 2)
    eff_e = intervention_effects(ad, inputs, "embedding")
    for j, v in ((1, (2.0, 0.0)), (2, (0.0, 1.0)), (3, (1.0, 1.0))):
        rest = emb[0] - torch.tensor(v)
        want = math.acos(float(emb[0] @ rest / emb[0].norm() / rest.norm()))
        assert abs(float(eff_e[0, j]) - want) < 1e-5
    assert eff_e[0, 0] == float("-inf")
    eff_d = intervention_effects(ad, inputs, "distribution", chunk_size=1)
    lp = torch.log_softmax(emb @ ad.U.T, 1)[0, 0]           # top-1 is class 0 (logits 3 vs 2)
    for j, v in ((1, (2.0, 0.0)), (2, (0.0, 1.0)), (3, (1.0, 1.0))):
        lpj = torch.log_softmax((emb[0] - torch.tensor(v)) @ ad.U.T, 0)[0]
        assert abs(float(eff_d[0, j]) - float(lp - lpj)) < 1e-5
    assert float(eff_d[0, 2]) < 0 < float(eff_d[0, 1])       # masking item 2 (class 1 evidence) helps class 0
    with pytest.raises(ValueError, match="kind"):
        intervention_effects(ad, inputs, "gradient")


def test_identical_views_give_zero_scores():
    ad = _bag()
    inputs = {"x": torch.tensor([[1, 2, 3, 4], [0, 0, 5, 2]]), "y": torch.tensor([0, 1])}
    det = CIMDetector(keep_fractions=(1.0,), n_clusters=2, progress=False).fit(ad, skip_first=False)
    res = det.score(ad, [inputs])
    for name in ("semantic_divergence", "eed", "eed_same_view"):
        assert np.abs(res.scores[name]).max() < 1e-6, name
    assert res.n == 2 and set(res.ms_per_example()) == {"semantic_divergence", "eed", "max_prob", "entropy"}


def _planted(n: int, seed: int) -> tuple[BagAdapter, dict[str, torch.Tensor]]:
    """Correct predictions rest on one strong causal item (plus weak noise items); errors rest on many weak
    spurious items of a wrong class, against a few weak items of the true class and no causal item."""
    C, L = 4, 12
    g = torch.Generator().manual_seed(seed)
    U = torch.eye(C)
    # items 1..C: causal (strength 4 towards class c); C+1..2C: spurious/weak (strength 0.6 towards c)
    V = torch.cat([torch.zeros(1, C), 4.0 * U, 0.6 * U])
    x, y = torch.zeros(n, L, dtype=torch.long), torch.randint(0, C, (n,), generator=g)
    err = torch.rand(n, generator=g) < 0.4
    for i in range(n):
        c = int(y[i])
        if err[i]:
            wrong = (c + 1 + int(torch.randint(0, C - 1, (1,), generator=g))) % C
            items = [C + 1 + wrong] * int(torch.randint(6, 9, (1,), generator=g)) + [C + 1 + c] * 3
        else:
            others = torch.randint(0, C, (int(torch.randint(2, 9, (1,), generator=g)),), generator=g)
            items = [1 + c] + [C + 1 + int(o) for o in others]
        items = [items[j] for j in torch.randperm(len(items), generator=g).tolist()]
        x[i, L - len(items):] = torch.tensor(items)
    return BagAdapter(V, U), {"x": x, "y": y}


def test_planted_errors_with_unstable_focus_are_detected():
    ad, inputs = _planted(300, seed=1)
    det = CIMDetector(keep_fractions=(0.5,), n_clusters=4, progress=False).fit(ad, skip_first=False)
    res = det.score(ad, [{k: v[i:i + 64] for k, v in inputs.items()} for i in range(0, 300, 64)])
    wrong = res.errors["wrong"]
    assert 0.2 < wrong.mean() < 0.6
    a_sd, a_eed = auroc(res.scores["semantic_divergence"], wrong), auroc(res.scores["eed"], wrong)
    assert a_sd > 0.8 and a_eed > 0.8, (a_sd, a_eed)


def test_auroc_matches_scikit_learn_with_ties():
    rng = np.random.default_rng(0)
    s, y = rng.integers(0, 5, 400).astype(float), rng.random(400) < 0.3
    assert abs(auroc(s, y) - roc_auc_score(y, s)) < 1e-12
    assert math.isnan(auroc(s, np.zeros(400, dtype=bool)))


def test_eligible_log_probs_mirror_the_evaluator():
    scores = torch.tensor([[9.0, 1.0, 2.0, 3.0, 4.0]])
    lp = eligible_log_probs(scores, seen=torch.tensor([[2, 4, 0]]), targets=torch.tensor([[4]]))
    p = lp.exp()[0]
    assert p[0] == 0 and p[2] == 0 and p[4] > 0 and abs(float(p.sum()) - 1) < 1e-6
    torch.testing.assert_close(p[[1, 3, 4]], torch.softmax(torch.tensor([1.0, 3.0, 4.0]), 0))


class _Spy(SASRec):
    """SASRec that records the histories its query embedding reads."""

    def query_embedding(self, batch):
        self.seen_histories.append(batch["history"].clone())
        return super().query_embedding(batch)


def test_recommender_views_only_mask_history_items():
    torch.manual_seed(0)
    model = _Spy(n_items=30, max_len=8, hidden=16, n_layers=1, n_heads=2, inner=32).eval()
    model.seen_histories = []
    ad = RecommenderAdapter(model, miss_k=5)
    batch = {"users": torch.tensor([1, 2]),
             "history": torch.tensor([[0, 0, 3, 4, 5, 6, 7, 8], [0] * 5 + [9, 10, 11]]),
             "seen": torch.tensor([[3, 4, 5, 6, 7, 8], [9, 10, 11, 0, 0, 0]]),
             "targets": torch.tensor([[12], [13]]), "labels": torch.ones(2, 1, dtype=torch.int8)}
    det = CIMDetector(keep_fractions=(0.25, 0.5), n_clusters=4, progress=False).fit(ad)
    res = det.score(ad, [batch])
    assert {"semantic_divergence@0.25", "eed@0.5"} <= set(res.scores)
    assert set(res.errors) == {"wrong_top1", "miss@5"}
    original = batch["history"]
    rows = torch.cat(model.seen_histories)
    assert len(rows) > 2 * len(model.seen_histories)      # the masked variants were seen
    for row in rows:                                      # each position: the original item or padding
        assert any(bool(((row == o) | (row == 0)).all()) for o in original)
    with pytest.raises(TypeError, match="history"):
        from recframe.models import BPRMF
        RecommenderAdapter(BPRMF(n_items=5, n_users=3, dim=4))


def test_detector_rejects_bad_settings():
    with pytest.raises(ValueError, match="keep_fractions"):
        CIMDetector(keep_fractions=(1.5,))
    with pytest.raises(RuntimeError, match="not fitted"):
        CIMDetector().score(_bag(), [])
