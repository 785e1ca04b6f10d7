"""Every unlearning method's settings, checked before anything runs.

A config's ``methods:`` entry (``NAME`` or a variant ``NAME@LABEL``) becomes a :class:`MethodSettings`: its
keys are split among the setting classes of its kind (:data:`KIND_SETTINGS`) and each is built with
:func:`recframe.yaml_config.build_settings`, so an unknown key, a wrong type (``steps: five``) or a value out
of range (``lr: 0``, ``threshold: 7``) is one :class:`~recframe.data.interactions.DataError` line naming
``methods.<name>.<key>``. :func:`parse_methods` checks every entry, so ``recframe unlearn`` and
:func:`~recframe.unlearning.pipeline.run_unlearning` refuse a bad setting of the last method before the
first one (or the retrain reference) trains.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from recframe.data.interactions import DataError
from recframe.unlearning.methods import FinetuneSettings, NPOSettings
from recframe.unlearning.retrain import RetrainSettings
from recframe.unlearning.suppression import SuppressionSettings
from recframe.unlearning.tracer import TracerSettings
from recframe.yaml_config import build_settings

__all__ = ["KIND_SETTINGS", "METHOD_ORDER", "MethodSettings", "method_kind", "parse_method", "parse_methods",
           "setting_keys"]

#: the methods in the order a run executes them (variants of one method in the given order)
METHOD_ORDER = ("retrain", "ga", "npo", "suppression", "tracer")

#: each method's setting classes; a config key belongs to the class with that field
KIND_SETTINGS: dict[str, tuple[type, ...]] = {
    "retrain": (RetrainSettings,),
    "ga": (FinetuneSettings,),
    "npo": (FinetuneSettings, NPOSettings),
    "suppression": (SuppressionSettings,),
    "tracer": (FinetuneSettings, TracerSettings),
}

S = TypeVar("S")


def method_kind(name: str) -> str:
    """The method a config entry runs: its name up to an ``@`` (``ga@lr=3e-05`` is a ``ga`` variant, so one
    run can hold several settings of a method, e.g. a validation grid)."""
    kind = name.split("@", 1)[0]
    if kind not in METHOD_ORDER:
        raise DataError(
            f"unknown unlearning method {name!r} under methods:; use {', '.join(METHOD_ORDER)} "
            "(optionally NAME@LABEL for a variant)"
        )
    return kind


def setting_keys(kind: str) -> list[str]:
    """Every key a method of ``kind`` takes."""
    return [f.name for cls in KIND_SETTINGS[kind] for f in dataclasses.fields(cls)]


@dataclass(frozen=True)
class MethodSettings:
    """One ``methods:`` entry, checked.

    Attributes:
        name: the entry's name (``NAME`` or ``NAME@LABEL``).
        kind: the method (:data:`METHOD_ORDER`).
        parts: the built setting objects of the kind, by class.
        given: the settings as given (after type conversion), for the report.
    """

    name: str
    kind: str
    parts: dict[type, Any] = field(default_factory=dict)
    given: dict[str, Any] = field(default_factory=dict)

    def get(self, cls: type[S]) -> S:
        """The entry's settings of class ``cls`` (one of its kind's :data:`KIND_SETTINGS`)."""
        return self.parts[cls]


def parse_method(name: str, settings: Mapping[str, Any] | None) -> MethodSettings:
    """Check one ``methods:`` entry (module docstring).

    Raises:
        DataError: ``methods.<name>[.<key>]: ...`` for an unknown method or key, a wrong type or a value out
            of range.
    """
    kind = str(name).split("@", 1)[0]
    if kind not in KIND_SETTINGS:
        raise DataError(
            f"methods.{name}: unknown method; choose from {sorted(KIND_SETTINGS)} "
            "(or NAME@LABEL for a variant)"
        )
    if settings is not None and not isinstance(settings, Mapping):
        raise DataError(f"methods.{name}: expected a mapping of settings, got {settings!r}")
    given = dict(settings or {})
    owner = {f.name: cls for cls in KIND_SETTINGS[kind] for f in dataclasses.fields(cls)}
    for key in given:
        if key not in owner:
            raise DataError(f"methods.{name}.{key}: unknown setting; {kind} takes {setting_keys(kind)}")
    parts = {
        cls: build_settings(cls, {k: v for k, v in given.items() if owner[k] is cls}, f"methods.{name}.")
        for cls in KIND_SETTINGS[kind]
    }
    checked = {k: getattr(parts[owner[k]], k) for k in given}
    return MethodSettings(name=name, kind=kind, parts=parts, given=checked)


def parse_methods(methods: Mapping[str, Any] | None) -> dict[str, MethodSettings]:
    """Every entry of a ``methods:`` mapping checked (:func:`parse_method`), in the given order."""
    if methods is not None and not isinstance(methods, Mapping):
        raise DataError(f"methods: expected a mapping of method name -> settings, got {methods!r}")
    return {name: parse_method(name, settings) for name, settings in (methods or {}).items()}
