"""Callbacks shared by the core and the extension packages.

``RunMetadata`` makes every checkpoint traceable (DESIGN invariant 3): the
resolved config, the seed, the data fingerprint and the library versions are
stored under ``checkpoint["recframe"]`` as plain strings and numbers, so the
file still loads with ``weights_only=True``.
"""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any

import lightning as L

_LIBRARIES = ("recframe", "torch", "lightning", "numpy", "torch_geometric", "faiss-cpu", "jsonargparse")


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries a result depends on (plus Python)."""
    out = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


class RunMetadata(L.Callback):
    """Stores config, seed, data fingerprint and versions in each checkpoint.

    Args:
        config_text: the resolved YAML config (the CLI fills it in).
        seed: the global seed of the run (the CLI fills it in).
    """

    def __init__(self, config_text: str = "", seed: int | None = None) -> None:
        self.config_text = config_text
        self.seed = seed

    def describe(self, trainer: L.Trainer) -> dict[str, Any]:
        """The metadata dict for this run."""
        dm = getattr(trainer, "datamodule", None)
        return {
            "config": self.config_text,
            "seed": -1 if self.seed is None else int(self.seed),
            "data_fingerprint": getattr(dm, "fingerprint", "") if dm is not None else "",
            "versions": library_versions(),
            "model_class": f"{type(trainer.lightning_module).__module__}."
                           f"{type(trainer.lightning_module).__qualname__}",
        }

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule,
                           checkpoint: dict[str, Any]) -> None:
        checkpoint["recframe"] = self.describe(trainer)
