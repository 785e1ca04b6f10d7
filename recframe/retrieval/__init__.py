"""Top-k item retrieval on FAISS (CPU, or GPU when FAISS sees one) with seen-item exclusion.

``ItemIndex.from_model(model, factory="Flat")`` indexes an EmbeddingModel's item embeddings;
``index.search(query_vectors, k, exclude=seen)`` returns a :class:`SearchResult`;
``index.save("best.ckpt")`` writes ``best.faiss`` + ``best.faiss.json`` next to the checkpoint.
"""

from recframe.retrieval.exclusion import Exclusions
from recframe.retrieval.index import METRICS, ItemIndex, check_metric
from recframe.retrieval.persistence import embedding_fingerprint, index_paths
from recframe.retrieval.result import SearchResult

__all__ = ["ItemIndex", "SearchResult", "Exclusions", "METRICS", "check_metric", "embedding_fingerprint",
           "index_paths"]
