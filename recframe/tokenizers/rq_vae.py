"""RQ-VAE semantic IDs (TIGER; Rajput et al., 2023).

An encoder MLP maps an item vector ``x`` to a latent ``z``; ``L`` residual codebooks quantise it
coarse to fine (``r_1 = z``; ``c_l = argmin_k ||r_l - e^l_k||``; ``r_{l+1} = r_l - e^l_{c_l}``);
the decoder MLP reconstructs ``x`` from ``z_q = sum_l e^l_{c_l}`` passed with the
straight-through estimator (``z + sg(z_q - z)``). The loss is TIGER's

    L = ||x - x_hat||^2 + sum_l ( ||sg(r_l) - e^l_{c_l}||^2 + beta ||r_l - sg(e^l_{c_l})||^2 ),  beta = 0.25,

and, against codebook collapse, each codebook is initialised by k-means on the first training
batch (level by level on the residuals). The item's semantic ID is ``(c_1, ..., c_L)`` of its
latent after training.

Defaults follow TIGER: encoder ``d -> 512 -> 256 -> 128 -> 32`` with ReLU, decoder mirrored,
3 levels x 256 codes. Choices the paper leaves open or that are scaled down here, with reasons:

* optimiser: Adam (lr 1e-3) instead of TIGER's Adagrad (lr 0.4): TIGER trains 20k epochs on
  large batches, and a few hundred epochs must suffice here. On ML-100K's MiniLM embeddings
  (3 x 64 codes, 300 epochs, batch 256) Adagrad at lr 0.4 diverged (loss ~1e12 in the first epoch,
  every item on one code) while Adam's loss fell from 0.97 to ~0.50 with all codes in use;
* ``epochs`` default 300, ``batch_size`` 256: on ML-100K's 1682 items this is ~2000 steps and
  a few seconds on a CPU. The k-means init batch is the first shuffled batch, so
  ``batch_size`` must be at least the largest codebook size;
* the residual chain uses ``sg(e)`` (``r_{l+1} = r_l - sg(e^l_{c_l})``), so the commitment term of
  level ``l`` moves only the encoder, and each codebook is moved only by its own codebook term;
* no dead-code restarts (not in TIGER); codebook usage is reported in the table's stats;
* inputs are divided by one scalar, the RMS row norm of the training items (``scale_``; 1 for
  unit-norm text embeddings), so that the learning rate means the same for any feature scale: with
  raw large-norm inputs the encoder's latents outgrow codebooks that Adam moves by ~lr per step.

Collaborative regulariser (LETTER; Wang et al., 2024, "Learnable Item Tokenization for Generative
Recommendation", its ``L_CF``): ``fit(features, collaborative=C)`` with ``C [n_items + 1, d_c]`` a
collaborative model's item table (e.g. SASRec's, :func:`recframe.features.collaborative_item_embeddings`)
adds ``collab_weight * L_CF`` to the loss, an InfoNCE with in-batch negatives between the item's
quantised latent and its CF vector:

    L_CF = -(1/B) sum_i log( exp(s_ii / tau) / sum_j exp(s_ij / tau) ),
    s_ij = cos( W zst_i, c_j ),   zst = z + sg(z_q - z)  (the straight-through quantised latent),

``W`` a learned linear map ``latent_dim -> d_c`` (the "small projection"; LETTER uses the raw dot
product because its CF table has the latent's width, 32; here the table's width is the recommender's,
e.g. 64), ``tau = collab_temperature``. Through the straight-through estimator the gradient moves the
encoder (as in LETTER), so items with similar CF vectors get similar latents and hence share codes;
the codebooks still move only by their codebook terms. Choices and reasons: cosine similarity with a
temperature instead of LETTER's raw dot product, so that ``collab_weight`` means the same for any
CF-table scale (SASRec's rows are not unit-norm); ``tau = 0.1`` by default, the usual InfoNCE value
(SimCLR, SimGCL), which gives a loss of ~log(B) at chance and a useful gradient without saturating;
``collab_weight = 0.1`` by default (LETTER's alpha is 0.02 on an unnormalised dot product; with
cosine / 0.1 the term has a comparable size to the reconstruction loss of unit-scaled inputs). LETTER's
diversity regulariser (pulling codes toward k-means clusters of the codebook) and its Sinkhorn
assignment are not implemented; codebook usage is reported in the stats instead. ColaRec (Wang et al.,
2024, "Content-Based Collaborative Generation for Recommendation") aligns content and collaborative
views the same way, by an in-batch contrastive loss, but inside the generator rather than the tokenizer.
Encoding new (cold-start) items needs only their features: the regulariser shapes the encoder. Without
``collaborative`` the fit, the settings and the SID fingerprint are exactly those of plain RQ-VAE.

Everything random (weights, init batch, shuffling, k-means) is seeded from ``seed`` inside a
forked torch RNG, so the global RNG is left untouched. ``device=None`` trains on a GPU when one
is present, else on the CPU; GPU and CPU fits give different (equally valid) codes, so pass
``device="cpu"`` for codes reproducible across machines. The device and ``num_threads`` are
execution details, not part of the settings fingerprint. ``num_threads`` (default 1) caps torch's
CPU threads during the fit: the MLP is too small for intra-op parallelism to pay, and on a busy
machine two threads ran a training step 10x slower than one (measured on the development box).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from recframe.tokenizers.base import SIDTokenizer, check_positive_int, level_sizes
from recframe.tokenizers.kmeans import kmeans


def mlp(sizes: Sequence[int]) -> nn.Sequential:
    """Linear layers through ``sizes`` with ReLU between them (none after the last)."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class ResidualQuantizer(nn.Module):
    """``L`` residual codebooks of ``latent_dim``-vectors with nearest-code assignment."""

    def __init__(self, codebook_sizes: Sequence[int], latent_dim: int) -> None:
        super().__init__()
        self.codebooks = nn.ParameterList(
            [nn.Parameter(torch.randn(k, latent_dim) / latent_dim ** 0.5) for k in codebook_sizes])

    def forward(self, z: torch.Tensor, beta: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(codes [B, L], z_q [B, latent] (sum of chosen codewords), quantisation loss)``."""
        residual, z_q = z, torch.zeros_like(z)
        codes, loss = [], z.new_zeros(())
        for book in self.codebooks:
            idx = torch.cdist(residual.detach(), book.detach()).argmin(1)
            e = book[idx]
            loss = loss + ((residual.detach() - e) ** 2).sum(-1).mean() \
                + beta * ((residual - e.detach()) ** 2).sum(-1).mean()
            codes.append(idx)
            z_q = z_q + e
            residual = residual - e.detach()
        return torch.stack(codes, 1), z_q, loss

    @torch.no_grad()
    def kmeans_init(self, z: torch.Tensor, rng: np.random.Generator, n_iter: int) -> None:
        """Set each codebook to the k-means centroids of its level's residuals of ``z``."""
        residual = z.detach().cpu().double().numpy()
        for book in self.codebooks:
            centres, labels, _ = kmeans(residual, book.shape[0], rng=rng, n_iter=n_iter)
            book.copy_(torch.from_numpy(centres).to(book))
            residual = residual - centres[labels]


class RQVAE(nn.Module):
    """Encoder MLP -> residual quantiser (straight-through) -> decoder MLP."""

    def __init__(self, in_dim: int, hidden: Sequence[int], latent_dim: int,
                 codebook_sizes: Sequence[int]) -> None:
        super().__init__()
        self.encoder = mlp([in_dim, *hidden, latent_dim])
        self.decoder = mlp([latent_dim, *reversed(hidden), in_dim])
        self.quantizer = ResidualQuantizer(codebook_sizes, latent_dim)

    def forward(self, x: torch.Tensor, beta: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(x_hat, codes, quantisation loss)``."""
        return self.forward_latent(x, beta)[:3]

    def forward_latent(self, x: torch.Tensor, beta: float
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(x_hat, codes, quantisation loss, straight-through quantised latent z + sg(z_q - z))``."""
        z = self.encoder(x)
        codes, z_q, q_loss = self.quantizer(z, beta)
        z_st = z + (z_q - z).detach()  # straight-through estimator
        return self.decoder(z_st), codes, q_loss, z_st

    @torch.no_grad()
    def codes(self, x: torch.Tensor) -> torch.Tensor:
        """Semantic codes ``[B, L]`` of ``x``."""
        return self.quantizer(self.encoder(x), 0.0)[0]


def info_nce(queries: torch.Tensor, keys: torch.Tensor, temperature: float) -> torch.Tensor:
    """In-batch InfoNCE: ``-mean_i log softmax_j(cos(q_i, k_j) / temperature)[i]`` (row ``i``'s positive is
    key ``i``, every other key in the batch is a negative)."""
    q = nn.functional.normalize(queries, dim=-1)
    k = nn.functional.normalize(keys, dim=-1)
    logits = q @ k.T / temperature
    return nn.functional.cross_entropy(logits, torch.arange(len(q), device=q.device))


class RQVAETokenizer(SIDTokenizer):
    """TIGER's RQ-VAE tokenizer (module docstring for the architecture and the choices).

    Args:
        n_levels: residual levels ``L``.
        codebook_size: codes per level (an int, or one per level).
        latent_dim: latent width (TIGER: 32).
        hidden: encoder hidden widths (decoder mirrored; TIGER: 512, 256, 128).
        beta: commitment weight (TIGER: 0.25).
        epochs: passes over the items.
        batch_size: items per step; also the k-means init batch (>= largest codebook size).
        lr: Adam learning rate.
        kmeans_iters: Lloyd iterations of the codebook init.
        seed: seed of all randomness.
        device: torch device to train on (None: GPU when present; not part of the fingerprint).
        num_threads: torch CPU threads during the fit (None: leave torch's setting alone).
        collab_weight: weight of the collaborative InfoNCE term (used only when ``fit`` gets a
            ``collaborative`` matrix; module docstring).
        collab_temperature: its temperature ``tau``.

    Fitted attributes: ``model_`` (the :class:`RQVAE`, in eval mode on CPU), ``scale_`` (the
    input scale), ``collab_proj_`` (the projection ``W``, or None), ``collab_history_`` (mean ``L_CF`` per
    epoch, empty without a collaborative matrix), ``loss_history_``
    (mean loss per epoch), ``init_usage_`` (codebook usage per level over all items right after the
    k-means init), ``table_``.
    """

    name = "rq_vae"
    accepts_collaborative = True

    def __init__(self, n_levels: int = 3, codebook_size: int | Sequence[int] = 256, *, latent_dim: int = 32,
                 hidden: Sequence[int] = (512, 256, 128), beta: float = 0.25, epochs: int = 300,
                 batch_size: int = 256, lr: float = 1e-3, kmeans_iters: int = 50, seed: int = 0,
                 device: str | None = None, num_threads: int | None = 1, collab_weight: float = 0.1,
                 collab_temperature: float = 0.1) -> None:
        self.n_levels = n_levels
        self.codebook_size = codebook_size
        self._sizes = level_sizes(n_levels, codebook_size)
        self.latent_dim = check_positive_int("latent_dim", latent_dim)
        self.hidden = tuple(check_positive_int("hidden", h) for h in hidden)
        if not beta >= 0:
            raise ValueError(f"beta must be >= 0; got {beta!r}.")
        if not lr > 0:
            raise ValueError(f"lr must be > 0; got {lr!r}.")
        self.beta, self.lr = float(beta), float(lr)
        self.epochs = check_positive_int("epochs", epochs, minimum=0)
        self.batch_size = check_positive_int("batch_size", batch_size)
        if self.batch_size < max(self._sizes):
            raise ValueError(f"batch_size ({batch_size}) must be >= the largest codebook size "
                             f"({max(self._sizes)}): the first batch initialises the codebooks by k-means.")
        self.kmeans_iters = check_positive_int("kmeans_iters", kmeans_iters)
        self.seed = check_positive_int("seed", seed, minimum=0)
        self.device = device
        self.num_threads = None if num_threads is None else check_positive_int("num_threads", num_threads)
        if not collab_weight >= 0:
            raise ValueError(f"collab_weight must be >= 0; got {collab_weight!r}.")
        if not collab_temperature > 0:
            raise ValueError(f"collab_temperature must be > 0; got {collab_temperature!r}.")
        self.collab_weight, self.collab_temperature = float(collab_weight), float(collab_temperature)
        self._with_collab = False

    @property
    def codebook_sizes(self) -> tuple[int, ...]:
        return self._sizes

    def _settings(self) -> dict[str, Any]:
        settings = {"codebook_sizes": list(self._sizes), "latent_dim": self.latent_dim,
                    "hidden": list(self.hidden), "beta": self.beta, "epochs": self.epochs,
                    "batch_size": self.batch_size, "lr": self.lr,
                    "optimizer": "adam", "kmeans_iters": self.kmeans_iters, "seed": self.seed}
        if self._with_collab:  # only then, so plain RQ-VAE tables keep their fingerprints
            settings.update(collab_weight=self.collab_weight, collab_temperature=self.collab_temperature)
        return settings

    def _fit_codes(self, items: np.ndarray, collaborative: np.ndarray | None = None
                   ) -> tuple[np.ndarray, dict[str, Any]]:
        n = len(items)
        if n < max(self._sizes):
            raise ValueError(f"RQ-VAE needs at least as many items ({n}) as codes per level "
                             f"({max(self._sizes)}); use a smaller codebook_size.")
        device = torch.device(self.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.scale_ = float(np.sqrt((items.astype(np.float64) ** 2).sum(1).mean())) or 1.0
        threads = torch.get_num_threads()
        try:
            if self.num_threads is not None:
                torch.set_num_threads(self.num_threads)
            self._with_collab = collaborative is not None
            return self._train(items / self.scale_, device, collaborative)
        finally:
            torch.set_num_threads(threads)

    def _train(self, items: np.ndarray, device: torch.device, collaborative: np.ndarray | None = None
               ) -> tuple[np.ndarray, dict[str, Any]]:
        n = len(items)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(self.seed)
            gen = torch.Generator().manual_seed(self.seed)
            x = torch.from_numpy(items).float().to(device)
            model = RQVAE(items.shape[1], self.hidden, self.latent_dim, self._sizes).to(device)
            order = torch.randperm(n, generator=gen).to(device)
            with torch.no_grad():
                model.quantizer.kmeans_init(model.encoder(x[order[: self.batch_size]]),
                                            np.random.default_rng(self.seed), self.kmeans_iters)
                self.init_usage_ = _usage(model.codes(x), self._sizes)
            params = list(model.parameters())
            proj, cf = None, None
            if collaborative is not None:
                cf = torch.from_numpy(np.ascontiguousarray(collaborative, dtype=np.float32)).to(device)
                proj = nn.Linear(self.latent_dim, cf.shape[1]).to(device)
                params += list(proj.parameters())
            opt = torch.optim.Adam(params, lr=self.lr)
            history, collab_history = [], []
            for epoch in range(self.epochs):
                if epoch:
                    order = torch.randperm(n, generator=gen).to(device)
                total, total_cf = 0.0, 0.0
                for start in range(0, n, self.batch_size):
                    idx = order[start:start + self.batch_size]
                    xb = x[idx]
                    x_hat, _, q_loss, z_st = model.forward_latent(xb, self.beta)
                    loss = ((x_hat - xb) ** 2).sum(-1).mean() + q_loss
                    if proj is not None:
                        cf_loss = info_nce(proj(z_st), cf[idx], self.collab_temperature)
                        loss = loss + self.collab_weight * cf_loss
                        total_cf += float(cf_loss.detach()) * len(xb)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    total += float(loss.detach()) * len(xb)
                history.append(total / n)
                if proj is not None:
                    collab_history.append(total_cf / n)
            model = model.cpu().eval()
            self.collab_proj_ = None if proj is None else proj.cpu().eval()
            with torch.no_grad():
                x = x.cpu()
                x_hat, codes, q_loss = model(x, self.beta)
                recon = float(((x_hat - x) ** 2).sum(-1).mean()) * self.scale_ ** 2  # in input units
        self.model_ = model
        self.loss_history_ = history
        self.collab_history_ = collab_history
        codes = codes.numpy().astype(np.int64)
        extra = {"collab_loss_first_epoch": collab_history[0], "collab_loss_last_epoch": collab_history[-1]} \
            if collab_history else {}
        return codes, {"init_usage": self.init_usage_, "loss_first_epoch": history[0] if history else None,
                       "loss_last_epoch": history[-1] if history else None, "reconstruction_mse": recon,
                       "quantization_loss": float(q_loss), "input_scale": self.scale_, **extra}

    def _encode(self, vectors: np.ndarray) -> np.ndarray:
        x = torch.from_numpy(vectors / self.scale_).float()
        return self.model_.codes(x).numpy().astype(np.int64)


def _usage(codes: torch.Tensor, sizes: Sequence[int]) -> list[float]:
    return [len(torch.unique(codes[:, level])) / k for level, k in enumerate(sizes)]
