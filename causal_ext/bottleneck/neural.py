"""A nonlinear bottleneck estimator: a small network that predicts the child through a k-dimensional layer.

For an SCBM mechanism ``X_j := m_j(b_j(X_pa), N_j)`` with a *nonlinear* bottleneck
``b_j: R^{d_in} -> R^r``, reduced-rank regression only sees the part of ``b_j`` that
is linear in the parents (none at all when ``b_j`` is even, e.g. ``(u^T x)^2``).
This estimator fits

    x  ->  h(x) = W_2 σ(W_1 x_std + c_1) + c_2 in R^k     (encoder, the bottleneck b_hat)
    h  ->  g(h) = V_2 σ(V_1 h + e_1) + e_2 in R^{d_out}   (decoder)

by least squares on standardised parents and child (σ = ``tanh`` or ``relu``,
Adam, full batch, weight decay, early stopping on a held-out fraction with the best
epoch restored). If the fit reaches the population optimum ``g(h(x)) = E[X_j |
X_pa = x]`` and that conditional mean is an injective function of ``b_j(x)`` (it
is ``A b_j(x)`` with ``A`` of full column rank in the SCBMs simulated here), then
``b_j(x)`` is a function of ``h(x)``, and with ``k = r`` the two are equal up to a
bijection — the SCBM identification result, now with a nonlinear bijection. What
this does *not* give: with ``k < r`` part of ``b_j`` is lost, with too few samples
the network does not reach the optimum, and a bottleneck is only identified up to
what the child's conditional mean reveals about it.

Reference for the construction: the "bottleneck network" / nonlinear reduced-rank
regression idea goes back to Kramer (1991, AIChE J. 37:233) for autoencoders; here
the network predicts the child rather than reconstructing its input, as the SCBM
paper suggests ("estimable via standard learning algorithms").
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch import nn

from causal_ext.bottleneck.arrays import as_matrix, check_rows

__all__ = ["NeuralBottleneck", "ACTIVATIONS"]

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


class _BottleneckNet(nn.Module):
    """Encoder to ``rank`` units (linear output), decoder from them to the child."""

    def __init__(self, d_in: int, d_out: int, rank: int, hidden: int, activation: str) -> None:
        super().__init__()
        act = ACTIVATIONS[activation]
        self.encoder = nn.Sequential(nn.Linear(d_in, hidden), act(), nn.Linear(hidden, rank))
        self.decoder = nn.Sequential(nn.Linear(rank, hidden), act(), nn.Linear(hidden, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


class _TorchThreads:
    """Set torch's intra-op thread count for a block and restore it afterwards."""

    def __init__(self, n: int | None) -> None:
        self.n = n

    def __enter__(self) -> None:
        self.old = torch.get_num_threads()
        if self.n is not None:
            torch.set_num_threads(self.n)

    def __exit__(self, *exc: Any) -> None:
        torch.set_num_threads(self.old)


class NeuralBottleneck:
    """Nonlinear bottleneck ``b_hat(x)`` (``rank`` dimensions) of the mechanism parents -> child.

    Args:
        rank: width ``k`` of the bottleneck layer (>= 1).
        hidden: units of the encoder's and the decoder's hidden layer.
        activation: ``"relu"`` (default; it fitted the squared-bottleneck designs of the benchmark
            better than ``tanh``, which stalled at the mean for n = 500) or ``"tanh"``.
        max_epochs: full-batch Adam steps at most.
        lr: Adam learning rate.
        weight_decay: L2 penalty (Adam's ``weight_decay``).
        val_fraction: share of rows held out for early stopping (0 disables it and
            trains ``max_epochs`` steps).
        patience: steps without a held-out improvement before stopping.
        seed: seed of the initialisation and the held-out split.
        n_threads: torch threads during ``fit`` (None leaves the setting alone).

    Attributes (after :meth:`fit`):
        rank_: the bottleneck width.
        n_features_in_: ``d_in``.
        epochs_: steps run; best_epoch_: the restored step.
        train_loss_, val_loss_: mean squared error on standardised child at the best
            step (``val_loss_`` is ``nan`` without a held-out part).
        net_: the fitted torch module (encoder, decoder).
        x_mean_, x_scale_, y_mean_, y_scale_: standardisation constants.
    """

    def __init__(self, rank: int, *, hidden: int = 64, activation: str = "relu", max_epochs: int = 1500,
                 lr: float = 1e-2, weight_decay: float = 1e-4, val_fraction: float = 0.2, patience: int = 100,
                 seed: int = 0, n_threads: int | None = 1) -> None:
        self.rank = rank
        self.hidden = hidden
        self.activation = activation
        self.max_epochs = max_epochs
        self.lr = lr
        self.weight_decay = weight_decay
        self.val_fraction = val_fraction
        self.patience = patience
        self.seed = seed
        self.n_threads = n_threads

    def _validate(self) -> None:
        if int(self.rank) != self.rank or self.rank < 1:
            raise ValueError(f"rank (the bottleneck width) must be an integer >= 1; got {self.rank!r}")
        if self.hidden < 1 or self.max_epochs < 1 or self.patience < 1:
            raise ValueError(f"hidden, max_epochs and patience must be >= 1; got {self.hidden}, "
                             f"{self.max_epochs}, {self.patience}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}; got {self.activation!r}")
        if not 0 <= self.val_fraction < 1:
            raise ValueError(f"val_fraction must be in [0, 1); got {self.val_fraction}")
        if self.lr <= 0 or self.weight_decay < 0:
            raise ValueError(f"lr must be > 0 and weight_decay >= 0; got {self.lr}, {self.weight_decay}")

    def fit(self, parents: np.ndarray, child: np.ndarray) -> NeuralBottleneck:
        """Train on samples of the parents ``(n, d_in)`` and the child ``(n, d_out)``."""
        self._validate()
        X, Y = as_matrix("parents", parents), as_matrix("child", child)
        n = check_rows(parents=X, child=Y)
        n_val = int(round(self.val_fraction * n))
        if self.val_fraction and (n_val < 2 or n - n_val < 2):
            raise ValueError(f"val_fraction={self.val_fraction} leaves fewer than 2 rows on one side of "
                             f"the early-stopping split of n={n}; use more rows or val_fraction=0")
        self.x_mean_, self.x_scale_ = X.mean(axis=0), _scale(X)
        self.y_mean_, self.y_scale_ = Y.mean(axis=0), _scale(Y)
        with _TorchThreads(self.n_threads):
            self._train((X - self.x_mean_) / self.x_scale_, (Y - self.y_mean_) / self.y_scale_, n_val)
        self.rank_ = int(self.rank)
        self.n_features_in_ = X.shape[1]
        return self

    def _train(self, xs: np.ndarray, ys: np.ndarray, n_val: int) -> None:
        gen = torch.Generator().manual_seed(self.seed)
        torch.manual_seed(self.seed)
        net = _BottleneckNet(xs.shape[1], ys.shape[1], int(self.rank), self.hidden, self.activation).double()
        order = torch.randperm(xs.shape[0], generator=gen).numpy()
        val, train = order[:n_val], order[n_val:]
        x_tr, y_tr = torch.from_numpy(xs[train]), torch.from_numpy(ys[train])
        x_va, y_va = torch.from_numpy(xs[val]), torch.from_numpy(ys[val])
        opt = torch.optim.Adam(net.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        best, best_state, best_epoch, wait, epoch = np.inf, None, 0, 0, 0
        for epoch in range(1, self.max_epochs + 1):
            opt.zero_grad()
            loss = torch.mean((net(x_tr) - y_tr) ** 2)
            loss.backward()
            opt.step()
            if not n_val:
                continue
            with torch.no_grad():
                val_loss = float(torch.mean((net(x_va) - y_va) ** 2))
            if val_loss < best - 1e-6:
                best, best_state, best_epoch, wait = val_loss, copy.deepcopy(net.state_dict()), epoch, 0
            else:
                wait += 1
                if wait >= self.patience:
                    break
        if best_state is not None:
            net.load_state_dict(best_state)
        else:
            best_epoch = epoch
        with torch.no_grad():
            self.train_loss_ = float(torch.mean((net(x_tr) - y_tr) ** 2))
        self.val_loss_ = float(best) if n_val else float("nan")
        self.epochs_, self.best_epoch_ = epoch, best_epoch
        self.net_ = net.eval()

    def _inputs(self, parents: np.ndarray) -> torch.Tensor:
        if not hasattr(self, "net_"):
            raise RuntimeError("NeuralBottleneck is not fitted; call fit(parents, child) first")
        X = as_matrix("parents", parents, min_rows=1)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"parents must have {self.n_features_in_} columns; got {X.shape[1]}")
        return torch.from_numpy((X - self.x_mean_) / self.x_scale_)

    def transform(self, parents: np.ndarray) -> np.ndarray:
        """Bottleneck scores ``b_hat(x)``, shape ``(n, rank_)`` (the encoder's output)."""
        x = self._inputs(parents)
        with torch.no_grad(), _TorchThreads(self.n_threads):
            return self.net_.encoder(x).numpy()

    def predict(self, parents: np.ndarray) -> np.ndarray:
        """Predicted child ``E_hat[child | parents]`` in original units, shape ``(n, d_out)``."""
        x = self._inputs(parents)
        with torch.no_grad(), _TorchThreads(self.n_threads):
            out = self.net_(x).numpy()
        return self.y_mean_ + out * self.y_scale_


def _scale(a: np.ndarray) -> np.ndarray:
    """Column standard deviations, 1 where a column is constant."""
    s = a.std(axis=0)
    return np.where(s > 0, s, 1.0)
