"""YAML configs of the subcommands that are not LightningCLI (``recframe continual``, ``recframe unlearn``).

Every problem is one :class:`~recframe.data.interactions.DataError` line that names the key (and, through
:func:`in_file`, the file), so :func:`recframe.errors.friendly_errors` prints it before any work starts:

* :func:`read_yaml_config` reads a file: a missing file, malformed YAML (with its line and column) or a
  top level that is not a mapping;
* :func:`check_value` checks one value against a type (``int``, ``float``, ``bool``, ``str``, ``dict``,
  ``list``, or ``X | None``);
* :func:`build_settings` builds a settings dataclass from a mapping: unknown keys, wrong types and the
  dataclass's own range checks (a ``ValueError`` whose message starts with the field name) become
  ``<where><field>: ...``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from recframe.data.interactions import DataError

__all__ = ["build_settings", "check_value", "in_file", "read_yaml_config", "require"]

T = TypeVar("T")

_NAMES = {int: "a whole number", float: "a number", bool: "true or false", str: "a string",
          dict: "a mapping", list: "a list"}


def read_yaml_config(path: str | Path, what: str, example: str) -> dict[str, Any]:
    """The mapping a YAML config file holds (an empty file is ``{}``).

    Args:
        path: the file.
        what: what the config configures, for the messages (e.g. ``"an unlearning"``).
        example: a shipped config to point to (e.g. ``configs/unlearn_ml100k_horror.yaml``).

    Raises:
        DataError: one line naming the file: missing, unreadable, not valid YAML (line and column) or not
            a mapping.
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"--config {p}: no such file; give {what} YAML config (e.g. {example}).")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{p}: cannot be read as UTF-8 text ({type(exc).__name__}); give {what} YAML "
                        f"config (e.g. {example}).") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DataError(f"{p}: not valid YAML{_position(exc)}: {_problem(exc)}; check the indentation, "
                        "colons and brackets there (quote values that contain ': ' or '#').") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise DataError(f"{p}: expected a mapping of keys at the top level, got a {type(raw).__name__}; "
                        f"see {example}.")
    return raw


def _position(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _problem(exc: yaml.YAMLError) -> str:
    parts = [getattr(exc, "context", None), getattr(exc, "problem", None)]
    text = ", ".join(p for p in parts if p) or str(exc)
    return " ".join(text.split())


@contextlib.contextmanager
def in_file(path: str | Path | None) -> Iterator[None]:
    """Prefix the message of a :class:`DataError` raised in the block with ``path`` (when given)."""
    try:
        yield
    except DataError as exc:
        if path is None or str(exc).startswith(f"{path}:") or str(exc).startswith("--config"):
            raise
        raise DataError(f"{path}: {exc}") from None


def require(ok: bool, key: str, value: Any, rule: str) -> None:
    """Raise ``ValueError("<key>: <value>; it must be <rule>")`` unless ``ok`` (the settings classes' range
    checks; :func:`build_settings` turns the message into a config error naming the key)."""
    if not ok:
        raise ValueError(f"{key}: {value!r}; it must be {rule}.")


def check_value(value: Any, kind: Any, key: str) -> Any:
    """``value`` checked against ``kind`` (a type or ``X | None``), as the setting's type.

    ``int`` refuses booleans and non-whole numbers; ``float`` takes whole numbers and numeric strings
    (``1e-4`` is a string to YAML 1.1) and refuses non-finite values.

    Raises:
        DataError: ``<key>: expected <kind>, got <value>``.
    """
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        kinds = [a for a in args if a is not type(None)]
        if len(kinds) != 1:
            raise TypeError(f"check_value supports X | None, not {kind}")
        return check_value(value, kinds[0], key)
    base = typing.get_origin(kind) or kind
    if base is float:
        number = value
        if isinstance(value, str):
            with contextlib.suppress(ValueError):
                number = float(value)
        if isinstance(number, (int, float)) and not isinstance(number, bool) and math.isfinite(number):
            return float(number)
    elif base is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(base, type) and isinstance(value, base):
        return value
    name = _NAMES.get(base, getattr(base, "__name__", str(base)))
    raise DataError(f"{key}: expected {name}, got {value!r}")


def build_settings(cls: type[T], values: Mapping[str, Any] | None, where: str = "") -> T:
    """An instance of the dataclass ``cls`` from ``values``, every key and type checked.

    Args:
        cls: a dataclass whose fields are annotated with the types :func:`check_value` reads and whose
            ``__post_init__`` range checks raise :func:`require`'s ``ValueError`` (message starting with the
            field name).
        values: the config's settings (``None``: the defaults).
        where: the section's key path, e.g. ``"methods.ga."``, prefixed to every message.

    Raises:
        DataError: ``<where><field>: ...`` for an unknown key, a wrong type or a value out of range.
    """
    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    checked: dict[str, Any] = {}
    for key, value in (values or {}).items():
        if key not in fields:
            raise DataError(f"{where}{key}: unknown setting; valid settings here: {sorted(fields)}")
        checked[key] = check_value(value, hints[key], f"{where}{key}")
    try:
        return cls(**checked)
    except ValueError as exc:
        raise DataError(f"{where}{exc}") from None
