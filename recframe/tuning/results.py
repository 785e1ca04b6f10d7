"""What ``recframe tune`` writes under its storage directory, every file atomically (temp file + rename)::

    STORAGE/study.db                     the Optuna study (SQLite); reruns continue it
    STORAGE/trials/trial_0003/config.yaml   the trial's resolved config (what LightningCLI ran)
    STORAGE/trials/trial_0003/result.json   its parameters, state and validation result (no test metric)
    STORAGE/trials/trial_0003/version_0/    its CSV log and checkpoints
    STORAGE/best.yaml                    the tuned config: --config FILE with the best trial's values set
    STORAGE/study.json                   the summary: settings, trial budget, every trial, the best one
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import yaml

from recframe.checkpoint_io import atomic_write

__all__ = ["config_with", "shown", "trial_dir", "write_best", "write_json", "write_text"]


def shown(path: str | Path) -> str:
    """``path`` relative to the working directory when inside it, so results name no machine path."""
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    atomic_write(path, lambda fh: fh.write(text.encode()))


def write_json(path: str | Path, data: Any) -> None:
    """Write ``data`` as indented JSON to ``path`` atomically; a non-finite float is written as ``null``."""
    write_text(path, json.dumps(_finite(data), indent=2, allow_nan=False) + "\n")


def _finite(data: Any) -> Any:
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(v) for v in data]
    return data


def trial_dir(storage: Path, number: int) -> Path:
    """The folder of trial ``number``: ``STORAGE/trials/trial_0003``."""
    return storage / "trials" / f"trial_{number:04d}"


def config_with(config: str | Path, params: dict[str, Any]) -> dict[str, Any]:
    """The YAML of ``config`` with every dotted key of ``params`` set (missing sections are created).

    ``recframe fit --config`` on the result runs what ``--config FILE --KEY VALUE ...`` ran.
    """
    base = yaml.safe_load(Path(config).read_text()) or {}
    out = copy.deepcopy(base)
    for key, value in params.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[leaf] = value
    return out


def write_best(storage: Path, config: str | Path, best: dict[str, Any], metric: str) -> Path:
    """Write ``STORAGE/best.yaml``: ``config`` with the best trial's values, headed by their origin."""
    params = best["params"]
    header = [f"# recframe tune: trial {best['number']} of {shown(storage)}, chosen on validation "
              f"{metric} = {best['value']:.6g}",
              f"# = {shown(config)} with "
              + (", ".join(f"{k}={v!r}" for k, v in params.items()) or "no changes"),
              f"# Run: recframe fit --config {shown(storage / 'best.yaml')}"]
    body = yaml.safe_dump(config_with(config, params), sort_keys=False, default_flow_style=False)
    path = storage / "best.yaml"
    write_text(path, "\n".join(header) + "\n" + body)
    return path
