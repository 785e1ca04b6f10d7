"""``recframe unlearn --config FILE``: concept unlearning on a trained generative model checkpoint.

The YAML config (``checkpoint`` and ``concept`` required). Malformed YAML, an unknown key, a wrong type or a
value out of range, in any method's settings too, is refused in one line naming the file and the key before
the checkpoint loads and any method (or the retrain reference) trains; a missing checkpoint names the
config that trains it::

    checkpoint: runs/decoder_collab_ml100k   # a checkpoint file, or a run folder (its best checkpoint)
    concept: genre == "Horror"            # recframe.unlearning.concepts
    data: {}                              # optional overrides of the checkpoint's stored data settings
    methods:                              # each optional; settings below are the defaults
      retrain: {max_epochs: 20, patience: 4, check_val_every_n_epoch: 1, seed: 0}
      ga: {steps: 100, batch_size: 64, lr: 1.0e-4, retain_weight: 1.0, grad_clip: 1.0, seed: 0}
      npo: {beta: 0.1, steps: 100, ...}   # plus the ga keys
      suppression: {threshold: 0.5, penalty: -1.0e+9}
      tracer: {coherence_weight: 1.0, representation_weight: 1.0, reassign: true, root_sample: 0,
               steps: 100, ...}        # root_sample m > 0: m sampled roots per step (unbiased mass)
      tracer@no_reassign: {reassign: false}  # NAME@LABEL: another setting of a method, its own row
    eval_batch_size: 256                  # users per scoring batch, >= 1
    choose_on_validation: false           # true: score validation too and choose one setting per method
                                          # (recframe.unlearning.selection; list variants as NAME@LABEL)
    save_dir: runs/unlearn_horror         # unlearned checkpoints (<method>.ckpt); optional
    output: runs/unlearn_horror.json      # the report; optional

The data are rebuilt from the checkpoint's stored config (``data:`` overrides single keys) and must have the
checkpoint's data fingerprint. Progress bars follow every fine-tuning method (stderr) and the retrain
reference (Lightning's bar, as in ``recframe fit``); ``--no-progress`` turns them off.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
import yaml

from recframe.checkpoint_io import CheckpointError, atomic_write, best_checkpoint
from recframe.data.interactions import DataError
from recframe.yaml_config import check_value, in_file, read_yaml_config

__all__ = ["TOP_KEYS", "load_config", "main", "training_config"]

TOP_KEYS = {
    "checkpoint": str,
    "concept": str,
    "data": dict,
    "methods": dict,
    "eval_batch_size": int,
    "choose_on_validation": bool,
    "save_dir": str,
    "output": str,
}
EXAMPLE = "configs/unlearn_ml100k_horror.yaml"


def load_config(source: str | Path | dict[str, Any]) -> dict[str, Any]:
    """Read and validate an unlearning config (a YAML path or a parsed dict); the concept is parsed.

    Every method's settings are checked here (:func:`recframe.unlearning.settings.parse_methods`), so a bad
    setting of any method is refused before the first one runs; ``methods`` holds the checked settings.

    Raises:
        DataError: one line naming the file (for a path) and the key.
    """
    if isinstance(source, dict):
        return _validate(dict(source))
    raw = read_yaml_config(source, "an unlearning", EXAMPLE)
    with in_file(source):
        return _validate(raw)


def _validate(raw: dict[str, Any]) -> dict[str, Any]:
    from recframe.unlearning.concepts import parse_concept
    from recframe.unlearning.settings import parse_methods

    for key, value in raw.items():
        if key not in TOP_KEYS:
            raise DataError(f"{key}: unknown key; valid keys: {sorted(TOP_KEYS)}")
        if value is not None:
            raw[key] = check_value(value, TOP_KEYS[key], str(key))
    for key in ("checkpoint", "concept"):
        if not raw.get(key):
            raise DataError(
                f"{key}: missing; the config needs checkpoint (a trained generative model's "
                'checkpoint) and concept (e.g. genre == "Horror").'
            )
    batch = raw.get("eval_batch_size")
    if batch is not None and batch < 1:
        raise DataError(f"eval_batch_size: {batch}; it must be >= 1 (e.g. 256), or leave it out for 256.")
    raw["concept"] = parse_concept(raw["concept"])
    methods = parse_methods(raw.get("methods") or {"suppression": {}, "tracer": {}})
    raw["methods"] = {name: dict(m.given) for name, m in methods.items()}
    return raw


def _run_folder(config: Any) -> Path | None:
    """The run folder a ``recframe fit`` config's logger writes (``save_dir/name``), if it names one."""
    trainer = config.get("trainer") if isinstance(config, dict) else None
    logger = trainer.get("logger") if isinstance(trainer, dict) else None
    args = logger.get("init_args") if isinstance(logger, dict) else None
    if not isinstance(args, dict) or not isinstance(args.get("name"), str):
        return None
    return Path(str(args.get("save_dir") or ".")) / args["name"]


def training_config(checkpoint: str | Path, roots: Iterable[str | Path]) -> Path | None:
    """The ``recframe fit`` config (a YAML file under one of ``roots``) whose logger writes the run folder
    that ``checkpoint`` names or lies in; ``None`` when no config does."""
    target = Path(checkpoint).resolve()
    for root in dict.fromkeys(Path(r).resolve() for r in roots):
        for path in sorted(root.rglob("*.yaml")) if root.is_dir() else []:
            try:
                run = _run_folder(yaml.safe_load(path.read_text(encoding="utf-8")))
            except (yaml.YAMLError, OSError, UnicodeDecodeError):
                continue
            if run is not None and (target == run.resolve() or run.resolve() in target.parents):
                return path
    return None


def _checkpoint_hint(checkpoint: str, config: str | Path) -> str:
    """How to get the checkpoint: the config that trains it (searched next to ``config`` and in
    ``configs/``)."""
    trainer = training_config(checkpoint, [Path(config).parent, Path("configs")])
    if trainer is None:
        return ("train the generative model first (recframe fit --config <its config>) and name its run "
                "folder or a checkpoint file under checkpoint:.")
    try:
        shown = trainer.relative_to(Path.cwd())
    except ValueError:
        shown = trainer
    return f"it is trained by {shown}: run recframe fit --config {shown} first."


def _load_checkpoint(checkpoint: str, config: str | Path) -> tuple[Any, dict[str, Any]]:
    """The model and checkpoint dict; a missing checkpoint names the config that trains it."""
    from recframe.unlearning.pipeline import load_generative

    path = Path(checkpoint)
    if not path.exists():
        raise CheckpointError(f"{config}: checkpoint: {checkpoint} does not exist; "
                              f"{_checkpoint_hint(checkpoint, config)}")
    if path.is_dir():
        try:
            path = best_checkpoint(path)
        except CheckpointError as exc:
            hint = _checkpoint_hint(checkpoint, config)
            raise CheckpointError(f"{config}: checkpoint: {exc} ({hint})") from None
    return load_generative(path)


def main(argv: list[str] | None = None) -> int:
    """``recframe unlearn --config FILE [--output JSON] [--save_dir DIR] [--no-progress]``."""
    from recframe.unlearning.pipeline import data_settings, report_table, run_unlearning

    parser = argparse.ArgumentParser(prog="recframe unlearn", description=__doc__.splitlines()[0])
    parser.add_argument("--config", "-c", required=True, help="unlearning YAML config")
    parser.add_argument("--output", help="report JSON (overrides the config's output)")
    parser.add_argument("--save_dir", help="where unlearned checkpoints go (overrides the config)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                        help="progress bars on stderr while the reference retrains and each method "
                        "fine-tunes (default: on)")
    ns = parser.parse_args(argv)
    if ns.threads:
        torch.set_num_threads(ns.threads)
    cfg = load_config(ns.config)
    model, ckpt = _load_checkpoint(cfg["checkpoint"], ns.config)
    data = data_settings(ckpt, cfg.get("data"))
    save_dir = ns.save_dir or cfg.get("save_dir")
    if save_dir:
        Path(save_dir).mkdir(parents=True, exist_ok=True)
    stored = (ckpt.get("recframe") or {}).get("data_fingerprint")
    report = run_unlearning(
        model,
        ckpt,
        data,
        cfg["concept"],
        cfg["methods"],
        save_dir=save_dir,
        eval_batch_size=cfg.get("eval_batch_size") or 256,
        expect_fingerprint=stored,
        stages=("valid", "test") if cfg.get("choose_on_validation") else ("test",),
        progress=ns.progress,
    )
    report["checkpoint"] = cfg["checkpoint"]
    report["data_fingerprint"] = stored
    if cfg.get("choose_on_validation"):
        from recframe.unlearning.selection import choose_settings

        report["choice"] = choose_settings(report["rows_by_stage"]["valid"])
        print(f"\nConcept unlearning, {report['concept']!r}, validation (settings are chosen here):\n")
        print(report_table({"rows": report["rows_by_stage"]["valid"]}))
        for family, choice in report["choice"].items():
            note = "" if choice["eligible"] else " (none reached the forgetting target: the lowest exposure)"
            print(f"{family}: chose {choice['chosen']}{note}")
    print(f"\nConcept unlearning, {report['concept']!r} (test users; exact full ranking):\n")
    print(report_table(report))
    output = ns.output or cfg.get("output")
    if output:
        atomic_write(output, lambda fh: fh.write(json.dumps(report, indent=2, default=str).encode()))
        print(f"wrote {output}")
    return 0
