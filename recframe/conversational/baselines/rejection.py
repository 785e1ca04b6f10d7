"""Rejection-aware re-ranker over a retrieval baseline (BM25 or dense).

Two changes to the base system, both only about the dialogue's rejections:

1. **Query repair.** Clauses that state what the user does *not* want (a negation or "too": "that one
   seems too loud") are dropped from the query, so the complaint's words ("loud") stop pulling POIs
   with that property up; the wish that follows ("we would prefer a quiet place") stays.
2. **No repeats.** POIs the user rejected in this dialogue move to the end of the ranking (in their
   order), so they are never re-offered while another candidate is left.

The complaint test is a heuristic (:func:`~recframe.conversational.baselines.base.is_complaint`).
"""

from __future__ import annotations

from collections.abc import Sequence

from recframe.conversational.baselines.base import RetrievalSystem, System, clauses, is_complaint
from recframe.conversational.view import Catalog, DialogueView, Prediction

__all__ = ["RejectionAwareSystem"]


class RejectionAwareSystem(System):
    """Wraps ``base`` (``"dense"`` or ``"bm25"``, built with ``base_settings``)."""

    def __init__(self, base: str = "dense", **base_settings: object) -> None:
        from recframe.conversational.baselines import build_system

        if base not in ("dense", "bm25"):
            raise ValueError(f"base={base!r}; the rejection-aware re-ranker wraps 'dense' or 'bm25'.")
        system = build_system(base, **base_settings)
        assert isinstance(system, RetrievalSystem)
        self.base = system
        self.name = f"Rejection-aware ({system.name})"

    def fit(self, catalog: Catalog) -> RejectionAwareSystem:
        super().fit(catalog)
        self.base.fit(catalog)
        return self

    def query_text(self, view: DialogueView) -> str:
        """User clauses without complaints (all clauses if every one is a complaint)."""
        parts = [c for t in view.user_turns() for c in clauses(t.text)]
        kept = [c for c in parts if not is_complaint(c)]
        return ". ".join(kept or parts)

    def rerank(self, view: DialogueView, ranking: tuple[str, ...]) -> tuple[str, ...]:
        """Rejected POIs last."""
        rejected = set(view.rejected)
        return tuple(p for p in ranking if p not in rejected) + tuple(p for p in ranking if p in rejected)

    def prepare(self, views: Sequence[DialogueView]) -> None:
        index = getattr(self.base, "index_", None)
        if index is not None:
            index.warm([self.query_text(v) for v in views])

    def predict_many(self, views: Sequence[DialogueView]) -> list[Prediction]:
        return self.base.retrieve(views, [self.query_text(v) for v in views], self.rerank)
