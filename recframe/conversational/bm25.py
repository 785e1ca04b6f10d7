"""Okapi BM25 (a small, dependency-free implementation; ``rank_bm25`` is not a dependency).

For a query ``q`` (terms, repeats counted) and document ``d`` of length ``|d|`` in a corpus of ``N``
documents with mean length ``avgdl``:

    score(q, d) = sum_{t in q} idf(t) * f(t, d) * (k1 + 1) / (f(t, d) + k1 * (1 - b + b * |d| / avgdl))
    idf(t)      = ln(1 + (N - n(t) + 0.5) / (n(t) + 0.5))

``f(t, d)`` is the count of ``t`` in ``d`` and ``n(t)`` the number of documents holding ``t``. This is the
Lucene / Elasticsearch form of the idf (always positive, unlike Robertson's original, which goes negative
for terms in more than half the documents); ``k1 = 1.2``, ``b = 0.75`` are Lucene's defaults.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from recframe.conversational.textnorm import normalize

__all__ = ["BM25", "tokenize", "STOPWORDS"]

STOPWORDS = frozenset(
    "a an and are as at be but by for from had has have here i i'm in is it its it's me my not of on or our "
    "so that the their there this to too us was we were what which with would you your hi hello hey hmm "
    "one place something somewhere".split()
)
_WORD = re.compile(r"\w+(?:[-']\w+)*")


def tokenize(text: str, stopwords: frozenset[str] = STOPWORDS) -> list[str]:
    """Case-folded word tokens of ``normalize(text)`` (hyphenated words kept whole), stopwords dropped."""
    return [w for w in _WORD.findall(normalize(text).casefold()) if w not in stopwords]


class BM25:
    """BM25 over a fixed corpus of token lists; :meth:`scores` returns one score per document."""

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"k1={k1}, b={b}; BM25 needs k1 >= 0 and 0 <= b <= 1.")
        self.k1, self.b = k1, b

    def fit(self, docs: Sequence[Sequence[str]]) -> BM25:
        """Index ``docs`` (each a list of tokens)."""
        self.n_docs_ = len(docs)
        if self.n_docs_ == 0:
            raise ValueError("BM25.fit got no documents.")
        self.lengths_ = np.array([len(d) for d in docs], dtype=np.float64)
        avgdl = float(self.lengths_.mean()) or 1.0
        self.norm_ = self.k1 * (1 - self.b + self.b * self.lengths_ / avgdl)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for i, doc in enumerate(docs):
            for term, count in Counter(doc).items():
                ids, tfs = postings.setdefault(term, ([], []))
                ids.append(i)
                tfs.append(count)
        self.postings_ = {
            t: (np.array(i, dtype=np.int64), np.array(f, dtype=np.float64)) for t, (i, f) in postings.items()
        }
        self.idf_ = {
            t: math.log(1 + (self.n_docs_ - len(i) + 0.5) / (len(i) + 0.5))
            for t, (i, _) in self.postings_.items()
        }
        return self

    def scores(self, query: Sequence[str]) -> np.ndarray:
        """``[n_docs]`` BM25 scores of ``query`` (tokens); unknown terms add nothing."""
        out = np.zeros(self.n_docs_, dtype=np.float64)
        for term, qf in Counter(query).items():
            hit = self.postings_.get(term)
            if hit is None:
                continue
            ids, tf = hit
            out[ids] += qf * self.idf_[term] * tf * (self.k1 + 1) / (tf + self.norm_[ids])
        return out
