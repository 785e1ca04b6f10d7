"""Multi-review synthesis: evidence for each stated need, gathered and cited across several reviews.

The user's turns are split into clauses (:func:`~recframe.conversational.baselines.base.clauses`), each a
need ("something cheap", "a quiet place"). Each clause is embedded (MiniLM, as in
:mod:`~recframe.conversational.baselines.dense`) and matched to every review sentence; a candidate scores
the mean over clauses of its best sentence for that clause, so a POI must be supported on every need, and
the recommendation cites the best sentence per clause (distinct sentences, from as many different reviews
as possible, at most ``max_citations``). It reads every clause as a need, whatever the dialogue act, and
keeps no memory of rejected POIs: the synthesis design TRACE reports as weak on recovery.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recframe.conversational.baselines.base import SentenceStore, System, clauses, user_text
from recframe.conversational.baselines.dense import Embedder, SentenceIndex, minilm_embedder
from recframe.conversational.schema import Citation
from recframe.conversational.view import Catalog, DialogueView, Prediction
from recframe.features.text_encoder import DEFAULT_ENCODER

__all__ = ["SynthesisSystem"]


class SynthesisSystem(System):
    """Per-clause sentence evidence, averaged over clauses; one citation per clause."""

    name = "Multi-Review Synthesis"

    def __init__(
        self,
        encoder: str = DEFAULT_ENCODER,
        cache_dir: str | None = None,
        fetch: int = 4096,
        max_citations: int = 4,
        embed: Embedder | None = None,
    ) -> None:
        self.encoder, self.cache_dir, self.fetch = encoder, cache_dir, fetch
        self.max_citations, self.embed = max_citations, embed

    def fit(self, catalog: Catalog) -> SynthesisSystem:
        super().fit(catalog)
        self.sentences_ = SentenceStore(catalog)
        embed = self.embed or minilm_embedder(self.encoder, self.cache_dir)
        self.index_ = SentenceIndex(self.sentences_.texts, embed, self.fetch)
        return self

    @staticmethod
    def needs(view: DialogueView) -> list[str]:
        """The clauses of every user turn so far (the whole text if it has no clause break)."""
        return clauses(user_text(view)) or [user_text(view)]

    def prepare(self, views: Sequence[DialogueView]) -> None:
        self.index_.warm([c for v in views for c in self.needs(v)])

    def predict_many(self, views: Sequence[DialogueView]) -> list[Prediction]:
        parts = [self.needs(v) for v in views]
        unique = sorted({c for p in parts for c in p})
        sims = self.index_.scores(unique)
        row = {c: i for i, c in enumerate(unique)}
        out = []
        empty = np.zeros(0, dtype=np.int64)
        for view, cl in zip(views, parts):
            s = sims[[row[c] for c in cl]]  # [clauses, n_sentences]
            per = np.array(
                [
                    [
                        s[k, self.sentences_.poi_index.get(c, empty)].max(initial=-np.inf)
                        for c in view.candidates
                    ]
                    for k in range(len(cl))
                ]
            )
            ranking = self.order(view.candidates, per.mean(axis=0))
            out.append(Prediction(ranking, self.cite(ranking[0], s)))
        return out

    def cite(self, poi: str, clause_scores: np.ndarray) -> tuple[Citation, ...]:
        """Best sentence of ``poi`` per clause, distinct sentences, preferring reviews not yet cited."""
        occ = self.sentences_.of_poi.get(poi, [])
        used_sent: set[int] = set()
        used_rev: set[str] = set()
        cites = []
        for scores in clause_scores:
            if len(cites) == self.max_citations:
                break
            options = sorted(
                (o for o in occ if o[0] not in used_sent and np.isfinite(scores[o[0]])),
                key=lambda o: (-scores[o[0]], o[1] in used_rev, o[1], o[2]),
            )
            if not options:
                continue
            j, rid, start, end = options[0]
            used_sent.add(j)
            used_rev.add(rid)
            cites.append(Citation(rid, self.catalog_.reviews[rid].text[start:end], start, end))
        return tuple(cites)
