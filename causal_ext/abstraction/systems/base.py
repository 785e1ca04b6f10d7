"""What a benchmark system provides: both models, the abstraction, and whether it is valid."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from causal_ext.abstraction.abstraction import Abstraction
from causal_ext.abstraction.scm import SCM


@dataclass(frozen=True)
class Case:
    """One condition of one benchmark system.

    Attributes:
        system: system name.
        condition: condition name (``valid`` or a contrastive invalid condition).
        valid: whether the abstraction is a valid explanation of the low-level model.
        low: the low-level model.
        high: the high-level model.
        abstraction: the map between them.
        description: what the condition is, in one sentence.
        settings: CAE settings the system needs (``n_replicates``, ``outputs``, ...).
        kind: the system's regime, e.g. ``discrete, static``.
    """

    system: str
    condition: str
    valid: bool
    low: SCM
    high: SCM
    abstraction: Abstraction
    description: str
    settings: dict[str, Any] = field(default_factory=dict)
    kind: str = ""


def unknown_condition(system: str, condition: str, conditions: tuple[str, ...]) -> ValueError:
    """The error for a condition a system does not define."""
    return ValueError(f"{system}: condition '{condition}' is unknown; use one of {list(conditions)}.")


__all__ = ["Case", "unknown_condition"]
