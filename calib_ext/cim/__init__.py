"""CIM: causal-invariant masking uncertainty (seed ¶16): Semantic Divergence and Expected Embedding Drift.

* :mod:`~calib_ext.cim.adapters`: what CIM needs of a model (parts, output embedding, predictive
  distribution); :class:`RecommenderAdapter` for recframe's sequential embedding models;
* :mod:`~calib_ext.cim.text`: :class:`~calib_ext.cim.text.TextMultipleChoiceAdapter`, a sentence encoder
  (the offline MiniLM) answering multiple-choice questions, tokens as parts;
* :mod:`~calib_ext.cim.focus`: intervention effects of the parts and the causally-focused view;
* :mod:`~calib_ext.cim.divergence`: Semantic Divergence (JS over semantic classes of outcomes);
* :mod:`~calib_ext.cim.drift`: geodesic distance and Expected Embedding Drift (EED);
* :mod:`~calib_ext.cim.detector`: :class:`CIMDetector` (scores, timing) and AUROC;
* :mod:`~calib_ext.cim.callback`: :class:`CIMCallback` after test.
"""

from calib_ext.cim.adapters import FocusAdapter, RecommenderAdapter
from calib_ext.cim.detector import CIMDetector, CIMScores, auroc, auroc_table
from calib_ext.cim.divergence import SemanticClusters, js_divergence, semantic_divergence
from calib_ext.cim.drift import expected_embedding_drift, geodesic_distance
from calib_ext.cim.focus import focus_mask, focused_views, intervention_effects

__all__ = ["CIMDetector", "CIMScores", "FocusAdapter", "RecommenderAdapter", "SemanticClusters", "auroc",
           "auroc_table", "expected_embedding_drift", "focus_mask", "focused_views", "geodesic_distance",
           "intervention_effects", "js_divergence", "semantic_divergence"]
