"""Semantic-ID tokenizers: item feature matrix -> :class:`SIDTable` of unique code paths.

``RQKMeansTokenizer`` (residual k-means, optionally balanced), ``RQVAETokenizer`` (TIGER's
RQ-VAE) and ``SimHashTokenizer`` (FLASH's random-hyperplane IDs) share one interface,
``tokenizer.fit(features [n_items + 1, d]) -> SIDTable``; collisions are resolved by an extra
disambiguation level and the table carries usage / perplexity / collision statistics.
"""

from recframe.tokenizers.base import SIDTokenizer, build_sid_table
from recframe.tokenizers.collisions import collision_counter, disambiguate, path_groups
from recframe.tokenizers.rq_kmeans import RQKMeansTokenizer
from recframe.tokenizers.rq_vae import RQVAETokenizer
from recframe.tokenizers.sid_table import SIDTable, SIDTableMismatchError, sid_fingerprint
from recframe.tokenizers.simhash import SimHashTokenizer
from recframe.tokenizers.stats import codebook_usage, collision_rate, perplexity, sid_stats

__all__ = ["SIDTable", "SIDTableMismatchError", "sid_fingerprint", "SIDTokenizer", "build_sid_table",
           "RQKMeansTokenizer", "RQVAETokenizer", "SimHashTokenizer", "disambiguate", "collision_counter",
           "path_groups", "codebook_usage", "perplexity", "collision_rate", "sid_stats"]
