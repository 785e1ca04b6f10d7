"""Continual recommendation: time stages, the stage protocol, baselines (fine-tune, full retrain, replay,
LwF distillation, EWC) and VAMIRec. ``recframe continual --config FILE`` runs a comparison
(:mod:`recframe.continual.cli`)."""

from recframe.continual.baselines import (
    EWC,
    BackboneSettings,
    ContinualLearner,
    Distillation,
    FineTune,
    FullRetrain,
    Replay,
    ReservoirBuffer,
)
from recframe.continual.protocol import ProtocolResult, evaluate_stage, run_protocol
from recframe.continual.stages import StagedInteractions, split_stages
from recframe.continual.vamirec import OPERATIONS, VAMIRec

__all__ = ["EWC", "OPERATIONS", "BackboneSettings", "ContinualLearner", "Distillation", "FineTune",
           "FullRetrain", "ProtocolResult", "Replay", "ReservoirBuffer", "StagedInteractions", "VAMIRec",
           "evaluate_stage", "run_protocol", "split_stages"]
