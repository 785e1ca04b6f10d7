"""Name the config key behind an error raised while ``recframe fit``/``validate``/``test`` builds its objects.

A model, data-module or callback constructor that refuses a setting raises a
``ValueError`` (often a :class:`~recframe.config_checks.SettingError`), a
``TypeError`` or an arithmetic error. jsonargparse wraps it in a long "Does not
validate against any of the Union subtypes" message; :func:`constructor_config_error`
finds the original error and the object being built, and turns them into one
config error naming the key (``model.init_args.n_heads``, ``data.batch_size``,
``trainer.callbacks[0].init_args.n_bins``).
"""

from __future__ import annotations

import inspect
import re
from argparse import ArgumentError
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from recframe.config_checks import SettingError

#: errors a constructor raises for a setting it cannot use
CONSTRUCTOR_ERRORS = (ValueError, TypeError, ArithmeticError)


def constructor_config_error(exc: BaseException, callbacks: Sequence[Any] = ()) -> ArgumentError | None:
    """The config error for ``exc`` if a model, data-module or callback constructor raised it, else ``None``.

    Looks through ``exc`` and its causes for the outermost ``__init__`` frame of a
    :class:`~recframe.models.base.RecModel`, a ``LightningDataModule`` or a ``Callback`` and names the
    key: ``model.init_args.KEY``, ``data.KEY`` or ``trainer.callbacks[I].init_args.KEY``. ``KEY`` is a
    :class:`SettingError`'s argument, else the constructor arguments that the message names; with none
    named, the section alone. ``callbacks`` are the config's ``trainer.callbacks`` entries
    (``{class_path, init_args}``), used to find ``I``.

    Args:
        exc: the error raised while the objects were built.
        callbacks: the config's ``trainer.callbacks`` list.
    """
    found = _constructor_frame(exc)
    if found is None:
        return None
    cause, owner, args = found
    prefix = _section_prefix(owner, callbacks)
    if isinstance(cause, SettingError):
        return ArgumentError(None, cause.describe(prefix + cause.key))
    message = " ".join(str(cause).split()) or type(cause).__name__
    named = [name for name in args if re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", message)]
    section = prefix.rstrip(".").removesuffix(".init_args")
    where = ", ".join(prefix + name for name in named) if named else section
    return ArgumentError(None, f"{where}: {message} ({type(owner).__name__})")


def _exception_chain(exc: BaseException) -> list[BaseException]:
    """``exc``, its cause, the cause's cause, ... (the original error last)."""
    chain: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not seen for seen in chain):
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    return chain


def _constructor_frame(exc: BaseException) -> tuple[BaseException, Any, list[str]] | None:
    """(the error, the object being built, its constructor's argument names), or ``None``."""
    import lightning as L

    from recframe.models.base import RecModel

    components = (RecModel, L.LightningDataModule, L.Callback)
    for cause in reversed(_exception_chain(exc)):  # the original error first
        if not isinstance(cause, CONSTRUCTOR_ERRORS):
            continue
        tb: TracebackType | None = cause.__traceback__
        while tb is not None:  # outermost frame first: the most derived class's constructor
            frame = tb.tb_frame
            owner = frame.f_locals.get("self") if frame.f_code.co_name == "__init__" else None
            if isinstance(owner, components):
                return cause, owner, [name for name in inspect.getargvalues(frame).args if name != "self"]
            tb = tb.tb_next
    return None


def _section_prefix(owner: Any, callbacks: Sequence[Any]) -> str:
    """``data.``, ``model.init_args.`` or ``trainer.callbacks[I].init_args.`` for the object being built."""
    import lightning as L

    if isinstance(owner, L.LightningDataModule):
        return "data."
    if isinstance(owner, L.Callback):
        name = type(owner).__name__
        hits = [i for i, entry in enumerate(callbacks or ())
                if str(_field(entry, "class_path")).rsplit(".", 1)[-1] == name]
        return f"trainer.callbacks[{hits[0] if len(hits) == 1 else name}].init_args."
    return "model.init_args."


def _field(entry: Any, key: str) -> Any:
    """``entry[key]`` for a dict, ``entry.key`` for a Namespace or object, else ``None``."""
    return entry.get(key) if isinstance(entry, dict) else getattr(entry, key, None)


def model_config_error(class_path: str, init_args: Any, linked: Mapping[str, str] | None = None
                       ) -> ArgumentError | None:
    """The config error for the first out-of-range model setting of a parsed config, else ``None``.

    Runs the model class's :meth:`~recframe.models.base.RecModel.check_settings` on ``init_args`` (a dict
    or Namespace) without building anything, so ``recframe fit`` refuses a bad model setting before
    the data loads. A class that is not a recframe model, or cannot be imported, is left to the parser.
    ``linked`` maps a model setting that the command copies from another key to that key
    (``{"max_len": "data.max_len"}``), which the message then names.
    """
    import importlib

    from recframe.models.base import RecModel

    module, _, name = str(class_path).rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return None
    if not (isinstance(cls, type) and issubclass(cls, RecModel)):
        return None
    settings = init_args.as_dict() if hasattr(init_args, "as_dict") else dict(init_args or {})
    try:
        cls.check_settings(settings)
    except SettingError as exc:
        return ArgumentError(None, exc.describe((linked or {}).get(exc.key, f"model.init_args.{exc.key}")))
    return None


def callback_config_error(entries: Sequence[Any]) -> ArgumentError | None:
    """The config error of the first ``trainer.callbacks`` entry whose constructor refuses its settings.

    Builds each entry whose ``init_args`` are plain values (a callback constructor only stores and
    checks its settings) and drops it again, so ``recframe fit`` refuses a bad callback setting before
    the data loads; Lightning builds the callbacks only after the data module and the model.
    Entries with nested objects, or whose class cannot be imported, are left to the normal build.
    """
    import importlib

    for entry in entries or ():
        class_path, init_args = _field(entry, "class_path"), _field(entry, "init_args")
        settings = init_args.as_dict() if hasattr(init_args, "as_dict") else dict(init_args or {})
        if not class_path or any(_has_class_path(v) for v in settings.values()):
            continue
        module, _, name = str(class_path).rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError):
            continue
        try:
            cls(**settings)
        except CONSTRUCTOR_ERRORS as exc:
            error = constructor_config_error(exc, entries)
            if error is not None:
                return error
    return None


def _has_class_path(value: Any) -> bool:
    if isinstance(value, dict):
        return "class_path" in value or any(_has_class_path(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_class_path(v) for v in value)
    return False
