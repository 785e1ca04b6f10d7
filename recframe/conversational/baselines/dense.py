"""Dense retrieval: MiniLM sentence embeddings of review sentences on recframe's FAISS ``ItemIndex``.

Every unique review sentence is embedded once by the offline MiniLM encoder
(:func:`recframe.features.text_encoder.text_embeddings`, cached on disk by a hash of the texts) and
indexed by :class:`recframe.retrieval.ItemIndex` (``Flat``, cosine: exact). A query (every user turn so far)
is embedded the same way; its ``fetch`` nearest sentences are retrieved and a candidate scores the
best cosine among its sentences (max pooling, the usual MaxP choice for passage-level evidence);
candidates with no retrieved sentence score ``-inf`` and fall back to popularity order. Citations are the
candidate's nearest sentences.

``embed`` replaces the encoder by any ``texts -> [n, d]`` function (tests use a deterministic one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from recframe.conversational.baselines.base import RetrievalSystem
from recframe.conversational.view import Catalog, DialogueView
from recframe.features.text_encoder import DEFAULT_ENCODER, text_embeddings
from recframe.retrieval import ItemIndex

__all__ = ["DenseSystem", "SentenceIndex", "Embedder"]

Embedder = Callable[[list[str]], np.ndarray]


def minilm_embedder(encoder: str = DEFAULT_ENCODER, cache_dir: str | None = None) -> Embedder:
    """``texts -> [n, d]`` float32 with the offline encoder and its on-disk cache."""

    def embed(texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        return text_embeddings([""] + list(texts), encoder=encoder, cache_dir=cache_dir)[1:]

    return embed


class SentenceIndex:
    """Unique sentences on an exact cosine ``ItemIndex``; :meth:`scores` gives ``[Q, n]`` (``-inf``: not
    among a query's ``fetch`` nearest)."""

    def __init__(self, texts: Sequence[str], embed: Embedder, fetch: int = 4096) -> None:
        if isinstance(fetch, bool) or not isinstance(fetch, int) or fetch < 1:
            raise ValueError(
                f"fetch={fetch!r}; it must be a positive integer (sentences retrieved per query)."
            )
        self.embed, self.n = embed, len(texts)
        self.fetch = min(fetch, self.n)
        self.index = ItemIndex.from_embeddings(
            np.asarray(embed(list(texts)), dtype=np.float32),
            metric="cosine",
            padding_row=False,
            use_gpu=False,
        )
        self._memo: dict[str, np.ndarray] = {}

    def warm(self, queries: Sequence[str]) -> None:
        """Embed the queries not embedded yet, in one encoder call (loading the encoder costs seconds)."""
        missing = sorted(set(queries) - self._memo.keys())
        if missing:
            self._memo.update(zip(missing, np.asarray(self.embed(missing), dtype=np.float32)))

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        unique = sorted(set(queries))
        row = {q: i for i, q in enumerate(unique)}
        self.warm(unique)
        emb = np.stack([self._memo[q] for q in unique])
        res = self.index.search(emb, self.fetch)
        full = np.full((len(unique), self.n), -np.inf, dtype=np.float32)
        rows = np.repeat(np.arange(len(unique)), res.items.shape[1])
        cols = res.items.reshape(-1) - 1
        ok = cols >= 0
        full[rows[ok], cols[ok]] = res.scores.reshape(-1)[ok]
        return full[[row[q] for q in queries]]


class DenseSystem(RetrievalSystem):
    """MiniLM sentence retrieval; a candidate scores its best sentence (module docstring)."""

    name = "Dense (MiniLM)"
    ranks_by_sentences = True

    def __init__(
        self,
        encoder: str = DEFAULT_ENCODER,
        cache_dir: str | None = None,
        fetch: int = 4096,
        n_citations: int = 2,
        embed: Embedder | None = None,
    ) -> None:
        super().__init__(n_citations)
        self.encoder, self.cache_dir, self.fetch = encoder, cache_dir, fetch
        self.embed = embed

    def fit(self, catalog: Catalog) -> DenseSystem:
        super().fit(catalog)
        embed = self.embed or minilm_embedder(self.encoder, self.cache_dir)
        self.index_ = SentenceIndex(self.sentences_.texts, embed, self.fetch)
        return self

    def prepare(self, views: Sequence[DialogueView]) -> None:
        self.index_.warm([self.query_text(v) for v in views])

    def sentence_scores(self, queries: Sequence[str]) -> list[np.ndarray]:
        return list(self.index_.scores(queries))

    def score_queries(
        self,
        queries: Sequence[str],
        candidates: Sequence[Sequence[str]],
        sentence_scores: list[np.ndarray] | None,
    ) -> list[np.ndarray]:
        assert sentence_scores is not None
        empty = np.zeros(0, dtype=np.int64)
        return [
            np.array([s[self.sentences_.poi_index.get(c, empty)].max(initial=-np.inf) for c in cands])
            for s, cands in zip(sentence_scores, candidates)
        ]
