"""Separate virtual environments for peer libraries whose pins conflict with ours.

RecBole 1.2.1 needs numpy<2 and setuptools<70; lingam pins scipy<=1.13.1. Neither
may enter the project environment, so a benchmark that compares against them
builds the peer its own venv under ``benchmarks/.venvs/NAME`` (ignored by git)
and runs the peer's side as a subprocess that writes JSON.

The venv is rebuilt only when its requirement list changes (a stamp file holds
the list), so a second run of a benchmark starts at once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

VENVS = Path(__file__).resolve().parent / ".venvs"


def peer_python(name: str, requirements: Sequence[str], *, pre: Sequence[str] = ()) -> Path:
    """Return the interpreter of venv ``NAME`` with ``requirements`` installed.

    ``pre`` is installed first and on its own (torch's CPU build, for example, so
    that pip does not resolve ``torch`` to a multi-GB CUDA build later).
    """
    root = VENVS / name
    python = root / "bin" / "python"
    stamp = root / ".requirements.json"
    wanted = {"pre": list(pre), "requirements": list(requirements)}
    if python.exists() and stamp.exists() and json.loads(stamp.read_text()) == wanted:
        return python
    print(f"[peer_env] building venv '{name}': {' '.join([*pre, *requirements])}", file=sys.stderr)
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if pre:
        subprocess.run([*pip, *pre], check=True)
    subprocess.run([*pip, *requirements], check=True)
    stamp.write_text(json.dumps(wanted))
    return python


def run_peer(python: Path, script: Path, args: Sequence[str] = (), *, timeout: float | None = None,
             env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``script`` under the peer interpreter; it must print one JSON object as its last line."""
    proc = subprocess.run([str(python), str(script), *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"peer script {script.name} failed (exit {proc.returncode}):\n"
                           f"{proc.stderr[-4000:]}")
    last = [line for line in proc.stdout.splitlines() if line.strip()][-1]
    return json.loads(last)
