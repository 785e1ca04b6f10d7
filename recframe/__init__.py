"""recframe: recommender-systems research behind one Lightning core.

Import what you need from the subpackages: ``recframe.data`` (Interactions,
sources, splits, the datamodule), ``recframe.metrics`` (the full-ranking
evaluator), ``recframe.models`` (Popularity, BPR-MF, LightGCN, SASRec, ...).
Nothing is downloaded at import time.
"""

__version__ = "0.1.0"
