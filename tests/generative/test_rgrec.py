"""R-GRec: the item graph (hand-computed weights, training edges only), weight-proportional neighbour
sampling, each objective learning planted structure, no change to inference, spec/checkpoint round trips,
the sampling counter checkpointed (a resumed fit continues the stream), config errors, and an end-to-end fit
on both backbones that logs the three auxiliary terms."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pytest
import torch
import yaml

from recframe.checkpoint_io import load_checkpoint, save_checkpoint
from recframe.data.datamodule import RecDataModule
from recframe.data.interactions import Interactions
from recframe.models.generative import TIGER, RGRec, SIDDecoder
from recframe.models.generative.addons import addon_from_spec
from recframe.models.generative.item_graph import cooccurrence_graph
from recframe.tokenizers import RQKMeansTokenizer
from tests.generative.fixtures.make_legacy import KW, SIZES, codes

CONFIGS = Path(__file__).resolve().parent.parent.parent / "configs"
SYNTH = {"n_users": 120, "n_items": 60, "n_clusters": 3, "mean_length": 12, "seed": 3}
#: tiny backbones with the configs' embedding init (N(0, 0.02) positions and levels)
TINY = {**KW, "dim": 16, "n_layers": 1, "dropout": 0.0, "embedding_std": 0.02}


def _toy() -> Interactions:
    """Two users: u1 = a b c d, u2 = c a c e (raw ids in first-appearance order, so dense a=1 .. e=5)."""
    users = ["u1"] * 4 + ["u2"] * 4
    items = ["a", "b", "c", "d", "c", "a", "c", "e"]
    return Interactions.from_raw(users, items, timestamps=np.arange(8.0), name="toy")


def _weights(graph) -> dict[tuple[int, int], float]:
    row, col = graph.edge_index.tolist()
    return {(r, c): w for r, c, w in zip(row, col, graph.edge_weight.tolist())}


def _expected_edges(sequences: list[np.ndarray], window: int) -> dict[tuple[int, int], float]:
    """The graph by hand: each pair at distance d <= window adds 1/d to both directions; no self-pairs."""
    out: dict[tuple[int, int], float] = defaultdict(float)
    for seq in sequences:
        for i in range(len(seq)):
            for d in range(1, window + 1):
                if i + d < len(seq) and seq[i] != seq[i + d]:
                    a, b = int(seq[i]), int(seq[i + d])
                    out[a, b] += 1.0 / d
                    out[b, a] += 1.0 / d
    return dict(out)


# ------------------------------------------------------------------ graph
def test_hand_computed_weights_on_a_two_user_toy() -> None:
    toy = _toy()
    a, b, c, d, e = (toy.item_index(x) for x in "abcde")
    graph = cooccurrence_graph(toy, window=2)
    # u1: ab, bc, cd at distance 1; ac, bd at distance 2
    # u2: ca, ac, ce at distance 1; cc (self) dropped, ae at distance 2
    want = {(a, b): 1.0, (b, c): 1.0, (c, d): 1.0, (a, c): 0.5 + 1.0 + 1.0, (b, d): 0.5, (c, e): 1.0,
            (a, e): 0.5}
    want.update({(j, i): w for (i, j), w in list(want.items())})
    assert _weights(graph) == pytest.approx(want)
    assert graph.n_edges == 7 and graph.n_items == 5
    indptr, col, weight = graph.csr()
    assert indptr.tolist() == [0, 0, 3, 6, 10, 12, 14]
    assert col[indptr[c] : indptr[c + 1]].tolist() == [a, b, d, e]
    assert torch.equal(weight, graph.edge_weight)
    # window=1 keeps adjacent pairs; top_k=1 each item's heaviest neighbour (ties: lower id), by union
    assert _weights(cooccurrence_graph(toy, window=1)) == pytest.approx(_expected_edges(
        [toy.histories.of(1), toy.histories.of(2)], 1))
    top1 = cooccurrence_graph(toy, window=2, top_k=1)
    assert set(_weights(top1)) == {(a, c), (c, a), (b, a), (a, b), (d, c), (c, d), (e, c), (c, e)}
    assert _weights(top1)[a, c] == pytest.approx(2.5)


def test_graph_has_training_edges_only() -> None:
    """Built through the add-on from a leave-one-out training split: exactly the edges of the training
    sequences; a pair that co-occurs only through a validation or test interaction is absent."""
    split = RecDataModule(dataset="synthetic", synthetic=SYNTH, split="loo", max_len=10).split
    addon = RGRec(window=3)
    addon.bind_data(split.train)
    train_seqs = [split.train.histories.of(u) for u in range(1, split.train.n_users + 1)]
    assert _weights(addon.graph) == pytest.approx(_expected_edges(train_seqs, 3))
    # the same users' full sequences (train + validation + test target)
    full = split.train.concat(split.valid).concat(split.test)
    full_edges = _expected_edges([full.histories.of(u) for u in range(1, full.n_users + 1)], 3)
    held_out_only = [pair for pair in full_edges if pair not in _weights(addon.graph)]
    assert held_out_only, "the synthetic split should have pairs that co-occur only through held-out items"
    src, dst = torch.tensor(held_out_only).T
    assert not addon.graph.has_edge(src, dst).any()
    # e.g. a user's validation and test items, adjacent only in held-out positions
    test_item = {int(u): int(i) for u, i in zip(split.test.user, split.test.item)}
    pairs = [(int(v), test_item[int(u)]) for u, v in zip(split.valid.user, split.valid.item)]
    absent = [p for p in pairs if p in held_out_only]
    assert absent
    assert not addon.graph.has_edge(*torch.tensor(absent).T).any()


def test_model_bind_data_reaches_the_addons_every_time() -> None:
    """Also when the backbone already exists (a resumed fit): the add-on's graph is (re)built."""
    train = _toy()
    model = TIGER(n_items=train.n_items, addons=[RGRec()], **TINY)
    model._build(codes(n=train.n_items), SIZES)
    model.bind_data(train)  # backbone present: returns early, but only after the add-ons' hook
    assert model.backbone.addons[0].graph.n_edges == cooccurrence_graph(train).n_edges


def test_neighbour_sampling_is_proportional_to_weight() -> None:
    toy = _toy()
    a, b, c, d, e = (toy.item_index(x) for x in "abcde")
    graph = cooccurrence_graph(toy, window=2)
    n = 40_000
    draws = graph.sample_neighbours(torch.full((n,), c), torch.Generator().manual_seed(0))
    counts = torch.bincount(draws, minlength=6)[[a, b, d, e]].double()
    expected = torch.tensor([2.5, 1.0, 1.0, 1.0], dtype=torch.float64) / 5.5 * n
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert counts.sum() == n and chi2 < 16.27, chi2  # chi-square, 3 degrees of freedom, p = 0.001
    isolated = Interactions.from_raw(["u", "u", "v"], ["x", "y", "z"], name="isolated")
    g = cooccurrence_graph(isolated, window=1)
    assert g.sample_neighbours(torch.tensor([1, 2, 3])).tolist() == [2, 1, 0]  # z has no neighbour


def test_has_edge_equals_brute_force() -> None:
    split = RecDataModule(dataset="synthetic", synthetic=SYNTH, split="loo", max_len=10).split
    graph = cooccurrence_graph(split.train, window=2)
    dense = torch.zeros(graph.n_items + 1, graph.n_items + 1, dtype=torch.bool)
    dense[graph.edge_index[0], graph.edge_index[1]] = True
    src, dst = torch.meshgrid(torch.arange(graph.n_items + 1), torch.arange(graph.n_items + 1), indexing="ij")
    assert torch.equal(graph.has_edge(src.reshape(-1), dst.reshape(-1)).view_as(dense), dense)


# ------------------------------------------------------------------ objectives
def _clustered(n_items: int = 40, n_clusters: int = 4, n_users: int = 60, length: int = 10) -> Interactions:
    """Users who each stay in one cluster of items (raw item i is in cluster i % n_clusters)."""
    rng = np.random.default_rng(0)
    users, items = [], []
    for u in range(n_users):
        members = np.arange(n_items)[np.arange(n_items) % n_clusters == u % n_clusters]
        users += [f"u{u}"] * length
        items += [f"i{i}" for i in rng.choice(members, size=length)]
    inter = Interactions.from_raw(users, items, name="clustered")
    assert inter.n_items == n_items
    return inter


@pytest.mark.parametrize(("objective", "cls", "history_tokens"), [
    ("neighbor", TIGER, "codes"), ("neighbor", TIGER, "items"), ("neighbor", SIDDecoder, "codes"),
    ("neighbor", SIDDecoder, "items"), ("contrast", TIGER, "items"), ("link", SIDDecoder, "codes")])
def test_each_objective_learns_planted_clusters(objective: str, cls, history_tokens: str) -> None:
    """60 Adam steps on one objective alone lower it on the same sampled pairs (neighbours lie within
    clusters of 4 items; the sampling stream is replayed from its start for both measurements)."""
    train = _clustered(n_clusters=10)
    torch.manual_seed(0)
    addon = RGRec(**{k: k == objective for k in ("neighbor", "contrast", "link")}, anchors=64)
    model = cls(n_items=train.n_items, addons=[addon], history_tokens=history_tokens, **TINY)
    model._build(codes(n=train.n_items), SIZES)
    model.bind_data(train)
    targets = torch.arange(1, train.n_items + 1).view(4, -1)  # every item a target, hence an anchor

    def measure() -> float:
        addon._calls = 0  # the same pairs each time
        with torch.no_grad():
            values = [model.backbone.auxiliary_losses(targets, targets)[0].value for _ in range(5)]
        return float(np.mean(values))

    before = measure()
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(60):
        (term,) = model.backbone.auxiliary_losses(torch.zeros_like(targets), targets)
        assert term.name == objective
        optimiser.zero_grad()
        term.value.backward()
        optimiser.step()
    after = measure()
    assert after < 0.9 * before, (objective, before, after)


def test_contrast_masks_duplicate_candidates() -> None:
    from recframe.models.generative.rgrec import info_nce

    rep = torch.randn(3, 8)
    items = torch.tensor([1, 2, 3])
    # rows 0 and 1 share their positive item 7: each is masked as the other's negative
    keys, key_items = torch.randn(3, 8), torch.tensor([7, 7, 9])
    logits = torch.nn.functional.normalize(rep, dim=-1) @ torch.nn.functional.normalize(keys, dim=-1).T / 0.1
    manual = torch.stack([-logits[0, 0] + torch.logsumexp(logits[0, [0, 2]], 0),
                          -logits[1, 1] + torch.logsumexp(logits[1, [1, 2]], 0),
                          -logits[2, 2] + torch.logsumexp(logits[2], 0)]).mean()
    torch.testing.assert_close(info_nce(items, rep, key_items, keys, 0.1), manual)


def test_link_negatives_are_non_edges() -> None:
    split = RecDataModule(dataset="synthetic", synthetic=SYNTH, split="loo", max_len=10).split
    addon = RGRec(negatives=5)
    addon.bind_data(split.train)
    anchors = torch.arange(1, split.train.n_items + 1)
    rows, negative = addon.sample_non_edges(anchors, torch.Generator().manual_seed(1))
    source = anchors[rows]
    assert len(rows) > 0.9 * 5 * len(anchors)
    assert (negative != source).all() and not addon.graph.has_edge(source, negative).any()


# ------------------------------------------------------------------ inference and state
@pytest.mark.parametrize("cls", [TIGER, SIDDecoder])
def test_addon_changes_no_inference_output(cls) -> None:
    train = _clustered()
    torch.manual_seed(0)
    plain = cls(n_items=train.n_items, **TINY)
    plain._build(codes(n=train.n_items), SIZES)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in plain.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    torch.manual_seed(0)
    rgrec = cls(n_items=train.n_items, addons=[RGRec()], **TINY)
    rgrec._build(codes(n=train.n_items), SIZES)
    rgrec.bind_data(train)
    assert not any("graph" in key for key in rgrec.state_dict())
    # no parameter or buffer: only the sampling counter is added
    assert set(rgrec.state_dict()) - set(plain.state_dict()) == {"backbone.addons.0._extra_state"}
    assert set(plain.state_dict()) <= set(rgrec.state_dict())
    rgrec.load_state_dict(plain.state_dict())  # strict: the plain backbone's weights fit exactly
    history = {"history": torch.tensor([[0, 0, 3, 5, 7, 9, 10], [1, 2, 3, 4, 5, 6, 40],
                                        [0, 0, 0, 0, 0, 0, 12]])}
    plain.eval(), rgrec.eval()
    with torch.no_grad():
        for cached in (True, False):
            assert torch.equal(plain.score(history, cached=cached), rgrec.score(history, cached=cached))
        a = plain.generate(history["history"], k=5, beam=8)
        b = rgrec.generate(history["history"], k=5, beam=8)
    assert torch.equal(a.items, b.items) and torch.equal(a.log_probs, b.log_probs)


def test_spec_and_checkpoint_round_trip(tmp_path: Path) -> None:
    addon = RGRec(link=False, window=2, contrast_weight=0.3, temperature=0.2, anchors=16, top_k=5, seed=7)
    spec = addon.spec()
    assert spec["class_path"] == "recframe.models.generative.rgrec.RGRec"
    assert spec["init_args"] == {"neighbor": True, "contrast": True, "link": False, "window": 2,
                                 "neighbor_weight": 0.1, "contrast_weight": 0.3, "link_weight": 0.1,
                                 "temperature": 0.2, "negatives": 1, "anchors": 16, "top_k": 5, "seed": 7}
    assert addon_from_spec(spec).spec() == spec
    model = SIDDecoder(n_items=40, addons=[spec], **TINY)
    model._build(codes(), SIZES)
    model.bind_data(_toy_40())
    save_checkpoint({"hyper_parameters": dict(model.hparams), "state_dict": model.state_dict()},
                    tmp_path / "m.ckpt")
    ckpt = load_checkpoint(tmp_path / "m.ckpt")  # weights_only=True
    again = SIDDecoder(**ckpt["hyper_parameters"])
    again.load_state_dict(ckpt["state_dict"])
    (rebuilt,) = again.backbone.addons
    assert isinstance(rebuilt, RGRec) and rebuilt.spec() == spec
    assert not hasattr(rebuilt, "graph_indptr")  # the graph is rebuilt by bind_data, never loaded
    with torch.no_grad():  # inference needs no graph
        assert torch.equal(again.eval().score({"history": torch.tensor([[0, 3, 5]])}),
                           model.eval().score({"history": torch.tensor([[0, 3, 5]])}))
    with pytest.raises(RuntimeError, match="bind_data"):
        again.loss({"input": torch.tensor([[0, 1]]), "target": torch.tensor([[1, 2]])})


def _toy_40() -> Interactions:
    items = [str(i) for i in range(1, 41)]
    return Interactions.from_raw(["u"] * 40, items, name="chain")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"neighbor": False, "contrast": False, "link": False}, "turn on at least one objective"),
    ({"window": 0}, r"init_args.window=0: give a whole number >= 1"),
    ({"negatives": 0}, r"negatives=0: give a whole number >= 1"),
    ({"anchors": 1}, r"anchors=1: give a whole number >= 2"),
    ({"link_weight": -0.1}, r"link_weight=-0.1: give a finite number >= 0"),
    ({"temperature": 0.0}, r"temperature=0.0: give a finite number > 0"),
    ({"top_k": 0}, r"top_k=0: give a whole number >= 1, or null"),
    ({"contrast": "yes"}, r"contrast='yes': give true or false"),
    ({"seed": -1}, r"seed=-1: give a whole number >= 0"),
])
def test_invalid_settings_are_one_clear_error(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RGRec(**kwargs)


@pytest.mark.parametrize("name", ["tiger_rgrec_ml100k.yaml", "decoder_rgrec_ml100k.yaml"])
def test_configs_are_their_backbone_config_plus_rgrec(name: str) -> None:
    with open(CONFIGS / name) as fh:
        cfg = yaml.safe_load(fh)
    with open(CONFIGS / name.replace("_rgrec", "")) as fh:
        base = yaml.safe_load(fh)
    (addon,) = [addon_from_spec(spec) for spec in cfg["model"]["init_args"].pop("addons")]
    assert isinstance(addon, RGRec) and addon.neighbor and addon.contrast and addon.link
    assert cfg["trainer"]["logger"]["init_args"].pop("name") == name.removesuffix(".yaml")
    base["trainer"]["logger"]["init_args"].pop("name")
    assert cfg == base


# ------------------------------------------------------------------ end to end
@pytest.mark.parametrize("cls", [TIGER, SIDDecoder])
def test_fit_logs_the_three_auxiliary_terms(cls) -> None:
    L.seed_everything(0)
    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH, split="loo", max_len=6, batch_size=64)
    model = cls(n_items=dm.n_items, n_users=dm.n_users,
                tokenizer=RQKMeansTokenizer(n_levels=2, codebook_size=8), features="none", max_len=6,
                dim=16, n_layers=1, n_heads=2, inner=32, history_tokens="items", addons=[RGRec(anchors=32)])
    trainer = L.Trainer(max_epochs=1, limit_train_batches=3, limit_val_batches=0, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0)
    trainer.fit(model, dm)
    logged = trainer.callback_metrics
    for name in ("neighbor", "contrast", "link"):
        assert torch.isfinite(logged[f"train/aux_{name}"]), name
    graph = model.backbone.addons[0].graph
    assert torch.equal(graph.edge_index, cooccurrence_graph(dm.split.train).edge_index)


# ------------------------------------------------------------------ the sampling counter is checkpointed
def _draws(model, targets: torch.Tensor, n: int) -> list[tuple[list[int], list[int]]]:
    """The (anchors, neighbours) of the next ``n`` sampling calls (as one training step draws them)."""
    addon = model.backbone.addons[0]
    out = []
    for _ in range(n):
        anchors, neighbours = addon.sample_pairs(targets, addon.generator(targets.device))
        out.append((anchors.tolist(), neighbours.tolist()))
    return out


def test_the_sampling_counter_round_trips_through_a_weights_only_checkpoint(tmp_path: Path) -> None:
    """After a save and a load (bind_data first, as at a resumed fit's setup), the next draws are the ones
    the saved model would have made; without the counter the stream would restart."""
    train = _clustered(n_clusters=10)
    targets = torch.arange(1, train.n_items + 1).view(4, -1)
    model = SIDDecoder(n_items=train.n_items, addons=[RGRec(anchors=4)], **TINY)
    model._build(codes(n=train.n_items), SIZES)
    model.bind_data(train)
    first = _draws(model, targets, 5)
    assert model.backbone.addons[0].get_extra_state() == {"calls": 5}
    save_checkpoint({"hyper_parameters": dict(model.hparams), "state_dict": model.state_dict()},
                    tmp_path / "m.ckpt")
    ckpt = load_checkpoint(tmp_path / "m.ckpt")  # weights_only=True
    assert ckpt["state_dict"]["backbone.addons.0._extra_state"] == {"calls": 5}
    again = SIDDecoder(**ckpt["hyper_parameters"])
    again.load_state_dict(ckpt["state_dict"])
    again.bind_data(train)  # a fresh fit: the stream restarts
    assert _draws(again, targets, 5) == first
    again.load_state_dict(ckpt["state_dict"])  # a resumed fit: restored after bind_data
    assert _draws(again, targets, 3) == _draws(model, targets, 3)
    assert first[0] != _draws(model, targets, 1)[0]  # the draws do move along the stream
    # checkpoints written before the counter was saved still load strictly, and keep the counter
    legacy = {k: v for k, v in ckpt["state_dict"].items() if not k.endswith("_extra_state")}
    again.load_state_dict(legacy)
    assert again.backbone.addons[0].get_extra_state() == {"calls": 8}
    with pytest.raises(ValueError, match=r"_extra_state entry is damaged"):
        again.load_state_dict({**legacy, "backbone.addons.0._extra_state": {"calls": -1}})


class RecordingRGRec(RGRec):
    """R-GRec that records every sampled (anchors, neighbours) pair set."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.drawn: list[tuple[list[int], list[int]]] = []

    def sample_pairs(self, targets: torch.Tensor,
                     generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        anchors, neighbours = super().sample_pairs(targets, generator)
        self.drawn.append((anchors.tolist(), neighbours.tolist()))
        return anchors, neighbours


def _fit_rgrec(tmp_path: Path, epochs: int, ckpt_path: Path | None = None,
               save: bool = False) -> tuple[Any, RecordingRGRec]:
    from lightning.pytorch.callbacks import ModelCheckpoint

    L.seed_everything(0)
    dm = RecDataModule(dataset="synthetic", synthetic=SYNTH, split="loo", max_len=6, batch_size=64)
    addon = RecordingRGRec(anchors=8)
    model = SIDDecoder(n_items=dm.n_items, n_users=dm.n_users,
                       tokenizer=RQKMeansTokenizer(n_levels=2, codebook_size=8), features="none", max_len=6,
                       dim=16, n_layers=1, n_heads=2, inner=32, dropout=0.0, history_tokens="items",
                       addons=[addon])
    callbacks = [ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True, save_top_k=0)] if save else []
    trainer = L.Trainer(max_epochs=epochs, limit_train_batches=3, limit_val_batches=0, logger=False,
                        enable_checkpointing=save, callbacks=callbacks, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, default_root_dir=tmp_path)
    trainer.fit(model, dm, ckpt_path=None if ckpt_path is None else str(ckpt_path))
    return model, addon


def test_a_resumed_fit_continues_the_sampling_stream(tmp_path: Path) -> None:
    """Lightning resume: the second epoch of a run resumed after the first draws the pairs that the second
    epoch of an uninterrupted run draws (batches are shuffled by (seed, epoch), the stream by call index)."""
    _, whole = _fit_rgrec(tmp_path / "whole", 2)
    assert len(whole.drawn) == 6 and whole.get_extra_state() == {"calls": 6}
    _, first = _fit_rgrec(tmp_path / "a", 1, save=True)
    assert first.drawn == whole.drawn[:3]
    last = tmp_path / "a" / "ckpt" / "last.ckpt"
    assert load_checkpoint(last)["state_dict"]["backbone.addons.0._extra_state"] == {"calls": 3}
    _, resumed = _fit_rgrec(tmp_path / "b", 2, ckpt_path=last)
    assert resumed.get_extra_state() == {"calls": 6}
    assert resumed.drawn == whole.drawn[3:]
