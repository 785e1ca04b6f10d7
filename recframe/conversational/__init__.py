"""TRACE-style conversational recommendation: dialogues with review-span citations and rejection turns.

- :mod:`~recframe.conversational.schema`, :mod:`~recframe.conversational.validate`,
  :mod:`~recframe.conversational.loader`: the JSONL release format, its line-and-field validator, I/O.
- :mod:`~recframe.conversational.generator`: a synthetic benchmark with planted ground truth.
- :mod:`~recframe.conversational.view`: what a system sees (no planted fields) and returns.
- :mod:`~recframe.conversational.metrics`: Accuracy, Grounding and Recovery metrics
  (verbatim rule: :mod:`~recframe.conversational.textnorm`).
- :mod:`~recframe.conversational.baselines`: popularity, BM25, dense MiniLM on FAISS, multi-review synthesis,
  rejection-aware re-ranker, LLM adapter.
- :mod:`~recframe.conversational.stats`, :mod:`~recframe.conversational.benchmark`: paired tests, Spearman,
  the benchmark run behind ``recframe conversational evaluate``.
"""
