"""The embedding-model add-on seam and the ValenceMargin auxiliary loss."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from recframe.checkpoint_io import load_checkpoint, save_checkpoint
from recframe.data.batches import pad_rows
from recframe.data.interactions import DataError, Interactions
from recframe.models import BPRMF, LightGCN, SASRec, ValenceMargin
from recframe.models.addons import AuxLoss, EmbeddingAddon
from recframe.models.signed.pairs import padded_histories

VM = "recframe.models.signed.ValenceMargin"


def _rated() -> Interactions:
    """Users a, b, c; ratings make liked (>= 4), disliked (<= 2) and neutral (3) pairs; user d widens the
    catalogue to 17 items, so unobserved draws are never left on a known pair after the sampler's retries."""
    users = ["a", "a", "a", "a", "b", "b", "b", "c", "c"] + ["d"] * 12
    items = ["x", "y", "z", "w", "x", "y", "v", "z", "v"] + [f"o{k}" for k in range(12)]
    ratings = [5, 1, 4, 2, 1, 5, 3, 5, 1] + [3] * 12
    inter = Interactions.from_raw(users, items, np.arange(len(users), dtype=float), ratings)
    from recframe.data.filters import signed_labels

    return signed_labels(inter)


def _hand_model() -> BPRMF:
    """One user ``q = (1, 0)``; item 1 scores 2.0, item 2 scores 0.0 (d = 1 disliked, j = 2 unobserved)."""
    model = BPRMF(n_items=3, n_users=1, dim=2)
    with torch.no_grad():
        model.user_emb.weight.copy_(torch.tensor([[0.0, 0.0], [1.0, 0.0]]))
        model.item_emb.weight.copy_(torch.tensor([[0.0, 0.0], [2.0, 0.5], [0.0, -0.5], [0.0, 0.0]]))
    return model


def test_hinge_lowers_the_disliked_score_and_raises_the_unobserved_one() -> None:
    model, addon = _hand_model(), ValenceMargin(weight=1.0, margin=1.0)
    u, d, j = torch.tensor([1]), torch.tensor([1]), torch.tensor([2])
    loss = addon.margin_loss(model, u, d, j)
    assert loss.item() == pytest.approx(1.0 + 2.0 - 0.0)  # relu(margin + s(u, d) - s(u, j))
    loss.backward()
    grad = model.item_emb.weight.grad
    q = model.user_emb.weight[1].detach()
    # d loss / d e_d = +q: a descent step lowers s(u, d) = <q, e_d>; d loss / d e_j = -q raises s(u, j)
    torch.testing.assert_close(grad[1], q)
    torch.testing.assert_close(grad[2], -q)
    item = model.item_emb.weight
    torch.testing.assert_close(model.user_emb.weight.grad[1], item[1] - item[2])
    # one small descent step moves both scores the right way
    with torch.no_grad():
        before = model.item_emb.weight @ q
        after = (model.item_emb.weight - 0.1 * grad) @ q
    assert after[1] < before[1] and after[2] > before[2]


def test_hinge_is_zero_once_the_margin_holds() -> None:
    model, addon = _hand_model(), ValenceMargin(weight=1.0, margin=1.0)
    with torch.no_grad():
        model.item_emb.weight[1] = torch.tensor([-1.5, 0.0])  # s(u, d) = -1.5 <= s(u, j) - margin = -1
    loss = addon.margin_loss(model, torch.tensor([1]), torch.tensor([1]), torch.tensor([2]))
    assert loss.item() == 0.0
    loss.backward()
    assert not model.item_emb.weight.grad.any()


def test_triples_come_from_the_training_split() -> None:
    inter = _rated()
    addon = ValenceMargin()
    addon.bind_data(inter)
    torch.manual_seed(0)
    users, disliked, unobserved = addon.triples(400, torch.device("cpu"))
    train_pairs = set(zip(inter.user.tolist(), inter.item.tolist()))
    rows = zip(inter.user.tolist(), inter.item.tolist(), inter.label.tolist())
    disliked_pairs = {(u, i) for u, i, y in rows if y == -1}
    drawn = set(zip(users.tolist(), disliked.tolist()))
    assert drawn == disliked_pairs  # every disliked pair is drawn, nothing else
    assert not set(zip(users.tolist(), unobserved.tolist())) & train_pairs
    assert ((unobserved >= 1) & (unobserved <= inter.n_items)).all()


def test_addon_reaches_the_training_loss_of_a_pairwise_model() -> None:
    inter = _rated()
    torch.manual_seed(0)
    model = LightGCN(n_items=inter.n_items, n_users=inter.n_users, dim=8, addons=[{"class_path": VM}])
    model.bind_data(inter)
    model.bind_addons(inter)
    batch = {"users": torch.tensor([1, 2]), "pos": torch.tensor([1, 1]), "neg": torch.tensor([3, 3])}
    (term,) = model.addon_losses(batch)
    assert isinstance(term, AuxLoss) and term.name == "valence_margin" and term.weight == 0.1
    assert term.value.requires_grad and torch.isfinite(term.value)


def test_sequence_model_queries_come_from_training_histories() -> None:
    inter = _rated()
    torch.manual_seed(0)
    model = SASRec(n_items=inter.n_items, max_len=3, hidden=8, n_layers=1, n_heads=1, inner=16,
                   addons=[{"class_path": VM, "init_args": {"pairs_per_step": 5}}])
    model.bind_addons(inter)
    addon = model.addons[0]
    users = torch.tensor([1, 2, 3])
    hist = inter.histories
    expected = pad_rows(hist.indptr, hist.items, users.numpy(), 3)
    torch.testing.assert_close(padded_histories(addon.hist_indptr, addon.hist_items, users, 3),
                               torch.from_numpy(expected))
    batch = {"input": torch.tensor([[0, 1, 2]]), "target": torch.tensor([[1, 2, 3]])}  # no user ids
    (term,) = model.addon_losses(batch)
    term.value.backward()  # the history path: the transformer gets a gradient, not only the item table
    assert any(p.grad is not None and bool(p.grad.any()) for p in model.blocks.parameters())


def test_addon_spec_survives_a_weights_only_checkpoint(tmp_path: Path) -> None:
    spec = {"class_path": "recframe.models.signed.valence.ValenceMargin",
            "init_args": {"weight": 0.3, "margin": 0.5, "pairs_per_step": 64}}
    model = LightGCN(n_items=6, n_users=3, dim=8, addons=[spec])
    assert model.hparams["addons"] == [spec]
    save_checkpoint({"hyper_parameters": dict(model.hparams), "state_dict": model.state_dict()},
                    tmp_path / "m.ckpt")
    ckpt = load_checkpoint(tmp_path / "m.ckpt")  # weights_only=True
    again = LightGCN(**ckpt["hyper_parameters"])
    again.load_state_dict(ckpt["state_dict"])
    (addon,) = again.addons
    assert isinstance(addon, ValenceMargin) and addon.spec() == spec
    # models without add-ons keep an empty list (older checkpoints have no "addons" key at all)
    assert BPRMF(n_items=3, n_users=2).hparams["addons"] == []
    assert not [k for k in model.state_dict() if k.startswith("addons.")]  # derived state is not saved


@pytest.mark.parametrize("kwargs, key", [({"margin": -1.0}, "margin"), ({"weight": float("nan")}, "weight"),
                                         ({"pairs_per_step": 0}, "pairs_per_step")])
def test_bad_settings_are_one_clear_error(kwargs: dict, key: str) -> None:
    with pytest.raises(ValueError, match=f"ValenceMargin: {key}=.*addons\\[\\].init_args.{key}"):
        ValenceMargin(**kwargs)


def test_wrong_addon_kind_and_unrated_data_are_refused() -> None:
    with pytest.raises(ValueError, match="is not a EmbeddingAddon subclass"):
        BPRMF(n_items=3, n_users=2, addons=[{"class_path": "recframe.models.generative.TrieRec"}])
    unrated = Interactions.from_raw(["a", "b"], ["x", "y"])
    with pytest.raises(DataError, match="ValenceMargin needs disliked training interactions"):
        ValenceMargin().bind_data(unrated)


def test_generative_addon_paths_still_import_the_shared_pieces() -> None:
    from recframe.models import addons as shared
    from recframe.models.generative.addons import AuxLoss as GenAux
    from recframe.models.generative.addons import GenerativeAddon, addon_from_spec

    assert GenAux is shared.AuxLoss
    assert issubclass(GenerativeAddon, shared.Addon) and issubclass(EmbeddingAddon, shared.Addon)
    with pytest.raises(ValueError, match="not a GenerativeAddon"):
        addon_from_spec(ValenceMargin())
