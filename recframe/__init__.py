"""recframe: recommender-systems research behind one Lightning core.

Import what you need from the subpackages: ``recframe.data`` (Interactions,
sources, splits, the datamodule), ``recframe.metrics`` (the full-ranking
evaluator), ``recframe.models`` (Popularity, BPR-MF, LightGCN, SASRec, ...),
``recframe.retrieval`` (the FAISS item index). ``recframe.Recommender`` serves
top-K recommendations from a checkpoint (:mod:`recframe.serving`).
Nothing is downloaded at import time.
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["Recommender", "Recommendations", "UnknownIdError", "__version__"]


def __getattr__(name: str) -> Any:  # lazy: `import recframe` stays cheap
    if name in ("Recommender", "Recommendations", "UnknownIdError"):
        from recframe import serving

        return getattr(serving, name)
    raise AttributeError(f"module 'recframe' has no attribute {name!r}")
