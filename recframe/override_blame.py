"""Which command-line override caused a config error.

``recframe fit --config FILE --trainer.max_epochs abc`` fails in the parser. Its
message names the config key (``Parser key "trainer.max_epochs"``), not where the
value came from, so the error line would blame ``FILE``. :func:`blame_override`
finds the override that set the key named in the message, so that the line can say
``config error in the override --trainer.max_epochs abc`` instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Override", "blame_override", "overrides_in"]

#: flags that name files or actions rather than config keys
_NOT_OVERRIDES = frozenset({"--config", "-c", "--print_config", "--help", "-h"})
_PARSER_KEY = re.compile(r'Parser key "([^"]+)"')
_NESTED_KEY = re.compile(r"NestedArg\(key='([^']+)'")
_GIVEN_VALUE = re.compile(r"Given value: (.*)$", re.M)
#: ``model.init_args.lr=-1.0 must be ...``: a constructor setting error naming its full key
_KEY_EQUALS = re.compile(r"(?<![\w.-])([A-Za-z_][\w.]*)=")


@dataclass(frozen=True)
class Override:
    """One ``--key VALUE`` (or ``--key=VALUE``) of a command line."""

    flag: str
    value: str | None

    @property
    def key(self) -> str:
        """The config key it sets, ``init_args`` dropped (``--model.init_args.lr`` -> ``model.lr``)."""
        return _normalise(self.flag.lstrip("-").rstrip("+"))

    def __str__(self) -> str:
        return self.flag if self.value is None else f"{self.flag} {self.value}"


def overrides_in(args: Sequence[str]) -> list[Override]:
    """The dotted overrides of a LightningCLI command line (config files and ``--print_config`` excluded)."""
    args = [str(a) for a in args]
    found: list[Override] = []
    for i, arg in enumerate(args):
        if not arg.startswith("--"):
            continue
        flag, eq, inline = arg.partition("=")
        if flag in _NOT_OVERRIDES:
            continue
        if eq:
            found.append(Override(flag, inline))
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            found.append(Override(flag, args[i + 1]))
        else:
            found.append(Override(flag, None))
    return found


def blame_override(message: str, args: Sequence[str]) -> Override | None:
    """The override of ``args`` that the parser error ``message`` is about, or ``None``.

    Matched, in order: an override quoted in the message (``unrecognized arguments: --data.nope``);
    an override of a setting the message names as ``KEY=VALUE`` (a constructor's refusal,
    ``model.init_args.lr=-1.0 must be ...``); an override of exactly the key the parser message names,
    nested keys included (``Parser key "model"`` ...
    ``Parser key "hidden"`` is ``model.hidden``); an override under the named key whose value is the
    value the message reports. A message about a key no override set returns ``None`` (the config file
    is to blame).
    """
    overrides = overrides_in(args)
    if not overrides:
        return None
    for o in overrides:
        if re.search(rf"(?<![\w.-]){re.escape(o.flag)}(?![\w.])", message):
            return o
    named = {_normalise(k) for k in _KEY_EQUALS.findall(message)}
    setting = [o for o in overrides if o.key in named]
    if setting:
        return setting[-1]
    keys = _PARSER_KEY.findall(message)
    nested = keys[1:] + _NESTED_KEY.findall(message)
    if not keys:
        return None
    top = _normalise(keys[0])
    candidates = {top} | {f"{top}.{_normalise(k)}" for k in nested}
    exact = [o for o in overrides if o.key in candidates]
    if exact:
        return exact[-1]  # the last one given is the value the parser kept
    given = [g.strip() for g in _GIVEN_VALUE.findall(message)] + re.findall(r"val='([^']*)'", message)
    under = [o for o in overrides if o.key.startswith(top + ".") and o.value is not None and o.value in given]
    return under[-1] if under else None


def _normalise(key: str) -> str:
    return ".".join(part for part in key.split(".") if part and part != "init_args")
