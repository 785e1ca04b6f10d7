"""A pretrained-model case for CoCHI: the offline MiniLM encoder answering multiple-choice questions.

**Construction** (from ML-100K's item metadata: titles and genres):

* one question per movie that has a title and at least one genre other than ``unknown``: "which genre is
  <title>?";
* the correct option is one of the movie's genres, drawn at random; the three distractors are drawn without
  replacement from the genres the movie does *not* have (so exactly one option is right); the four options are
  shuffled (``numpy`` generator seeded by ``seed``);
* the encoder (all-MiniLM-L6-v2 through :mod:`recframe.features.text_encoder`, loaded offline) embeds the
  query text ``query_template.format(title=...)`` and each option ``option_template.format(genre=...)``
  (unit-norm sentence embeddings); the logit of option ``j`` is ``scale * cos(query, option_j)``;
* ``scale = 20`` (a temperature of 0.05) is the scale of the contrastive softmax the encoder was trained with
  (sentence-transformers' ``MultipleNegativesRankingLoss`` default), so the "before calibration" column is the
  model's own similarity softmax, not a number we tuned;
* validation / test: the questions are split at random by movie (``split_questions``, half and half by
  default); CoCHI, temperature scaling and every choice are fitted on validation only.

The encoder is a Hugging Face ``BertModel`` inside a ``SentenceTransformer``, so its 6 x 12 attention heads
are reached by the head probe (kind ``"hf-bert"``) and every forward pass of :class:`MultipleChoiceTask`
(queries *and* options) runs under the intervention.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from calib_ext.cochi.tasks import LogitTask

__all__ = ["MultipleChoiceTask", "Question", "genre_questions", "load_encoder", "split_questions"]

EXCLUDED_GENRES = ("unknown",)


@dataclass(frozen=True)
class Question:
    """One multiple-choice question: the movie (dense item id and title), the options and the right one."""

    item: int
    title: str
    options: tuple[str, ...]
    label: int


def genre_questions(titles: Sequence[str], categories: Sequence[Sequence[str]], n_options: int = 4,
                    seed: int = 0) -> list[Question]:
    """One "which genre is <title>?" question per usable movie (module docstring).

    Args:
        titles: one title per dense item id (index 0 is padding and skipped).
        categories: each item's genres, aligned with ``titles``.
        n_options: options per question (one right, ``n_options - 1`` distractors).
        seed: seed of the draws.
    """
    if len(titles) != len(categories):
        raise ValueError(f"titles ({len(titles)}) and categories ({len(categories)}) must be aligned by "
                         "item id")
    genres = sorted({g for cs in categories for g in cs if g not in EXCLUDED_GENRES})
    if n_options < 2 or len(genres) < n_options:
        raise ValueError(f"n_options={n_options} needs 2 <= n_options <= {len(genres)} (the number of "
                         "genres)")
    rng = np.random.default_rng(seed)
    out = []
    for item in range(1, len(titles)):
        mine = sorted({g for g in categories[item] if g not in EXCLUDED_GENRES})
        title = str(titles[item]).strip()
        if not mine or not title:
            continue
        others = [g for g in genres if g not in mine]
        if len(others) < n_options - 1:
            continue
        right = mine[int(rng.integers(len(mine)))]
        wrong = [others[i] for i in rng.choice(len(others), n_options - 1, replace=False)]
        order = rng.permutation(n_options)
        options = [right, *wrong]
        shuffled = tuple(options[i] for i in order)
        out.append(Question(item, title, shuffled, int(np.flatnonzero(order == 0)[0])))
    return out


def split_questions(questions: Sequence[Question], valid_fraction: float = 0.5, seed: int = 0
                    ) -> tuple[list[Question], list[Question]]:
    """A random validation / test split of the questions (each movie in one part)."""
    if not 0.0 < valid_fraction < 1.0:
        raise ValueError(f"valid_fraction must lie in (0, 1), got {valid_fraction}")
    perm = np.random.default_rng(seed).permutation(len(questions))
    cut = int(round(valid_fraction * len(questions)))
    return [questions[i] for i in sorted(perm[:cut])], [questions[i] for i in sorted(perm[cut:])]


def load_encoder(encoder: str = "all-MiniLM-L6-v2", device: str = "cpu") -> nn.Module:
    """The offline sentence encoder as a ``SentenceTransformer`` (never from a hub)."""
    from sentence_transformers import SentenceTransformer

    from recframe.features.text_encoder import resolve_encoder

    model_dir, _ = resolve_encoder(encoder)
    return SentenceTransformer(str(model_dir), device=device, local_files_only=True).eval()


class MultipleChoiceTask(LogitTask):
    """Questions answered by embedding similarity (module docstring).

    Args:
        questions: the questions.
        scale: logit scale, ``logit_j = scale * cos(query, option_j)`` (default 20: the encoder's training
            scale).
        batch_size: questions per forward pass (and the encoder's batch size).
        query_template: query text, with ``{title}``.
        option_template: option text, with ``{genre}``.
    """

    def __init__(self, questions: Sequence[Question], scale: float = 20.0, batch_size: int = 128,
                 query_template: str = "{title}", option_template: str = "a {genre} movie") -> None:
        if not questions:
            raise ValueError("MultipleChoiceTask needs at least one question")
        if len({len(q.options) for q in questions}) != 1:
            raise ValueError("every question needs the same number of options")
        self.questions, self.scale, self.batch_size = list(questions), float(scale), int(batch_size)
        self.query_template, self.option_template = query_template, option_template

    def batches(self) -> Iterable[list[Question]]:
        for start in range(0, len(self.questions), self.batch_size):
            yield self.questions[start:start + self.batch_size]

    def _embed(self, model: Any, texts: list[str]) -> Tensor:
        """Unit-norm sentence embeddings by the model's own forward pass (``SentenceTransformer.encode`` runs
        under ``inference_mode``, which would rule out gradient attribution)."""
        prepare = getattr(model, "preprocess", None) or model.tokenize
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
        features = {k: v.to(device) if isinstance(v, Tensor) else v for k, v in prepare(texts).items()}
        out = model(features)["sentence_embedding"]
        return torch.nn.functional.normalize(out.to(torch.float64), dim=-1)

    def logits(self, model: nn.Module, batch: list[Question]) -> Tensor:
        names = sorted({o for q in batch for o in q.options})
        where = {name: i for i, name in enumerate(names)}
        queries = self._embed(model, [self.query_template.format(title=q.title) for q in batch])
        options = self._embed(model, [self.option_template.format(genre=g) for g in names])
        idx = torch.tensor([[where[o] for o in q.options] for q in batch], device=queries.device)
        cos = torch.einsum("bd,bkd->bk", queries, options[idx])
        return self.scale * cos

    def labels(self, batch: list[Question]) -> Tensor:
        return torch.tensor([q.label for q in batch], dtype=torch.long)
