"""Shared pieces of the benchmark scripts: result files (and :func:`recframe.runs.fit_and_test`).

Every benchmark writes ``benchmarks/results/NAME.json`` (numbers plus what is
needed to trace them: command, seed, data fingerprint, library versions, machine)
and ``benchmarks/results/NAME.md`` (a markdown table).
"""

from __future__ import annotations

import io
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from recframe.callbacks import library_versions
from recframe.checkpoint_io import atomic_write
from recframe.runs import fit_and_test

__all__ = ["claim", "fit_and_test", "import_kept_table", "keep_item_tables", "kept_table", "machine",
           "save_figure", "worker_row", "write_measured", "write_results", "RESULTS"]

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    """CPU count and platform of the machine that produced a result."""
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "processor": platform.processor()}


def write_results(name: str, payload: dict[str, Any], markdown: str) -> tuple[Path, Path]:
    """Write ``NAME.json`` (with versions and machine) and ``NAME.md`` atomically."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {**payload, "versions": library_versions(), "machine": machine(),
               "date": time.strftime("%Y-%m-%d")}
    js, md = RESULTS / f"{name}.json", RESULTS / f"{name}.md"
    atomic_write(js, lambda fh: fh.write(json.dumps(payload, indent=2, default=str).encode()))
    atomic_write(md, lambda fh: fh.write(markdown.encode()))
    return js, md


def kept_table(folder: Path, model: str, seed: int) -> Path:
    """Where a results folder keeps the collaborative item table of ``model`` at ``seed`` (``.npy``, its
    cache record beside it as ``.json``)."""
    return folder / "item_tables" / f"{model}__seed{seed}.npy"


def keep_item_tables(config: str | Path, folder: Path, model: str) -> list[int]:
    """Copy every cached item table of ``config`` (as it reads now) that ``folder`` does not keep yet into
    ``folder/item_tables`` (:func:`kept_table`), so that a new checkout imports it instead of retraining
    ``model`` (the cache itself lives under the ignored dataset root). Returns the seeds kept now."""
    from recframe.features.collaborative import export_item_table, stored_tables

    kept = []
    for seed, cached in sorted(stored_tables(config).items()):
        if not kept_table(folder, model, seed).is_file():
            export_item_table(cached, kept_table(folder, model, seed))
            kept.append(seed)
    return kept


def import_kept_table(config: str | Path, folder: Path, model: str, seed: int) -> bool:
    """Put the table that ``folder`` keeps for ``model`` at ``seed`` back in ``config``'s cache
    (:func:`recframe.features.collaborative.import_item_table`, which refuses a table of an edited config).
    Returns whether one was kept."""
    from recframe.features.collaborative import import_item_table

    kept = kept_table(folder, model, seed)
    if not kept.is_file():
        return False
    import_item_table(config, kept)
    return True


def worker_row(module: str, worker_args: Sequence[str],
               env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Run ``python -m MODULE --worker ...`` in a fresh process (its own peak memory, its own threads) and
    return the JSON row it prints last."""
    cmd = [sys.executable, "-m", module, "--worker", *worker_args]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                         env=None if env is None else dict(env))
    return json.loads(out.stdout.strip().splitlines()[-1])


def write_measured(name: str, module: str, argv: Sequence[str] | None, settings: Mapping[str, Any],
                   rows: list[dict[str, Any]], markdown: str) -> None:
    """Write the rows of a ``--worker`` benchmark (``NAME.json`` with its command and settings, ``NAME.md``)
    and print the table."""
    payload = {"command": f"python -m {module} " + " ".join(sys.argv[1:] if argv is None else argv),
               "settings": {k: v for k, v in settings.items() if k not in ("worker", "no_write")},
               "rows": rows}
    js, md = write_results(name, payload, markdown)
    print(f"wrote {js} and {md}")


def save_figure(fig: Any, path: Path, dpi: int = 120) -> Path:
    """Render a matplotlib figure to PNG, write it atomically to ``path`` and close the figure."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda fh: fh.write(buf.getvalue()))
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


@contextmanager
def claim(path: Path) -> Iterator[bool]:
    """Claim one run for this process while the block runs, so parallel streams never train it twice.

    Yields True when the claim file ``path`` was created here (it holds our pid and is removed on exit),
    False when a live process holds it. A claim left by a process that died (killed mid-run) is taken
    over, so the run resumes. The claim is made with ``O_CREAT | O_EXCL``, so two streams starting the
    same run at once cannot both get it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                holder = int(path.read_text().strip() or 0)
            except (OSError, ValueError):
                holder = 0
            if holder and holder != os.getpid() and _alive(holder):
                yield False
                return
            path.unlink(missing_ok=True)  # stale: its process is gone
            continue
        with os.fdopen(fd, "w") as fh:
            fh.write(str(os.getpid()))
        try:
            yield True
        finally:
            path.unlink(missing_ok=True)
        return
    yield False
