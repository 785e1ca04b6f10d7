"""Cheap checks of constructor settings, and the one error they raise.

A constructor (model, data module, callback) checks its plain settings before
it builds anything, so a zero batch size or a negative learning rate is refused
before any data loads, in one line naming the setting. :class:`SettingError`
carries the constructor argument's name (``key``) and the owner class, so the
``recframe`` command can name the full config key (``model.init_args.lr``,
``data.batch_size``, ...; see :mod:`recframe.constructor_errors`).
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any


class SettingError(ValueError):
    """A constructor setting out of range.

    Args:
        owner: the class whose constructor refused the setting (e.g. ``"SASRec"``).
        key: the constructor argument (e.g. ``"n_heads"``).
        value: the value given.
        requirement: what the value must be, and the fix (e.g. ``"must be a whole number >= 1"``).
        section: where the setting sits in a ``recframe`` config, put before ``key`` in the message
            (``"model.init_args."``, ``"data."``; empty: not said).
    """

    def __init__(self, owner: str, key: str, value: Any, requirement: str, section: str = "") -> None:
        self.owner, self.key, self.value, self.requirement = owner, key, value, requirement
        self.section = section
        super().__init__(f"{owner}: {section}{key}={value!r} {requirement}")

    def in_section(self, section: str) -> SettingError:
        """The same error, saying that the setting sits under ``section`` of a config."""
        return SettingError(self.owner, self.key, self.value, self.requirement, section)

    def describe(self, full_key: str) -> str:
        """The message with the config key in front: ``model.init_args.lr=-1.0 must be ... (SASRec)``."""
        return f"{full_key}={self.value!r} {self.requirement} ({self.owner})"


def check_whole(owner: str, key: str, value: Any, minimum: int = 1, meaning: str = "",
                section: str = "") -> int:
    """``value`` as an int if it is a whole number ``>= minimum`` (not a bool), else :class:`SettingError`."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        requirement = f"must be a whole number >= {minimum}{_meaning(meaning)}"
        raise SettingError(owner, key, value, requirement, section)
    return int(value)


def check_real(owner: str, key: str, value: Any, low: float = 0.0, high: float = math.inf,
               low_open: bool = False, high_open: bool = False, meaning: str = "",
               section: str = "") -> float:
    """``value`` as a float if it is a finite number from ``low`` to ``high``, else :class:`SettingError`.

    ``low_open``/``high_open`` exclude the end points (``low=0, low_open=True``: strictly positive);
    ``section`` is the config section named in the message (see :class:`SettingError`).
    """
    ok = (isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))
          and (value > low if low_open else value >= low) and (value < high if high_open else value <= high))
    if not ok:
        interval = _interval(low, high, low_open, high_open)
        requirement = f"must be a finite number {interval}{_meaning(meaning)}"
        raise SettingError(owner, key, value, requirement, section)
    return float(value)


def _interval(low: float, high: float, low_open: bool, high_open: bool) -> str:
    low_op = ">" if low_open else ">="
    if math.isinf(high):
        return f"{low_op} {low:g}"
    return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"


def _meaning(meaning: str) -> str:
    return f" ({meaning})" if meaning else ""
