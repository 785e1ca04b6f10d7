"""CoCHI: class-oriented causal head intervention for calibration (seed paragraph 2).

* :mod:`~calib_ext.cochi.patterns` -- correctness x confidence patterns and the confidence threshold;
* :mod:`~calib_ext.cochi.attribution` -- each head's causal effect on each pattern's confidence (head ablation
  through :mod:`recframe.heads`);
* :mod:`~calib_ext.cochi.intervention` -- :class:`CoCHI`: head selection and scales learned on validation NLL;
* :mod:`~calib_ext.cochi.tasks` -- how predictions are read from a recommender, a classifier or an encoder;
* :mod:`~calib_ext.cochi.multiple_choice` -- the MiniLM multiple-choice task built from ML-100K metadata;
* :mod:`~calib_ext.cochi.callback` -- :class:`CoCHICallback`, CoCHI after ``trainer.fit``.
"""

from calib_ext.cochi.callback import CoCHICallback
from calib_ext.cochi.intervention import CoCHI, masked_nll
from calib_ext.cochi.patterns import PATTERNS, Pattern, classify, confidence_threshold
from calib_ext.cochi.tasks import LogitTask, RecTask, TensorTask, collect

__all__ = ["CoCHI", "CoCHICallback", "LogitTask", "PATTERNS", "Pattern", "RecTask", "TensorTask", "classify",
           "collect", "confidence_threshold", "masked_nll"]
