"""Popularity: candidates by number of reviews (ties by POI id); no citations, dialogue ignored."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from recframe.conversational.baselines.base import System
from recframe.conversational.view import DialogueView, Prediction

__all__ = ["PopularitySystem"]


class PopularitySystem(System):
    """The most-reviewed candidates first; it cites nothing."""

    name = "Popularity"

    def predict_many(self, views: Sequence[DialogueView]) -> list[Prediction]:
        return [Prediction(self.order(v.candidates, np.zeros(len(v.candidates)))) for v in views]
