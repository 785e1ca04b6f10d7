"""Valence-aware recommendation (seed ¶4): sign-aware graph models, a valence add-on and a valence probe.

* :class:`SiReN` and :class:`LightGCNNeg`: graph recommenders that train on liked *and* disliked feedback
  (shared code in :mod:`recframe.models.signed.base`);
* :class:`ValenceMargin`: an auxiliary loss for any embedding model, through the ``addons:`` list, that
  pushes a user's disliked items below their unobserved items in the inner-product score;
* :func:`valence_probe` / :class:`ValenceProbe`: a linear probe of liked vs disliked on frozen embeddings,
  next to the inner-product score's own AUROC.

The signed metrics that measure all this are the evaluator's (:mod:`recframe.metrics.signed`).
"""

from recframe.models.signed.base import SignedGraphModel
from recframe.models.signed.lightgcn_neg import LightGCNNeg
from recframe.models.signed.probe import ValenceProbe, valence_probe
from recframe.models.signed.siren import SiReN
from recframe.models.signed.valence import ValenceMargin

__all__ = ["LightGCNNeg", "SiReN", "SignedGraphModel", "ValenceMargin", "ValenceProbe", "valence_probe"]
