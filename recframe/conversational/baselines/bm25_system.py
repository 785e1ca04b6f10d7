"""BM25 over reviews: a candidate's document is all its reviews; citations are its best BM25 sentences.

The query is every user turn so far (:func:`~recframe.conversational.baselines.base.user_text`),
tokenised by :func:`recframe.conversational.bm25.tokenize`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recframe.conversational.baselines.base import RetrievalSystem
from recframe.conversational.bm25 import BM25, tokenize
from recframe.conversational.view import Catalog

__all__ = ["BM25System"]


class BM25System(RetrievalSystem):
    """BM25 (``k1``, ``b``) ranking of candidates by their concatenated reviews."""

    name = "BM25"

    def __init__(self, k1: float = 1.2, b: float = 0.75, n_citations: int = 2) -> None:
        super().__init__(n_citations)
        self.k1, self.b = k1, b

    def fit(self, catalog: Catalog) -> BM25System:
        super().fit(catalog)
        self.poi_ids_ = list(catalog.pois)
        self.row_ = {pid: i for i, pid in enumerate(self.poi_ids_)}
        docs = [
            [tok for rid in catalog.reviews_of.get(pid, ()) for tok in tokenize(catalog.reviews[rid].text)]
            for pid in self.poi_ids_
        ]
        self.poi_bm25_ = BM25(self.k1, self.b).fit(docs)
        self.sent_bm25_ = BM25(self.k1, self.b).fit([tokenize(t) for t in self.sentences_.texts])
        return self

    def score_queries(
        self,
        queries: Sequence[str],
        candidates: Sequence[Sequence[str]],
        sentence_scores: list[np.ndarray] | None = None,
    ) -> list[np.ndarray]:
        out = []
        for q, cands in zip(queries, candidates):
            scores = self.poi_bm25_.scores(tokenize(q))
            out.append(scores[[self.row_[c] for c in cands]])
        return out

    def sentence_scores(self, queries: Sequence[str]) -> list[np.ndarray]:
        return [self.sent_bm25_.scores(tokenize(q)) for q in queries]
