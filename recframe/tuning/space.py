"""The search space of ``recframe tune``: a YAML file mapping dotted config keys to distributions.

::

    model.init_args.lr: {type: float, low: 1.0e-4, high: 1.0e-2, log: true, grid: [1.0e-3, 5.0e-3]}
    model.init_args.hidden: {type: int, low: 32, high: 128, step: 32}
    model.init_args.dropout: {type: categorical, choices: [0.1, 0.2, 0.3]}

Each key is a dotted path into the run config, exactly as a ``recframe fit`` override (``--KEY VALUE``) would
name it. Distributions:

* ``float``: ``low``, ``high``, optional ``log`` (bool) or ``step`` (not both), optional ``grid``;
* ``int``: ``low``, ``high``, optional ``step`` (default 1) or ``log``, optional ``grid``;
* ``categorical``: ``choices``, a non-empty list of scalars (string, number, bool or null).

``grid`` lists the points the grid sampler visits; without it an ``int`` grid is every step from ``low`` to
``high`` and a ``categorical`` grid is its choices, while a ``float`` needs one for ``--sampler grid``.
A bad file is refused with one line naming the file and the key (:class:`SpaceError`).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from recframe.tuning.errors import SpaceError

__all__ = ["Param", "SearchSpace", "SpaceError", "load_space", "override_value"]

#: top-level sections of a run config a space key may start with
SECTIONS = ("model", "data", "trainer", "seed_everything")
#: keys ``recframe tune`` owns (each trial logs under the storage directory) or the data links to the model
RESERVED = {
    "trainer.logger": "each trial logs under --storage; choose the directory with --storage instead",
    "model.init_args.max_len": "the model's max_len is linked from data.max_len; search data.max_len instead",
    "model.init_args.n_items": "n_items comes from the data",
    "model.init_args.n_users": "n_users comes from the data",
}
_SPEC_KEYS = {
    "float": {"type", "low", "high", "log", "step", "grid"},
    "int": {"type", "low", "high", "log", "step", "grid"},
    "categorical": {"type", "choices"},
}

Scalar = str | int | float | bool | None


@dataclass(frozen=True)
class Param:
    """One searched config key and its distribution.

    Attributes:
        key: dotted config key, e.g. ``model.init_args.lr``.
        kind: ``float``, ``int`` or ``categorical``.
        low, high: bounds of a numeric distribution (inclusive).
        log: sample on a log scale.
        step: spacing of a discretised numeric distribution.
        choices: the values of a categorical distribution.
        grid: the grid sampler's points (``None``: derived from the distribution, see :meth:`grid_points`).
    """

    key: str
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: tuple[Scalar, ...] = ()
    grid: tuple[Scalar, ...] | None = None

    def suggest(self, trial: Any) -> Scalar:
        """Draw this parameter's value from an Optuna ``trial``."""
        if self.kind == "float":
            return trial.suggest_float(self.key, self.low, self.high, log=self.log, step=self.step)
        if self.kind == "int":
            return trial.suggest_int(self.key, self.low, self.high, log=self.log, step=self.step or 1)
        return trial.suggest_categorical(self.key, list(self.choices))

    def grid_points(self) -> list[Scalar] | None:
        """The grid sampler's points, or ``None`` when a float has no ``grid`` list."""
        if self.grid is not None:
            return list(self.grid)
        if self.kind == "categorical":
            return list(self.choices)
        if self.kind == "int" and not self.log:
            return list(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        return None

    def describe(self) -> dict[str, Any]:
        """A JSON-able description (recorded in ``study.json`` and the study storage)."""
        out: dict[str, Any] = {"type": self.kind}
        if self.kind == "categorical":
            out["choices"] = list(self.choices)
        else:
            out.update(low=self.low, high=self.high, log=self.log, step=self.step)
        if self.grid is not None:
            out["grid"] = list(self.grid)
        return out


@dataclass(frozen=True)
class SearchSpace:
    """The parsed search space: its source file, a content digest and the parameters in file order."""

    source: str
    params: tuple[Param, ...]

    def suggest(self, trial: Any) -> dict[str, Scalar]:
        """Draw every parameter from ``trial`` (in file order)."""
        return {p.key: p.suggest(trial) for p in self.params}

    def grid(self) -> dict[str, list[Scalar]]:
        """The grid sampler's search space; a float without ``grid`` points is refused naming its key."""
        out: dict[str, list[Scalar]] = {}
        for p in self.params:
            points = p.grid_points()
            if points is None:
                raise SpaceError(f"{self.source}: key {p.key!r}: --sampler grid needs grid points for a "
                                 f"{'log-scale int' if p.kind == 'int' else 'float'}; add e.g. "
                                 f"grid: [{p.low}, {p.high}] to it, or use --sampler tpe")
            out[p.key] = points
        return out

    def grid_size(self) -> int:
        """Number of points of the full grid (the product of every parameter's grid)."""
        return math.prod(len(v) for v in self.grid().values())

    def candidates(self) -> dict[str, list[Scalar]]:
        """Values checked against the config schema before a study: every choice or grid point, else the
        bounds."""
        out: dict[str, list[Scalar]] = {}
        for p in self.params:
            points = list(p.grid) if p.grid is not None else list(p.choices)
            out[p.key] = points or [p.low, p.high]
        return out

    def describe(self) -> dict[str, dict[str, Any]]:
        """Every parameter's description, keyed by config key."""
        return {p.key: p.describe() for p in self.params}

    def digest(self) -> str:
        """sha256 of the parsed space (file formatting and comments do not change it)."""
        return hashlib.sha256(json.dumps(self.describe(), sort_keys=True).encode()).hexdigest()


def override_value(value: Scalar) -> str:
    """``value`` as the text of a ``--KEY VALUE`` override (YAML: ``1.0e-05`` a float, ``'1'`` a string)."""
    text = yaml.safe_dump(value, default_flow_style=True)
    return text.removesuffix("\n...\n").strip()


def load_space(path: str | Path) -> SearchSpace:
    """Read and validate a search-space YAML file; any problem is one :class:`SpaceError` line."""
    path = Path(path)
    source = str(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise SpaceError(f"{source}: no such search-space file; pass --space with an existing YAML file") \
            from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpaceError(f"{source}: cannot read the search-space file ({exc})") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        raise SpaceError(f"{source}: not valid YAML{line}; fix the file's syntax") from None
    if not isinstance(raw, dict) or not raw:
        raise SpaceError(f"{source}: a search space maps dotted config keys to distributions, e.g. "
                         "'model.init_args.lr: {type: float, low: 1.0e-4, high: 1.0e-2, log: true}'")
    return SearchSpace(source, tuple(_parse_param(source, key, spec) for key, spec in raw.items()))


def _parse_param(source: str, key: Any, spec: Any) -> Param:
    def fail(message: str) -> SpaceError:
        return SpaceError(f"{source}: key {key!r}: {message}")

    if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
        raise fail("keys are dotted config keys such as model.init_args.lr")
    if key.split(".")[0] not in SECTIONS:
        raise fail(f"a key starts with one of {', '.join(SECTIONS)} (the sections of a run config)")
    if key in RESERVED or key.startswith("trainer.logger."):
        raise fail(f"cannot be searched: {RESERVED.get(key, RESERVED['trainer.logger'])}")
    if not isinstance(spec, dict):
        raise fail("give a distribution mapping, e.g. {type: float, low: 1.0e-4, high: 1.0e-2}")
    kind = spec.get("type")
    if kind not in _SPEC_KEYS:
        raise fail(f"type is {kind!r}; use one of float, int, categorical")
    unknown = sorted(set(spec) - _SPEC_KEYS[kind])
    if unknown:
        raise fail(f"unknown setting {unknown[0]!r} for type {kind}; allowed: "
                   f"{', '.join(sorted(_SPEC_KEYS[kind] - {'type'}))}")
    if kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices:
            raise fail("a categorical needs choices: a non-empty list, e.g. choices: [64, 128]")
        for choice in choices:
            if choice is not None and not isinstance(choice, (str, int, float, bool)):
                raise fail(f"choice {choice!r} is not a scalar; choices are strings, numbers, booleans "
                           "or null")
        if len({json.dumps(c) for c in choices}) != len(choices):
            raise fail("choices repeat a value; list each value once")
        return Param(key, kind, choices=tuple(choices))
    number = _number(fail, kind)
    for name in ("low", "high"):
        if name not in spec:
            raise fail(f"a {kind} needs low and high; {name} is missing")
    low, high = number("low", spec["low"]), number("high", spec["high"])
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise fail(f"log is {log!r}; write true or false")
    step = number("step", spec["step"]) if spec.get("step") is not None else None
    if low > high:
        raise fail(f"low ({low}) is above high ({high}); swap them")
    if log and low <= 0:
        raise fail(f"log: true needs low > 0 (low is {low})")
    if log and step is not None:
        raise fail("log and step cannot be combined; drop one of them")
    if step is not None and step <= 0:
        raise fail(f"step is {step}; it must be > 0")
    grid = None
    if "grid" in spec:
        points = spec["grid"]
        if not isinstance(points, list) or not points:
            raise fail("grid is a non-empty list of values between low and high, e.g. grid: [1.0e-3, 1.0e-2]")
        grid = tuple(number("grid", v) for v in points)
        outside = [v for v in grid if not low <= v <= high]
        if outside:
            raise fail(f"grid point {outside[0]} lies outside [low, high] = [{low}, {high}]")
        if len(set(grid)) != len(grid):
            raise fail("grid repeats a value; list each point once")
    return Param(key, kind, low=low, high=high, log=log, step=step, grid=grid)


def _number(fail: Any, kind: str) -> Any:
    """A converter for ``kind``'s numeric settings (PyYAML reads ``1e-4`` as a string: read as a float)."""

    def convert(name: str, value: Any) -> float | int:
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise fail(f"{name} is {value!r}; an int distribution needs whole numbers")
            return value
        if isinstance(value, bool):
            raise fail(f"{name} is {value!r}; write a number")
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise fail(f"{name} is {value!r}; write a number") from None
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise fail(f"{name} is {value!r}; write a finite number")
        return float(value)

    return convert
