"""Item feature matrices for semantic-ID tokenizers and content-aware models.

``item_content_features(item_features)`` embeds item text (offline MiniLM, cached) or falls back
to non-text metadata features; ``as_feature_matrix(x)`` validates any ``[n_items + 1, d]`` matrix;
``collaborative_item_embeddings(train, config, seed)`` is a trained model's item table (cached) and
``hybrid_item_features(text, collab, w)`` mixes the two; ``adopt_item_table(config, checkpoint, seed)``
caches the table of a run that already exists instead of training it again.
"""

from recframe.features.collaborative import (
           adopt_item_table,
           collaborative_item_embeddings,
           hybrid_item_features,
)
from recframe.features.item_content import item_content_features
from recframe.features.matrix import as_feature_matrix
from recframe.features.metadata import metadata_features
from recframe.features.text_encoder import DEFAULT_ENCODER, default_cache_dir, text_embeddings

__all__ = ["item_content_features", "as_feature_matrix", "metadata_features", "text_embeddings",
           "default_cache_dir", "DEFAULT_ENCODER", "collaborative_item_embeddings", "hybrid_item_features",
           "adopt_item_table"]
