"""Seeded, resumable benchmark runs: one JSON per (row, seed), claimed, resumed from ``last.ckpt``.

The pieces every multi-seed table shares (:mod:`benchmarks.amazon`, :mod:`benchmarks.ml100k_generative`):
where a run's result is stored, which ``last.ckpt`` an interrupted attempt left, the validation curve
of a run (across the version folders a resume creates), and the loop that trains every missing
(row, seed) once even when several processes share the work.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import claim, fit_and_test
from benchmarks.per_user import rank_string, test_ranks
from recframe.checkpoint_io import atomic_write, furthest_last_checkpoint

RUN_LOGS = Path("runs")
"""The configs' logger ``save_dir``, relative to the working directory."""


def slug(row: str) -> str:
    """A file-name-safe form of a row name."""
    return "".join(c if c.isalnum() else "_" for c in row).strip("_")


def run_file(folder: Path, row: str, seed: int) -> Path:
    """Where the finished run of ``row`` with ``seed`` is stored under ``folder``."""
    return folder / f"{slug(row)}__seed{seed}.json"


def interrupted_checkpoint(name: str, run_logs: Path | None = None) -> Path | None:
    """The furthest-trained ``last.ckpt`` an interrupted earlier attempt left under ``runs/NAME``."""
    return furthest_last_checkpoint((RUN_LOGS if run_logs is None else run_logs) / name)


def validation_curve(name: str, run_logs: Path | None = None) -> list[dict[str, float]]:
    """``[{epoch, val_ndcg}]`` of run ``name`` (Lightning's CSV logger), across its version folders.

    A resumed run logs into a new ``version_K``; the curve joins them, a later version's value of an
    epoch replacing an earlier one's (the epoch the interrupted attempt was in is run again).
    """
    run_logs = RUN_LOGS if run_logs is None else run_logs
    by_epoch: dict[int, float] = {}
    logs = sorted((run_logs / name).glob("version_*/metrics.csv"), key=lambda p: int(p.parent.name[8:]))
    for log in logs:
        with open(log, newline="") as fh:
            rows = csv.DictReader(fh)
            by_epoch.update((int(r["epoch"]), float(r["val_ndcg"])) for r in rows if r.get("val_ndcg"))
    return [{"epoch": e, "val_ndcg": v} for e, v in sorted(by_epoch.items())]


def with_ranks(model: Any, dm: Any) -> dict[str, Any]:
    """``after_test`` hook: every test user's rank of the held-out item, one character per user."""
    return {"test_top10_ranks": rank_string(test_ranks(model, dm))}


def run_missing(
    jobs: Sequence[tuple[str, int]],
    folder: Path,
    config_of: Callable[[str], Path],
    overrides_of: Callable[[str, int, str], list[str]],
    log_name_of: Callable[[str, int], str],
    *,
    show_test: bool = True,
    run_logs: Path | None = None,
    recorded: dict[str, Any] | None = None,
) -> None:
    """Train and test every ``(row, seed)`` of ``jobs`` without a stored result, storing each as it finishes.

    ``overrides_of(row, seed, log_name)`` gives the run's CLI overrides. A run another live process has
    claimed is skipped; a run an earlier process left unfinished resumes from its ``last.ckpt`` under
    ``run_logs``. ``recorded`` entries are added to every stored result; ``show_test=False`` prints the
    validation alone (a search must not see test numbers while choosing).
    """
    run_logs = RUN_LOGS if run_logs is None else run_logs
    folder.mkdir(parents=True, exist_ok=True)
    for row, seed in jobs:
        path = run_file(folder, row, seed)
        if path.exists():
            print(f"[skip] {row} seed {seed}: {path.name} exists", flush=True)
            continue
        name = log_name_of(row, seed)
        with claim(run_logs / f"{name}.claim") as mine:
            if not mine:
                print(f"[skip] {row} seed {seed}: another process is running it", flush=True)
                continue
            if path.exists():  # finished by another stream since the check above
                continue
            resume = interrupted_checkpoint(name, run_logs)
            print(f"[run] {row} seed {seed}{f' (resuming {resume})' if resume else ''}", flush=True)
            result = fit_and_test(config_of(row), overrides_of(row, seed, name), ckpt_path=resume,
                                  after_test=with_ranks)
            curve = validation_curve(name, run_logs)
            result.update(row=row, seed=seed, **(recorded or {}), val_curve=curve,
                          selected_last=bool(curve) and result["best_checkpoint_epoch"] == curve[-1]["epoch"])
            text = json.dumps(result, indent=2, default=str).encode()
            atomic_write(path, lambda fh, t=text: fh.write(t))
        shown = f", test {result['test']['ndcg@10']:.4f}" if show_test else ""
        print(f"[done] {row} seed {seed}: val ndcg@10 {result['valid']['ndcg@10']:.4f}{shown} in "
              f"{result['train_seconds']:.0f} s (best epoch {result['best_checkpoint_epoch']} of "
              f"{result['epochs']})", flush=True)


def load_runs(folder: Path, order: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """Every stored run under ``folder``, grouped by row (``order`` first), each group sorted by seed."""
    grouped: dict[str, list[dict[str, Any]]] = {row: [] for row in order}
    for path in sorted(folder.glob("*.json")):
        run = json.loads(path.read_text())
        grouped.setdefault(run["row"], []).append(run)
    return {row: sorted(runs, key=lambda r: r["seed"]) for row, runs in grouped.items() if runs}
