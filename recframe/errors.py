"""Turn known user errors into one clear line instead of a deep traceback."""

from __future__ import annotations

import contextlib
import os
import sys
from argparse import ArgumentError
from collections.abc import Iterator, Sequence

from recframe.checkpoint_io import CheckpointError
from recframe.config_checks import SettingError
from recframe.data.interactions import DataError
from recframe.metrics.ranking import NonFiniteScoresError
from recframe.override_blame import blame_override

#: errors a user fixes (config, data, checkpoint, a diverged model), printed as one line
USER_ERRORS = (DataError, CheckpointError, ArgumentError, SettingError, NonFiniteScoresError)


@contextlib.contextmanager
def friendly_errors(prog: str = "recframe", source: str = "", args: Sequence[str] = ()) -> Iterator[None]:
    """Print ``prog: error: <message>`` and exit 2 for user errors.

    ``source`` (e.g. the config file names) is added to config errors, unless the error is about a
    key that a command-line override in ``args`` set: then the override is named instead
    (``config error in the override --trainer.max_epochs abc``).
    Set ``RECFRAME_TRACEBACK=1`` to see the full traceback instead.
    """
    try:
        yield
    except USER_ERRORS as exc:
        if os.environ.get("RECFRAME_TRACEBACK"):
            raise
        kind = "error"
        if isinstance(exc, (ArgumentError, SettingError)):
            culprit = blame_override(str(exc), args)
            if culprit is not None:
                source = f"the override {culprit}"
            kind = f"config error in {source}" if source else "config error"
        print(f"{prog}: {kind}: {_first_lines(str(exc))}", file=sys.stderr)
        raise SystemExit(2) from None


def _first_lines(message: str, limit: int = 12) -> str:
    """Keep a long parser message readable: the first ``limit`` lines."""
    lines = [ln for ln in message.strip().splitlines() if ln.strip()]
    more = len(lines) - limit
    return "\n".join(lines[:limit] + ([f"  ... ({more} more lines)"] if more > 0 else []))
