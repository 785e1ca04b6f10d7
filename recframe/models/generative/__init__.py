"""Generative (semantic-ID) recommendation: TIGER and decoder-only backbones (with TrieRec), the item trie,
trie-constrained decoding and exact full-catalogue scoring."""

from recframe.models.generative.decoding import (
    BeamResult,
    StepLogits,
    beam_search,
    exact_scores,
    index_rows,
    infer_batch_size,
    normalise_step,
    rowwise,
)
from recframe.models.generative.models import TIGER, GenerativeRecModel, SIDDecoder
from recframe.models.generative.trie import SIDTrie

__all__ = ["TIGER", "SIDDecoder", "GenerativeRecModel", "SIDTrie", "StepLogits", "BeamResult", "beam_search",
           "exact_scores", "rowwise", "index_rows", "infer_batch_size", "normalise_step"]
