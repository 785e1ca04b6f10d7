"""CAE of a stated explanation of a trained recommender, as a Lightning callback.

The explanation tested by :class:`GenreHistogramCAE` is *"the model's recommendations
depend on the history only through its genre histogram"*. It is cast as a causal
abstraction of the trained model:

* **low level**: the model itself: ``history`` (a left-padded item sequence; natural
  distribution: the test users' histories) ``-> scores`` (``pl_module.score`` on
  ``{"users": 0, "history": ...}``, padding and the history's own items masked to
  ``-inf`` as a served recommender would);
* **high level**: ``Histogram -> Prediction``. ``Histogram`` counts the history's items
  per genre; ``Prediction`` is the genre mix of the top-``k`` recommendations (shares
  summing to 1). The explanation states *what* the prediction depends on, not a formula,
  so its mechanism ``g(histogram)`` is read off the model at a canonical history with
  that histogram: genre after genre in genre order, each genre's most popular items
  (training counts), left-padded. If the explanation is right, every history with the
  same histogram gets the same prediction as the canonical one and the CAE is 0;
* **abstraction**: ``Histogram <- [history]`` by counting (grounding: for each genre,
  that many distinct items drawn uniformly from the genre, in random order), and
  ``Prediction <- [scores]`` by the top-``k`` genre shares.

A genre is an item's *first* category; the ``max_genres`` most frequent ones are kept
and all other items (or items without categories) share an ``other`` bucket. Only the
histogram is intervened on (``max_targets = 0``); both directions are reported:
top-down draws a test user's histogram and a random history realising it, bottom-up a
test user's actual history. With the ``mse`` distance the CAE is the squared gap
between the two predictions' genre mixes over their pooled variance, i.e. roughly the
share of the prediction's variation that the histogram does not explain.

At ``on_test_end`` the callback reads the test users' histories (the first
``max_histories``, as the test loader pads them), genres and training popularity from the
datamodule's read-only evaluation view. The report (CAE per distance and direction,
per-direction standard errors, the genres and settings) is published by
:class:`~recframe.callbacks.ReportCallback`: kept in ``report_``, written as JSON
(atomically) when ``output`` is set, logged as ``cae/<distance>``, and saved in the
checkpoint as a JSON string, so checkpoints still load with ``weights_only=True``.

YAML (under ``trainer.callbacks``)::

    - class_path: causal_ext.abstraction.callback.GenreHistogramCAE
      init_args: {output: runs/cae_genre.json, n_interventions: 30, top_k: 10}
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import lightning as L
import numpy as np
import torch

from causal_ext.abstraction.abstraction import Abstraction
from causal_ext.abstraction.cae import CausalAbstractionError
from causal_ext.abstraction.domains import Empirical, Uniform
from causal_ext.abstraction.scm import SCM
from causal_ext.abstraction.valuemaps import ValueMap
from recframe.callbacks import ReportCallback
from recframe.data.eval_view import EvaluationView
from recframe.metrics.topk import masked_top_k


def primary_genres(features: Any, n_items: int, max_genres: int = 8) -> tuple[np.ndarray, list[str]]:
    """Genre index of items ``0..n_items`` (first category; rarer ones and padding share ``other``).

    Returns:
        (genre ``[n_items + 1]`` in ``0..G``, ``G`` being the ``other`` bucket; the ``G + 1`` genre names).

    Raises:
        ValueError: no categories to read genres from, or ``max_genres < 1``.
    """
    if max_genres < 1:
        raise ValueError(f"max_genres={max_genres} must be >= 1.")
    if features is None or features.categories is None:
        raise ValueError("the datamodule's items have no categories (Interactions.item_features.categories); "
                         "GenreHistogramCAE reads each item's genre from its first category.")
    cats = [c[0] if c else None for c in features.categories[:n_items + 1]]
    top = [g for g, _ in Counter(c for c in cats[1:] if c is not None).most_common(max_genres)]
    if not top:
        raise ValueError("no item has a category; GenreHistogramCAE needs genres to build histograms.")
    index = {g: i for i, g in enumerate(top)}
    genre = np.array([index.get(c, len(top)) if c is not None else len(top) for c in cats], dtype=np.int64)
    genre[0] = len(top)
    return genre, [*top, "other"]


class GenreHistogram(ValueMap):
    """History ``[n, L]`` (0 = padding) to genre counts ``[n, G + 1]`` (module docstring).

    Grounding draws, per genre, that many distinct items of the genre (with replacement only
    when the genre has too few), shuffles them and left-pads to the history length.
    """

    def __init__(self, genre: np.ndarray, n_genres: int) -> None:
        self.genre, self.n_genres = np.asarray(genre), n_genres
        self.pools = [np.flatnonzero(self.genre[1:] == g) + 1 for g in range(n_genres)]

    def abstract(self, micro: Sequence[np.ndarray]) -> np.ndarray:
        hist = np.asarray(micro[0]).astype(np.int64)
        counts = np.zeros((len(hist), self.n_genres))
        rows, cols = np.nonzero(hist > 0)
        np.add.at(counts, (rows, self.genre[hist[rows, cols]]), 1.0)
        return counts

    def ground(self, macro, shapes, rng):
        length = int(shapes[0][0])
        counts = np.rint(np.asarray(macro, dtype=float)).astype(np.int64)
        out = np.zeros((len(counts), length), dtype=np.int64)
        for i, row in enumerate(counts):
            items = []
            for g, c in enumerate(row):
                if c <= 0:
                    continue
                pool = self.pools[g]
                if len(pool) == 0:
                    raise ValueError(f"GenreHistogram: genre {g} has no items to ground a count of {c}.")
                items.append(rng.choice(pool, size=c, replace=c > len(pool)))
            seq = rng.permutation(np.concatenate(items))[-length:] if items else np.zeros(0, dtype=np.int64)
            out[i, length - len(seq):] = seq
        return [out]


def top_k_items(scores: np.ndarray, k: int) -> np.ndarray:
    """Ids of the ``k`` highest scores of each row of ``scores`` ``[n, n_items + 1]``, best first.

    The one masked top-K (:func:`~recframe.metrics.topk.masked_top_k`) on rows that come masked: the
    low-level model puts the padding column and the history's items at ``-inf``. A row with fewer than
    ``k`` eligible items fills the rest with the padding id 0 (genre ``other``).
    """
    rows = torch.from_numpy(np.asarray(scores, dtype=np.float64))
    return masked_top_k(rows, k, masked_scores=True).items.numpy()


class TopKGenreShare(ValueMap):
    """Scores ``[n, n_items + 1]`` to the genre shares of the top-``k`` items ``[n, G + 1]``.

    Grounding writes score 1 on the most popular items of each genre in proportion to the
    shares (rounded to ``k`` items in total) and 0 elsewhere.
    """

    def __init__(self, genre: np.ndarray, n_genres: int, k: int, popularity: np.ndarray) -> None:
        self.genre, self.n_genres, self.k = np.asarray(genre), n_genres, k
        order = np.argsort(-np.asarray(popularity, dtype=float), kind="stable")
        self.ranked = [order[(self.genre[order] == g) & (order > 0)] for g in range(n_genres)]

    def abstract(self, micro):
        scores = np.asarray(micro[0], dtype=float)
        top = top_k_items(scores, self.k)
        shares = np.zeros((len(scores), self.n_genres))
        np.add.at(shares, (np.repeat(np.arange(len(scores)), self.k), self.genre[top].ravel()), 1.0 / self.k)
        return shares

    def ground(self, macro, shapes, rng):
        shares = np.asarray(macro, dtype=float)
        out = np.zeros((len(shares), *shapes[0]))
        for i, row in enumerate(shares):
            counts = np.floor(row * self.k + 0.5).astype(np.int64)
            for g, c in enumerate(counts):
                out[i, self.ranked[g][:c]] = 1.0
        return [out]


def canonical_histories(counts: np.ndarray, genre_items_by_popularity: Sequence[np.ndarray],
                        length: int) -> np.ndarray:
    """For each histogram row, its genres' most popular items, genre by genre, left-padded."""
    counts = np.rint(np.asarray(counts, dtype=float)).astype(np.int64)
    out = np.zeros((len(counts), length), dtype=np.int64)
    for i, row in enumerate(counts):
        items = [np.resize(genre_items_by_popularity[g], c) for g, c in enumerate(row) if c > 0]
        seq = np.concatenate(items)[-length:] if items else np.zeros(0, dtype=np.int64)
        out[i, length - len(seq):] = seq
    return out


class GenreHistogramCAE(ReportCallback):
    """After testing: the CAE of "recommendations depend on the history only through its genre histogram".

    Args:
        output: JSON file for the report (None: keep it in memory and in the checkpoint only).
        n_interventions: sampled interventions per direction.
        top_k: recommendations whose genre mix is the prediction.
        max_genres: most frequent first categories kept as genres (the rest share ``other``).
        distances: CAE distances (``mse``, ``js``, ``mmd``).
        max_histories: test histories collected as the natural input distribution.
        seed: seed of the interventions.
    """

    log_prefix = "cae"

    def __init__(self, output: str | None = None, n_interventions: int = 30, top_k: int = 10,
                 max_genres: int = 8, distances: list[str] | None = None, max_histories: int = 512,
                 seed: int = 0) -> None:
        if top_k < 1 or n_interventions < 2 or max_histories < 1:
            raise ValueError(f"need top_k >= 1, n_interventions >= 2, max_histories >= 1 (got {top_k}, "
                             f"{n_interventions}, {max_histories}).")
        super().__init__(output)
        self.n_interventions = n_interventions
        self.top_k = top_k
        self.max_genres = max_genres
        self.distances = list(distances or ["mse", "js", "mmd"])
        self.max_histories = max_histories
        self.seed = seed

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        view = self.eval_view(trainer, "test")
        if len(view) == 0:
            return
        if not getattr(pl_module, "uses_history", False):
            raise ValueError(f"GenreHistogramCAE: {type(pl_module).__name__} scores users by id, not by "
                             "history (uses_history is False); the genre-histogram explanation is about "
                             "history models.")
        histories = first_histories(view, self.max_histories)
        histories = histories[(histories > 0).any(1)]
        if len(histories) == 0:
            raise ValueError("GenreHistogramCAE: every collected test history is empty.")
        n_items = view.n_items
        genre, names = primary_genres(view.item_features, n_items, self.max_genres)
        popularity = view.item_popularity[:n_items + 1].astype(float)
        was_training = pl_module.training
        pl_module.eval()
        try:
            with torch.no_grad():
                est = self.evaluate(pl_module, histories, genre, popularity)
        finally:
            pl_module.train(was_training)
        self.publish(trainer, {
            "explanation": "recommendations depend on the history only through its genre histogram",
            "model": type(pl_module).__name__, "n_items": n_items, "n_histories": int(len(histories)),
            "genres": names, "top_k": self.top_k, "cae": est.cae_, "scores": est.scores_, "se": est.se_,
            "n_interventions": self.n_interventions, "seed": self.seed,
            "mean_history_length": float((histories > 0).sum(1).mean())}, est.cae_)

    def evaluate(self, pl_module: L.LightningModule, histories: np.ndarray, genre: np.ndarray,
                 popularity: np.ndarray) -> CausalAbstractionError:
        """Build both models and the abstraction for ``pl_module`` and fit the CAE (module docstring)."""
        n_genres = int(genre.max()) + 1
        length = histories.shape[1]
        n_items = len(genre) - 1
        device = next((p.device for p in pl_module.parameters()), torch.device("cpu"))
        hist_map = GenreHistogram(genre, n_genres)
        pred_map = TopKGenreShare(genre, n_genres, min(self.top_k, n_items), popularity)
        order = np.argsort(-popularity, kind="stable")
        by_pop = [order[(genre[order] == g) & (order > 0)] for g in range(n_genres)]

        def scores(history: np.ndarray) -> np.ndarray:
            h = torch.as_tensor(np.asarray(history, dtype=np.int64), device=device)
            batch = {"users": torch.zeros(len(h), dtype=torch.long, device=device), "history": h}
            s = pl_module.score(batch).detach().to("cpu", torch.float64).numpy().copy()
            s[:, 0] = -np.inf
            rows, cols = np.nonzero(history > 0)
            s[rows, np.asarray(history)[rows, cols]] = -np.inf
            return s

        low = SCM("recommender")
        low.exogenous("history", Empirical(histories))
        low.node("scores", ["history"], scores, Uniform(0.0, 1.0, shape=n_items + 1))
        counts = hist_map.abstract([histories])
        high = SCM("genre-histogram explanation")
        high.exogenous("Histogram", Empirical(counts))
        high.node("Prediction", ["Histogram"],
                  lambda c: pred_map.abstract([scores(canonical_histories(c, by_pop, length))]),
                  Uniform(0.0, 1.0, shape=n_genres))
        abstraction = Abstraction({"Histogram": ["history"], "Prediction": ["scores"]},
                                  {"Histogram": hist_map, "Prediction": pred_map})
        est = CausalAbstractionError(n_interventions=self.n_interventions, distances=self.distances,
                                     faithful=False, max_targets=0, seed=self.seed)
        return est.fit(low, high, abstraction)


def first_histories(view: EvaluationView, n: int) -> np.ndarray:
    """The padded histories (``history`` of the view's batches) of the view's first ``n`` users.

    Batches of the loader's size are cut to ``n`` rows and left-padded to one common width.
    """
    parts: list[np.ndarray] = []
    have = 0
    for batch in view.batches():
        if have >= n:
            break
        parts.append(batch["history"][: n - have].numpy())
        have += len(parts[-1])
    width = max((p.shape[1] for p in parts), default=1)
    return np.concatenate([np.pad(p, ((0, 0), (width - p.shape[1], 0))) for p in parts]) if parts \
        else np.zeros((0, width), dtype=np.int64)


__all__ = ["GenreHistogram", "GenreHistogramCAE", "TopKGenreShare", "canonical_histories", "first_histories",
           "primary_genres", "top_k_items"]
