"""Checkpoint files: atomic writes, safe loads, clear errors.

* Writes go to a temporary file in the target directory, are flushed and
  fsync'ed, then renamed over the target (``os.replace`` is atomic on POSIX and
  Windows), so a kill mid-write never leaves a half-written checkpoint under the
  real name, and the previous file survives until the new one is complete.
* Loads use ``torch.load(weights_only=True)``: a checkpoint can hold tensors
  and plain containers only, never code.
* Loads verify the archive first: a checkpoint is a zip file whose every member
  carries a CRC-32, and :func:`verify_checkpoint` reads every member and checks
  it, so one flipped byte inside a weight tensor is refused instead of loading
  silently with wrong weights.
* A truncated or corrupted file, a file that is not a checkpoint at all, or a
  directory raises :class:`CheckpointError` naming the file.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO


class CheckpointError(RuntimeError):
    """A checkpoint file that cannot be used; the message names the file and the fix."""


def atomic_write(path: str | Path, write: Callable[[BinaryIO], None]) -> None:
    """Call ``write(fh)`` on a temp file in ``path``'s directory, fsync, then rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file normal permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_checkpoint(checkpoint: dict[str, Any], path: str | Path) -> None:
    """``torch.save`` to a temporary file, then rename over ``path``."""
    atomic_write(path, lambda fh: torch.save(checkpoint, fh))


def verify_checkpoint(path: str | Path) -> None:
    """Refuse a checkpoint whose archive is damaged: check every zip member's CRC-32.

    ``torch.save`` writes a zip archive and stores the CRC-32 of every member
    (the pickle and each tensor's bytes). Reading every member and comparing
    its CRC catches truncation, a damaged directory and flipped bytes anywhere
    in the stored data, at the cost of reading the file once.

    Raises:
        CheckpointError: naming ``path`` when it is not a zip archive or a member fails its CRC.
    """
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except zipfile.BadZipFile:
        raise CheckpointError(
            f"checkpoint {path} is truncated or corrupted (not a readable torch checkpoint archive); "
            "it cannot be loaded. Resume from an earlier checkpoint or retrain.") from None
    except (OSError, EOFError, ValueError, NotImplementedError, zlib.error, KeyError, RuntimeError) as exc:
        raise CheckpointError(
            f"checkpoint {path} is truncated or corrupted ({type(exc).__name__}: {str(exc)[:200]}); "
            "it cannot be loaded. Resume from an earlier checkpoint or retrain.") from None
    if bad is not None:
        raise CheckpointError(
            f"checkpoint {path} is truncated or corrupted (member {bad} fails its CRC-32 check); "
            "it cannot be loaded. Resume from an earlier checkpoint or retrain.")


def check_checkpoint_file(path: str | Path) -> Path:
    """``path`` as a :class:`Path` if it is an intact checkpoint file (:func:`verify_checkpoint`).

    Raises:
        CheckpointError: naming ``path`` when it is a directory, does not exist, or is damaged.
    """
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"checkpoint {path} is a directory; pass a checkpoint file inside it "
                              "(runs/<name>/version_*/checkpoints/last.ckpt or the best-*.ckpt one).")
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist; check the path (runs/<name>/version_*/"
                              "checkpoints/ holds last.ckpt and the best one).")
    verify_checkpoint(path)
    return path


def best_checkpoint(path: str | Path) -> Path:
    """The checkpoint a path names: a file as it is; a run folder (``runs/<name>``, the logger's save_dir and
    name) as the best-validation ``best-*.ckpt`` of its newest ``version_*`` that has one.

    Raises:
        CheckpointError: naming ``path`` and what it holds when no best checkpoint is found.
    """
    path = Path(path)
    if not path.is_dir():
        return path
    versions = sorted(path.glob("version_*"), key=lambda v: int(v.name[8:]) if v.name[8:].isdigit() else -1)
    for version in reversed(versions):
        found = sorted((version / "checkpoints").glob("best-*.ckpt"), key=lambda f: f.stat().st_mtime)
        if found:
            return found[-1]
    raise CheckpointError(f"run folder {path} holds no best-*.ckpt under version_*/checkpoints/ "
                          f"(versions: {', '.join(v.name for v in versions) or 'none'}); train it first "
                          "(`recframe fit --config ...` with this logger name) or pass a checkpoint file.")


def furthest_last_checkpoint(*runs: str | Path) -> Path | None:
    """The furthest-trained ``last.ckpt`` under ``RUN/version_*/checkpoints/`` of any of ``runs`` (run
    folders an interrupted fit, and the attempts that resumed it, logged into), by its epoch and then its
    time; ``None`` when none exists. Resuming from it ends as an uninterrupted fit would."""
    found = [p for run in runs for p in Path(run).glob("version_*/checkpoints/last.ckpt")]
    return max(found, key=lambda p: (load_checkpoint(p)["epoch"], p.stat().st_mtime), default=None)


def load_checkpoint(path: str | Path, map_location: Any = "cpu") -> dict[str, Any]:
    """Verify the archive (:func:`verify_checkpoint`), then load with ``weights_only=True``."""
    path = check_checkpoint_file(path)
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError, zipfile.BadZipFile, ValueError,
            KeyError, IndexError, TypeError) as exc:
        raise CheckpointError(
            f"checkpoint {path} is truncated or corrupted ({type(exc).__name__}: {str(exc)[:200]}); "
            "it cannot be loaded. Resume from an earlier checkpoint or retrain.") from None
    if not isinstance(ckpt, dict):
        raise CheckpointError(f"checkpoint {path} holds a {type(ckpt).__name__}, not a checkpoint "
                              "dictionary; pass a file written by `recframe fit`.")
    return ckpt


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning checkpoint plugin with atomic writes and ``weights_only=True`` loads."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        save_checkpoint(checkpoint, path)

    def load_checkpoint(self, path: Any, map_location: Any = None, weights_only: bool | None = None
                        ) -> dict[str, Any]:
        return load_checkpoint(path, map_location=map_location or "cpu")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
