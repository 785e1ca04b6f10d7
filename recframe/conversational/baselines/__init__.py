"""Baselines of the TRACE-style benchmark; each is a :class:`~recframe.conversational.baselines.base.System`.

``build_system(name, **settings)`` makes one by name: ``popularity``, ``bm25``, ``dense``, ``synthesis``,
``rejection_aware`` (a re-ranker over ``bm25`` or ``dense``). ``LLMSystem`` wraps any
:class:`~recframe.conversational.baselines.llm.LLMAdapter`.
"""

from recframe.conversational.baselines.base import RetrievalSystem, SentenceStore, System
from recframe.conversational.baselines.bm25_system import BM25System
from recframe.conversational.baselines.dense import DenseSystem
from recframe.conversational.baselines.llm import CommandAdapter, LLMAdapter, LLMSystem
from recframe.conversational.baselines.popularity import PopularitySystem
from recframe.conversational.baselines.rejection import RejectionAwareSystem
from recframe.conversational.baselines.synthesis import SynthesisSystem

SYSTEMS = {
    "popularity": PopularitySystem,
    "bm25": BM25System,
    "dense": DenseSystem,
    "synthesis": SynthesisSystem,
    "rejection_aware": RejectionAwareSystem,
}

__all__ = [
    "System",
    "RetrievalSystem",
    "SentenceStore",
    "PopularitySystem",
    "BM25System",
    "DenseSystem",
    "SynthesisSystem",
    "RejectionAwareSystem",
    "LLMSystem",
    "LLMAdapter",
    "CommandAdapter",
    "SYSTEMS",
    "build_system",
]


def build_system(name: str, **settings: object) -> System:
    """The baseline called ``name`` with ``settings`` (its constructor's keyword arguments)."""
    if name not in SYSTEMS:
        raise ValueError(f"unknown baseline {name!r}; use one of {', '.join(SYSTEMS)}.")
    return SYSTEMS[name](**settings)
