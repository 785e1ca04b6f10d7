"""Does a checkpoint fit the model a config describes? (``recframe test|validate|fit --ckpt_path``)

LightningCLI rebuilds the model from the checkpoint's own hyperparameters, so
without a check:

* a config naming another model class tests the checkpoint's class silently;
* a model setting given in the config or on the command line is ignored silently;
* a setting linked from ``data`` (``data.max_len``) does reach the model, and a
  shape it changes ends in a raw ``size mismatch`` error from ``load_state_dict``.

:func:`compare_checkpoint_to_config` refuses the first two kinds of mismatch that
cannot work (another class; a linked setting that changes a weight's shape) with
one :class:`~recframe.checkpoint_io.CheckpointError` line, and returns the
settings that differ and are ignored, for one warning line.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from recframe.checkpoint_io import CheckpointError

#: model settings that the command links from the data when the objects are built (not comparable before)
LINKED_AT_INSTANTIATE = ("n_items", "n_users")


@dataclass(frozen=True)
class IgnoredSetting:
    """A model setting of the config that differs from the checkpoint's and is replaced by it."""

    key: str
    given: Any
    stored: Any

    def describe(self) -> str:
        """``model.init_args.hidden=16 (checkpoint: 32)``."""
        return f"model.init_args.{self.key}={self.given!r} (checkpoint: {self.stored!r})"


def compare_checkpoint_to_config(ckpt: Mapping[str, Any], path: str | Path, class_path: str,
                                 settings: Mapping[str, Any], linked: Mapping[str, str]
                                 ) -> list[IgnoredSetting]:
    """Refuse a checkpoint that cannot be the config's model; return the config settings it overrides.

    Args:
        ckpt: the loaded checkpoint (``hyper_parameters``, ``state_dict``).
        path: the checkpoint file, for messages.
        class_path: the config's ``model.class_path``.
        settings: the config's ``model.init_args`` (values as parsed).
        linked: model settings the command sets from another key (``{"max_len": "data.max_len"}``);
            these reach the model instead of the checkpoint's value.

    Returns:
        The settings (not linked) whose config value differs from the checkpoint's and is ignored.

    Raises:
        CheckpointError: the checkpoint holds another model class, or a linked setting gives a weight
            a shape other than the checkpoint's (naming the setting, both values and the weight).
    """
    path = Path(path)
    hparams = dict(ckpt.get("hyper_parameters") or {})
    stored_path = hparams.get("_class_path") or (ckpt.get("recframe") or {}).get("model_class")
    if not stored_path:
        return []  # not written through the CLI: nothing to compare the config with
    cfg_cls, stored_cls = _import(class_path), _import(str(stored_path))
    if cfg_cls is not None and stored_cls is not None and cfg_cls is not stored_cls:
        raise CheckpointError(
            f"checkpoint {path} holds a {stored_cls.__name__} model ({stored_path}) but the config's model "
            f"is {cfg_cls.__name__} ({class_path}); pass the config it was trained with (saved in the "
            f"checkpoint under checkpoint['recframe']['config']) or a {cfg_cls.__name__} checkpoint.")
    upgrade = getattr(stored_cls, "upgrade_checkpoint", None)
    if callable(upgrade):  # compare with what the model rebuilds from an older checkpoint
        hparams = dict(upgrade({**ckpt, "hyper_parameters": dict(hparams)}).get("hyper_parameters") or {})
    stored = {k: v for k, v in hparams.items() if not k.startswith("_")}
    differ = {key: value for key, value in settings.items()
              if key in stored and key not in LINKED_AT_INSTANTIATE and not _same(value, stored[key])}
    linked_differ = {key: differ.pop(key) for key in list(differ) if key in linked}
    if linked_differ and stored_cls is not None:
        _refuse_shape_change(path, stored_cls, stored, linked_differ, linked, ckpt.get("state_dict") or {})
    return [IgnoredSetting(key, value, stored[key]) for key, value in differ.items()]


def ignored_settings_warning(ignored: Sequence[IgnoredSetting]) -> str:
    """One line: which config settings the checkpoint's own values replace."""
    listed = ", ".join(s.describe() for s in ignored)
    return (f"the checkpoint's model settings are used and these config settings are ignored: {listed}; "
            "to change them, train a new model.")


def _refuse_shape_change(path: Path, cls: type, stored: dict[str, Any], changed: dict[str, Any],
                         linked: Mapping[str, str], state: Mapping[str, Any]) -> None:
    """Raise if a linked setting's value gives a stored weight another shape (checked on the meta device)."""
    want = _shapes(cls, stored)
    if want is None:
        return
    for key, value in changed.items():
        got = _shapes(cls, {**stored, key: value})
        if got is None:
            continue
        for name, tensor in state.items():
            shape = tuple(getattr(tensor, "shape", ()))
            if name in got and got[name] != shape:
                raise CheckpointError(
                    f"{linked[key]}={value!r} does not fit checkpoint {path}: it was trained with {key}="
                    f"{stored[key]!r}, and {key}={value!r} gives {name} the shape {list(got[name])} instead "
                    f"of {list(shape)}; set {linked[key]}: {stored[key]!r} to use this checkpoint, or "
                    "train a new model.")


def _shapes(cls: type, settings: Mapping[str, Any]) -> dict[str, tuple[int, ...]] | None:
    """Parameter and buffer shapes of ``cls(**settings)`` built on the meta device (no memory); ``None`` if
    the model cannot be built that way."""
    try:
        with torch.device("meta"):
            model = cls(**settings)
    except Exception:  # any model that cannot be built on the meta device is not compared
        return None
    return {name: tuple(t.shape) for name, t in model.state_dict().items()}


def _import(class_path: str) -> type | None:
    module, _, name = str(class_path).rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return None


def _plain(value: Any) -> Any:
    """A comparable form: Namespaces and mappings as dicts, tuples as lists, empty containers as None."""
    if hasattr(value, "as_dict"):
        value = value.as_dict()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()} or None
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value] or None
    return value


def _same(a: Any, b: Any) -> bool:
    return _plain(a) == _plain(b)
