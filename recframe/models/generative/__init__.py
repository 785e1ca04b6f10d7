"""Generative (semantic-ID) recommendation: TIGER and decoder-only backbones, composable add-ons (TrieRec),
the item trie, trie-constrained decoding and exact full-catalogue scoring (cached across trie levels)."""

from recframe.models.generative.addons import AuxLoss, GenerativeAddon
from recframe.models.generative.decoding import (
    BeamResult,
    NodeScorer,
    StepLogits,
    beam_search,
    exact_scores,
    exact_scores_cached,
    index_rows,
    infer_batch_size,
    normalise_step,
    rowwise,
)
from recframe.models.generative.flash import FLASH
from recframe.models.generative.models import TIGER, GenerativeRecModel, SIDDecoder
from recframe.models.generative.rgrec import RGRec
from recframe.models.generative.trie import SIDTrie
from recframe.models.generative.trierec import TrieRec

__all__ = ["TIGER", "FLASH", "SIDDecoder", "GenerativeRecModel", "GenerativeAddon", "AuxLoss", "TrieRec",
           "RGRec", "SIDTrie",
           "StepLogits", "NodeScorer", "BeamResult", "beam_search", "exact_scores", "exact_scores_cached",
           "rowwise", "index_rows", "infer_batch_size", "normalise_step"]
