"""Auxiliary losses under DDP: the weighting documented in :mod:`recframe.models.addons`.

Ranks are simulated in one process: the real ``training_step`` runs on each rank's shard with a trainer
stand-in whose strategy sums the ranks' term counts (what ``strategy.reduce(..., "sum")`` does under DDP),
and the ranks' gradients are averaged as DDP averages them. Checked, on uneven shards:

* the step's gradient is ``sum_r (n_r / N) * grad(main_r + sum_a w_a * aux_a_r)`` (embedding and generative
  models);
* an auxiliary term that averages over the main loss's own rows equals one process on the union batch;
* one that averages over units of its own (distinct items) does not, it gets the share-weighted mean;
* the logged epoch value of ``train/aux_<name>`` weights every step by its batch rows.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from torch import Tensor

from recframe.models import BPRMF
from recframe.models.addons import AuxLoss, EmbeddingAddon
from recframe.models.generative import TIGER, GenerativeAddon
from tests.generative.fixtures.make_legacy import KW, SIZES, codes

#: float32 sums in another order: the gradients agree to round-off
TOL = {"rtol": 1e-5, "atol": 1e-7}


class RowNorm(EmbeddingAddon):
    """Mean over the batch rows of the user vector's squared norm: one unit per main-loss term."""

    def __init__(self, weight: float = 0.5) -> None:
        super().__init__()
        self.weight = weight

    def auxiliary_losses(self, model: Any, batch: dict[str, Tensor]) -> list[AuxLoss]:
        return [AuxLoss("row_norm", self.weight, model.user_emb(batch["users"]).pow(2).sum(-1).mean())]


class DistinctItemNorm(EmbeddingAddon):
    """Mean over the batch's *distinct* positive items of their squared norm: units of its own."""

    def __init__(self, weight: float = 0.5) -> None:
        super().__init__()
        self.weight = weight

    def auxiliary_losses(self, model: Any, batch: dict[str, Tensor]) -> list[AuxLoss]:
        items = torch.unique(batch["pos"])
        return [AuxLoss("item_norm", self.weight, model.item_emb(items).pow(2).sum(-1).mean())]


class TargetPrior(GenerativeAddon):
    """Generative toy: mean over non-padding targets of a learned per-item penalty (the main loss's units)."""

    def __init__(self, weight: float = 0.3) -> None:
        super().__init__()
        self.weight = weight

    def build(self, backbone: Any) -> None:
        self.penalty = torch.nn.Parameter(torch.linspace(0.0, 1.0, backbone.n_items + 1))

    def auxiliary_losses(self, backbone: Any, inputs: Tensor, targets: Tensor) -> list[AuxLoss]:
        return [AuxLoss("target_prior", self.weight, self.penalty[targets[targets > 0]].pow(2).mean())]


def _attach(model: Any, world: int, total_terms: int) -> list[tuple[str, float, int]]:
    """A trainer stand-in of ``world`` ranks; returns the list that records ``model.log`` calls."""
    logged: list[tuple[str, float, int]] = []
    strategy = SimpleNamespace(reduce=lambda value, reduce_op: torch.full_like(value, float(total_terms)))
    model._trainer = SimpleNamespace(world_size=world, strategy=strategy)
    model.log = lambda name, value, batch_size=None, **_: logged.append(
        (name, float(value.detach()), batch_size))
    return logged


def _grad(model: Any, loss: Tensor) -> Tensor:
    model.zero_grad()
    loss.backward()
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten()
                      for p in model.parameters()])


def _ddp_grad(model: Any, shards: list[dict[str, Tensor]]) -> Tensor:
    """The gradient DDP applies: the mean over ranks of each rank's ``training_step`` gradient."""
    total = sum(model.loss_terms(b) for b in shards)
    _attach(model, len(shards), total)
    return torch.stack([_grad(model, model.training_step(b, 0)) for b in shards]).mean(0)


def _formula_grad(model: Any, shards: list[dict[str, Tensor]], own_loss: Any) -> Tensor:
    """``sum_r (n_r / N) * grad(main_r + sum_a w_a * aux_a_r)``, from the model's loss and terms directly."""
    counts = [model.loss_terms(b) for b in shards]
    return sum(n / sum(counts) * _grad(model, own_loss(b)) for n, b in zip(counts, shards))


def _pairwise(n: int, seed: int, positives: tuple[int, int] = (1, 6), n_users: int = 30,
              n_items: int = 40) -> dict[str, Tensor]:
    """``n`` BPR rows whose positives are drawn from ``range(*positives)`` (few distinct items)."""
    gen = torch.Generator().manual_seed(seed)
    return {"users": torch.randint(1, n_users + 1, (n,), generator=gen),
            "pos": torch.randint(*positives, (n,), generator=gen),
            "neg": torch.randint(1, n_items + 1, (n,), generator=gen)}


def _bpr(addon: EmbeddingAddon) -> BPRMF:
    torch.manual_seed(0)
    return BPRMF(n_items=40, n_users=30, dim=8, addons=[addon])


def _with_aux(model: Any) -> Any:
    def loss(batch: dict[str, Tensor]) -> Tensor:
        return model.loss(batch) + sum(t.weight * t.value for t in model.addon_losses(batch))
    return loss


def _union(shards: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    return {k: torch.cat([b[k] for b in shards]) for k in shards[0]}


def test_embedding_aux_terms_follow_the_per_rank_formula() -> None:
    shards = [_pairwise(40, seed=1), _pairwise(24, seed=2)]  # uneven: n_r = 40 and 24
    for addon in (RowNorm(), DistinctItemNorm()):
        model = _bpr(addon)
        torch.testing.assert_close(_ddp_grad(model, shards), _formula_grad(model, shards, _with_aux(model)),
                                   **TOL)


def test_a_per_row_aux_term_equals_one_process_on_the_union_batch() -> None:
    shards = [_pairwise(40, seed=1), _pairwise(24, seed=2)]
    model = _bpr(RowNorm())
    ddp = _ddp_grad(model, shards)
    _attach(model, 1, 0)
    single = _grad(model, model.training_step(_union(shards), 0))
    torch.testing.assert_close(ddp, single, **TOL)


def test_an_aux_term_over_its_own_units_gets_the_share_weighted_mean_not_the_union_mean() -> None:
    shards = [_pairwise(40, seed=1, positives=(1, 6)), _pairwise(24, seed=2, positives=(6, 8))]
    model = _bpr(DistinctItemNorm())
    assert [len(torch.unique(b["pos"])) for b in shards] == [5, 2]  # 5 and 2 items for 40 and 24 rows
    ddp = _ddp_grad(model, shards)
    _attach(model, 1, 0)
    single = _grad(model, model.training_step(_union(shards), 0))
    assert not torch.allclose(ddp, single, rtol=1e-4, atol=1e-6)
    # the main loss alone still matches the union: the difference is the auxiliary term's weighting
    main_only = _bpr(DistinctItemNorm(weight=0.0))
    ddp_main = _ddp_grad(main_only, shards)
    _attach(main_only, 1, 0)
    torch.testing.assert_close(ddp_main, _grad(main_only, main_only.training_step(_union(shards), 0)), **TOL)


def test_equal_shares_give_the_plain_mean_over_ranks() -> None:
    shards = [_pairwise(32, seed=3), _pairwise(32, seed=4)]
    model = _bpr(DistinctItemNorm())
    plain_mean = torch.stack([_grad(model, _with_aux(model)(b)) for b in shards]).mean(0)
    torch.testing.assert_close(_ddp_grad(model, shards), plain_mean, **TOL)


def test_generative_aux_terms_follow_the_per_rank_formula() -> None:
    """Generative models add the terms inside ``loss``; ``n_r`` counts non-padding targets."""
    torch.manual_seed(0)
    model = TIGER(n_items=40, addons=[TargetPrior()], **{**KW, "dropout": 0.0})
    model._build(codes(), SIZES)
    inputs = torch.tensor([[0, 0, 3, 5, 7, 9], [1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 11, 12],
                           [0, 4, 8, 12, 16, 20]])
    targets = torch.tensor([[0, 0, 5, 7, 9, 11], [2, 3, 4, 5, 6, 8], [0, 0, 0, 0, 12, 13],
                            [0, 8, 12, 16, 20, 24]])
    shards = [{"input": inputs[:3], "target": targets[:3]}, {"input": inputs[3:], "target": targets[3:]}]
    assert [model.loss_terms(b) for b in shards] == [12, 5]
    torch.testing.assert_close(_ddp_grad(model, shards), _formula_grad(model, shards, model.loss), **TOL)
    # per-target units, as the main loss's: one process on the union batch
    ddp = _ddp_grad(model, shards)
    _attach(model, 1, 0)
    torch.testing.assert_close(ddp, _grad(model, model.training_step(_union(shards), 0)), **TOL)


def test_the_aux_value_is_logged_per_step_with_its_batch_rows() -> None:
    """Lightning's epoch mean of ``train/aux_<name>`` weights each logged value by its ``batch_size``, and
    ``sync_dist`` sums both over ranks: the logged monitor is the row-weighted mean over all steps."""
    model = _bpr(DistinctItemNorm())
    shards = [_pairwise(40, seed=1), _pairwise(24, seed=2)]
    logged = _attach(model, 2, 64)
    for batch in shards:
        model.training_step(batch, 0)
    aux = [(value, rows) for name, value, rows in logged if name == "train/aux_item_norm"]
    assert [rows for _, rows in aux] == [40, 24]
    for (value, _), batch in zip(aux, shards):
        (term,) = model.addon_losses(batch)
        assert abs(value - float(term.value.detach())) < 1e-6  # the rank's unscaled term


# ---------------------------------------------------------------------- 2 CPU processes on gloo
class TargetNorm(EmbeddingAddon):
    """Sequence toy: mean over non-padding targets of the target item's squared norm (SASRec's own units)."""

    def __init__(self, weight: float = 0.5) -> None:
        super().__init__()
        self.weight = weight

    def auxiliary_losses(self, model: Any, batch: dict[str, Tensor]) -> list[AuxLoss]:
        targets = batch["target"][batch["target"] > 0]
        return [AuxLoss("target_norm", self.weight, model.item_embeddings()[targets].pow(2).sum(-1).mean())]


GLOO_DRIVER = '''
import sys
import torch
from recframe.cli import run_cli

out, devices, batch, config = sys.argv[1:5]
cli = run_cli(["--config", config, "--model.init_args.dropout", "0", "--model.init_args.attn_dropout", "0",
               "--model.init_args.addons",
               '[{"class_path": "tests.models.test_addon_ddp.TargetNorm", "init_args": {"weight": 0.5}}]',
               "--data.batch_size", batch, "--trainer.max_epochs", "2", "--trainer.accelerator", "cpu",
               "--trainer.devices", devices, "--trainer.strategy", "ddp" if devices != "1" else "auto",
               "--trainer.enable_progress_bar", "false",
               "--trainer.limit_val_batches", "0", "--trainer.logger", "false"], run=False)
cli.trainer.fit(cli.model, cli.datamodule)
if cli.trainer.global_rank == 0:
    torch.save(cli.model.state_dict(), out)
'''


def test_two_gloo_processes_weight_a_per_target_aux_term_like_one_process(tmp_path) -> None:
    """Real DDP (2 CPU processes, gloo, batch 32 each) with a per-target auxiliary term trains the weights of
    one process with batch 64, to float tolerance (dropout off: every draw is the same)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    script = tmp_path / "driver.py"
    script.write_text(GLOO_DRIVER)
    env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    states = []
    for devices, batch in ((1, 64), (2, 32)):
        out = tmp_path / f"w{devices}.pt"
        proc = subprocess.run([sys.executable, str(script), str(out), str(devices), str(batch),
                               str(root / "configs" / "smoke" / "sasrec.yaml")],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-4000:]
        states.append(torch.load(out, weights_only=True))
    single, ddp = states
    assert single.keys() == ddp.keys()
    for key, value in single.items():  # the tolerance of tests/test_ddp.py (Adam scales round-off)
        torch.testing.assert_close(ddp[key], value, rtol=1e-4, atol=1e-4, msg=key)
