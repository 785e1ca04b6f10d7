"""CIM on a text model: a sentence encoder answering multiple-choice questions, with tokens as the parts.

:class:`TextMultipleChoiceAdapter` is a :class:`~calib_ext.cim.adapters.FocusAdapter` for a BERT-style
sentence encoder (the offline all-MiniLM-L6-v2 of :mod:`recframe.features.text_encoder` by default, or any
local Hugging Face encoder directory) that answers a question by embedding similarity to ``C`` options:

    e(x) = mean-pool of the last hidden states over the attended tokens   (sentence-transformers pooling)
    p(c | x) = softmax_c( <ê(x), ô_c> / τ ),   ô_c = normalised embedding of option text c,

with ``τ = 0.05`` (the similarity scale 20 sentence-transformers trains MiniLM with, in
``MultipleNegativesRankingLoss``). The parts are the question's word-piece tokens; ``[CLS]``/``[SEP]`` are
never masked. Masking a token removes it from the attention mask (and from the pooling), so a focused view
only hides tokens and never adds or replaces one.

Errors: ``wrong_top1`` (the top option is not a correct one; an input may have several correct options) and
``miss@K`` (no correct option in the top ``K``).

:func:`genre_questions` builds the task used in the benchmark from ML-100K metadata: the question is a movie's
title, the options are ``"<genre> movie"`` (e.g. ``"Film-Noir movie"``) for the 18 genres (``unknown``
dropped), the correct options are the movie's genres. No question prompt is added ("which genre is ...?" would
add the same tokens to every question): the title's tokens are all the parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from calib_ext.cim.adapters import Batch

TAU = 0.05


class TextMultipleChoiceAdapter:
    """CIM view of a sentence encoder answering multiple-choice questions (module docstring).

    Args:
        options: the ``C`` option texts.
        encoder: a packaged encoder name (default MiniLM) or a local model directory.
        tau: softmax temperature of the similarities.
        miss_k: the ``K`` of ``miss@K``.
        device: where the encoder runs (default CPU).
    """

    def __init__(self, options: Sequence[str], encoder: str = "all-MiniLM-L6-v2", tau: float = TAU,
                 miss_k: int = 3, device: str = "cpu") -> None:
        from transformers import AutoModel, AutoTokenizer

        from recframe.features.text_encoder import resolve_encoder

        if len(options) < 2:
            raise ValueError(f"a multiple-choice task needs at least 2 options, got {len(options)}.")
        if not tau > 0:
            raise ValueError(f"tau={tau}; the softmax temperature must be > 0.")
        model_dir = Path(encoder) if Path(encoder).is_dir() else resolve_encoder(encoder)[0]
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        self.model = AutoModel.from_pretrained(model_dir, local_files_only=True).to(device).eval()
        self.device, self.tau, self.miss_k = device, float(tau), int(miss_k)
        self.options = list(options)
        with torch.no_grad():  # not inference_mode: the option embeddings are used outside it too
            opt = self.tokenize(self.options)
            self.option_emb = torch.nn.functional.normalize(self.embed(opt), dim=1)

    def tokenize(self, texts: Sequence[str], correct: Sequence[Sequence[int]] | None = None) -> Batch:
        """A batch for ``texts``: ``input_ids``, ``attention_mask``, ``maskable`` (not special tokens) and,
        with ``correct`` (the correct option indices of each text), a multi-hot ``correct [N, C]``."""
        enc = self.tokenizer(list(texts), padding=True, truncation=True, max_length=64, return_tensors="pt",
                             return_special_tokens_mask=True)
        batch = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"],
                 "maskable": (enc["attention_mask"] > 0) & (enc["special_tokens_mask"] == 0)}
        if correct is not None:
            hot = torch.zeros(len(texts), len(self.options), dtype=torch.bool)
            for i, cs in enumerate(correct):
                if len(cs) == 0:
                    raise ValueError(f"text {i} ({texts[i]!r}) has no correct option; every question "
                                     "needs one.")
                hot[i, list(cs)] = True
            batch["correct"] = hot
        return {k: v.to(self.device) for k, v in batch.items()}

    def parts(self, inputs: Batch) -> Tensor:
        return inputs["maskable"]

    def embed(self, inputs: Batch, keep: Tensor | None = None) -> Tensor:
        mask = inputs["attention_mask"].bool()
        if keep is not None:
            mask = mask & (keep | ~inputs["maskable"])
        hidden = self.model(input_ids=inputs["input_ids"], attention_mask=mask.long()).last_hidden_state
        m = mask[..., None].to(hidden.dtype)
        return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)

    def log_probs(self, inputs: Batch, emb: Tensor) -> Tensor:
        sim = torch.nn.functional.normalize(emb, dim=1) @ self.option_emb.T
        return torch.log_softmax(sim / self.tau, dim=1)

    def errors(self, inputs: Batch, log_probs: Tensor) -> dict[str, Tensor]:
        correct = inputs["correct"]
        top = log_probs.topk(min(self.miss_k, log_probs.shape[1]), dim=1).indices
        hit = correct.gather(1, top)
        return {"wrong_top1": ~hit[:, 0], f"miss@{self.miss_k}": ~hit.any(dim=1)}

    def support_embeddings(self) -> Tensor:
        """The normalised option embeddings ``[C, d]`` (no padding outcome: fit with ``skip_first=False``)."""
        return self.option_emb


def genre_questions(titles: Sequence[str], categories: Sequence[Sequence[str]],
                    drop: Sequence[str] = ("unknown",)) -> tuple[list[str], list[str], list[list[int]]]:
    """``(questions, options, correct)`` of the genre task (module docstring) from item titles and categories.

    Items without a kept genre are left out. Raises ``ValueError`` when no item has a genre.
    """
    genres = sorted({g for cats in categories for g in cats if g not in drop})
    if not genres:
        raise ValueError("no item has a genre (item_features.categories); the genre task needs them.")
    index = {g: i for i, g in enumerate(genres)}
    questions, correct = [], []
    for title, cats in zip(titles, categories, strict=True):
        cs = sorted({index[g] for g in cats if g in index})
        if cs and title:
            questions.append(str(title))
            correct.append(cs)
    return questions, [f"{g} movie" for g in genres], correct
