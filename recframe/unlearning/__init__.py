"""Concept unlearning for generative (semantic-ID) recommenders: TRACER and its baselines.

A *concept* is a predicate over item features (:mod:`~recframe.unlearning.concepts`), e.g.
``genre == "Horror"`` or ``year < 1970``; the items it holds for are the *forget* items, all others the
*retain* items. Unlearning must stop recommending the concept while keeping the recommendations of retain
items. Semantic IDs make this hard: forget and retain items share code tokens, so suppressing the concept's
tokens also suppresses retain items.

Methods (all on a trained ``TIGER``/``SIDDecoder`` checkpoint):

* ``retrain`` — the gold reference: the same model trained from scratch without the concept's rows
  (:mod:`~recframe.unlearning.retrain`);
* ``ga`` — gradient ascent on the forget interactions, plus a retain NLL term;
* ``npo`` — Negative Preference Optimization (Zhang et al. 2024), reference = the original model,
  ``beta = 0.1``, plus the retain term (:mod:`~recframe.unlearning.objectives`);
* ``suppression`` — mask, at decoding, the tokens (trie nodes) whose share of forget items exceeds a
  threshold, in exact scoring and beam search alike (:mod:`~recframe.unlearning.suppression`);
* ``tracer`` — TRACER: reassign the forget items to collision-free code paths that share as little as
  possible with retain items (an assignment problem, :mod:`~recframe.unlearning.reassign`), rebuild the
  SID table (new version and fingerprint) and trie, then fine-tune with a concept unlikelihood on the
  now-exclusive tokens plus a coherence regulariser (KL to the original model's retain next-item
  distributions and a retain representation term) (:mod:`~recframe.unlearning.tracer`).

The report (:mod:`~recframe.unlearning.metrics`), per method, on the test users with exact full ranking:
concept exposure (share of top-10 slots holding forget items), forget Recall@10 (test cases whose target is
a forget item), retain NDCG@10 relative to the original model (cases whose target is a retain item) and the
distance to the retrained model (``1 - overlap@10`` of the top-10 lists).

Usage::

    recframe fit --config configs/decoder_collab_ml100k.yaml        # the model to unlearn from
    recframe unlearn --config configs/unlearn_ml100k_horror.yaml    # checkpoint: runs/decoder_collab_ml100k

The config names the checkpoint, the concept and the methods with their settings (see
:mod:`recframe.unlearning.cli` for every key); the report is printed as a table and written to ``output``,
the unlearned models to ``save_dir/<method>.ckpt`` (loadable with ``recframe recommend --ckpt``; TRACER's
carries its reassigned SID table, ``settings.version`` 1 and a new fingerprint, and suppression's carries its
masking add-on). ``benchmarks/ml100k_unlearning.py`` runs the whole comparison for the two ML-100K concepts
(``--smoke`` for a seconds-long synthetic run). In Python::

    from recframe.unlearning import parse_concept, run_unlearning, load_generative, data_settings
    model, ckpt = load_generative("best.ckpt")
    report = run_unlearning(model, ckpt, data_settings(ckpt), parse_concept('year < 1970'),
                            {"suppression": {"threshold": 0.5}, "tracer": {"steps": 200}})
"""

from recframe.unlearning.concepts import Concept, ConceptError, parse_concept
from recframe.unlearning.metrics import UnlearningMetrics, evaluate_unlearning
from recframe.unlearning.pipeline import data_settings, load_generative, run_unlearning
from recframe.unlearning.reassign import reassign_forget_items
from recframe.unlearning.suppression import SuppressTokens, suppressed_prefixes, with_suppression

__all__ = [
    "Concept",
    "ConceptError",
    "SuppressTokens",
    "UnlearningMetrics",
    "data_settings",
    "evaluate_unlearning",
    "load_generative",
    "parse_concept",
    "reassign_forget_items",
    "run_unlearning",
    "suppressed_prefixes",
    "with_suppression",
]
