"""Data layer: one table type, sources, filters, splits and the datamodule."""

from recframe.data.interactions import DataError, Histories, Interactions, ItemFeatures
from recframe.data.splits import Split, chronological_ratio, leave_one_out, make_split, time_stages

__all__ = ["DataError", "Histories", "Interactions", "ItemFeatures", "Split", "chronological_ratio",
           "leave_one_out", "make_split", "time_stages"]
