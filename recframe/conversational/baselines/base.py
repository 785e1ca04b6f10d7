"""The system interface and what the retrieval baselines share.

A :class:`System` is fitted on the public :class:`~recframe.conversational.view.Catalog` and answers
:class:`~recframe.conversational.view.DialogueView` s with
:class:`~recframe.conversational.view.Prediction` s;
it never sees a release, a dialogue or the generator's truth.

:class:`RetrievalSystem` turns a view into a query text, scores the candidates (subclasses), ranks them
(ties broken by popularity = review count, then POI id, so the shuffled candidate order never matters)
and cites the ``n_citations`` sentences of the recommended POI that best match the query.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

import numpy as np

from recframe.conversational.schema import Citation
from recframe.conversational.textnorm import split_sentences
from recframe.conversational.view import Catalog, DialogueView, Prediction

__all__ = [
    "System",
    "RetrievalSystem",
    "SentenceStore",
    "user_text",
    "clauses",
    "is_complaint",
    "COMPLAINT_CUES",
]

_CLAUSE = re.compile(r"[.!?;,]+\s*|\s+but\s+")
#: the words and phrases that mark a clause as a complaint (:func:`is_complaint`); written while looking at
#: the generator's ``seen`` rejection templates, which is why the benchmark also reports ``held_out`` ones
COMPLAINT_CUES: tuple[str, ...] = (
    "too",
    "not",
    "n't",
    "no",
    "never",
    "instead of",
    "rather not",
    "isn't",
    "wasn't",
)
#: a cue matches as a whole word, except a contraction's ``n't``, which ends a word ("don't", "can't")
_COMPLAINT = re.compile(
    r"(?<!\w)(" + "|".join(re.escape(c) for c in COMPLAINT_CUES if not c.startswith("n'")) + r")(?!\w)"
    + "|" + "|".join(re.escape(c) + r"(?!\w)" for c in COMPLAINT_CUES if c.startswith("n'")), re.I)


def user_text(view: DialogueView) -> str:
    """All user turns so far, joined (every act)."""
    return " ".join(t.text for t in view.user_turns())


def clauses(text: str) -> list[str]:
    """``text`` split at sentence punctuation, commas, semicolons and ' but '; empty parts dropped."""
    return [c.strip() for c in _CLAUSE.split(text) if c.strip()]


def is_complaint(clause: str) -> bool:
    """Heuristic: a clause with a negation or 'too' (one of :data:`COMPLAINT_CUES`) states what the user
    does *not* want."""
    return _COMPLAINT.search(clause) is not None


class System(ABC):
    """A conversational recommender under evaluation.

    ``fit(catalog)`` sees only the public catalogue; ``predict_many(views)`` answers evaluation points
    (the default calls :meth:`predict` on each; batched systems override it).
    """

    name = "system"

    def fit(self, catalog: Catalog) -> System:
        """Build indexes from ``catalog``; returns ``self``."""
        self.catalog_ = catalog
        self.popularity_ = {pid: len(catalog.reviews_of.get(pid, ())) for pid in catalog.pois}
        return self

    def prepare(self, views: Sequence[DialogueView]) -> None:  # noqa: B027 (an optional hook)
        """Optional: precompute what answering ``views`` needs in one go (e.g. embed every query)."""

    def predict(self, view: DialogueView) -> Prediction:
        """The answer at one evaluation point."""
        return self.predict_many([view])[0]

    @abstractmethod
    def predict_many(self, views: Sequence[DialogueView]) -> list[Prediction]:
        """Answers for many evaluation points, in order."""

    def order(self, candidates: Sequence[str], scores: np.ndarray) -> tuple[str, ...]:
        """Candidates by descending score; ties by popularity (desc), then POI id."""
        keys = sorted(
            range(len(candidates)),
            key=lambda i: (-scores[i], -self.popularity_.get(candidates[i], 0), candidates[i]),
        )
        return tuple(candidates[i] for i in keys)


class SentenceStore:
    """Every review sentence of a catalogue, deduplicated by text.

    ``texts[j]``: unique sentence ``j``; ``of_poi[poi_id]``: ``(j, review_id, start, end)`` for each sentence
    occurrence in the POI's reviews (so a citation can name the review and offsets it quotes).
    """

    def __init__(self, catalog: Catalog) -> None:
        ids: dict[str, int] = {}
        self.texts: list[str] = []
        self.of_poi: dict[str, list[tuple[int, str, int, int]]] = {}
        for rid, review in catalog.reviews.items():
            for start, end in split_sentences(review.text):
                text = review.text[start:end]
                j = ids.setdefault(text, len(ids))
                if j == len(self.texts):
                    self.texts.append(text)
                self.of_poi.setdefault(review.poi_id, []).append((j, rid, start, end))
        self.poi_index = {
            pid: np.array([j for j, *_ in occ], dtype=np.int64) for pid, occ in self.of_poi.items()
        }

    def best_citations(
        self, poi: str, sentence_scores: np.ndarray, n: int, catalog: Catalog, min_score: float = 0.0
    ) -> tuple[Citation, ...]:
        """The ``n`` highest-scoring distinct sentences of ``poi`` (score > ``min_score``), each cited from
        the first review holding it, with offsets."""
        seen: set[int] = set()
        ranked = sorted(self.of_poi.get(poi, ()), key=lambda o: (-sentence_scores[o[0]], o[1], o[2]))
        out = []
        for j, rid, start, end in ranked:
            if len(out) == n or not sentence_scores[j] > min_score:
                break
            if j in seen:
                continue
            seen.add(j)
            out.append(Citation(rid, catalog.reviews[rid].text[start:end], start, end))
        return tuple(out)


class RetrievalSystem(System):
    """Query text -> candidate scores -> ranking, plus sentence citations of the top POI.

    Subclasses implement :meth:`score_queries` (``[Q, n_candidates]`` per query) and
    :meth:`sentence_scores` (``[n_unique_sentences]`` per query).
    """

    def __init__(self, n_citations: int = 2) -> None:
        if isinstance(n_citations, bool) or not isinstance(n_citations, int) or n_citations < 0:
            raise ValueError(f"n_citations={n_citations!r}; it must be a non-negative integer.")
        self.n_citations = n_citations

    def fit(self, catalog: Catalog) -> RetrievalSystem:
        super().fit(catalog)
        self.sentences_ = SentenceStore(catalog)
        return self

    def query_text(self, view: DialogueView) -> str:
        """What the system searches with: every user turn so far."""
        return user_text(view)

    @abstractmethod
    def score_queries(
        self,
        queries: Sequence[str],
        candidates: Sequence[Sequence[str]],
        sentence_scores: list[np.ndarray] | None,
    ) -> list[np.ndarray]:
        """One score per candidate, for each query (``sentence_scores``: :meth:`sentence_scores` of the
        same queries when :attr:`ranks_by_sentences` or citations need them, else None)."""

    @abstractmethod
    def sentence_scores(self, queries: Sequence[str]) -> list[np.ndarray]:
        """A score per unique sentence of :attr:`sentences_`, for each query."""

    #: whether :meth:`score_queries` needs the sentence scores
    ranks_by_sentences = False

    def predict_many(self, views: Sequence[DialogueView]) -> list[Prediction]:
        return self.retrieve(views, [self.query_text(v) for v in views], self.rerank)

    def retrieve(
        self,
        views: Sequence[DialogueView],
        queries: Sequence[str],
        rerank: Callable[[DialogueView, tuple[str, ...]], tuple[str, ...]],
    ) -> list[Prediction]:
        """Rank each view's candidates for its query, re-rank, cite the best sentences of the top POI."""
        need = self.ranks_by_sentences or self.n_citations > 0
        sent = self.sentence_scores(queries) if need else None
        scores = self.score_queries(queries, [v.candidates for v in views], sent)
        rankings = [rerank(v, self.order(v.candidates, s)) for v, s in zip(views, scores)]
        if sent is None:
            return [Prediction(r) for r in rankings]
        return [
            Prediction(r, self.sentences_.best_citations(r[0], s, self.n_citations, self.catalog_))
            for r, s in zip(rankings, sent)
        ]

    def rerank(self, view: DialogueView, ranking: tuple[str, ...]) -> tuple[str, ...]:
        """Hook for re-rankers (identity here)."""
        return ranking
