"""recframe models: one file per model on :mod:`recframe.models.base`."""

from recframe.models.base import EmbeddingModel, RecModel
from recframe.models.bert4rec import BERT4Rec
from recframe.models.bpr import BPRMF
from recframe.models.gru4rec import GRU4Rec
from recframe.models.lightgcn import LightGCN
from recframe.models.popularity import Popularity
from recframe.models.recmem import RecMem
from recframe.models.sasrec import SASRec
from recframe.models.signed import LightGCNNeg, SiReN, ValenceMargin

__all__ = ["RecModel", "EmbeddingModel", "Popularity", "BPRMF", "LightGCN", "SASRec", "GRU4Rec", "BERT4Rec",
           "RecMem", "SiReN", "LightGCNNeg", "ValenceMargin"]
