"""``recframe unlearn --config FILE``: concept unlearning on a trained generative model checkpoint.

The YAML config (``checkpoint`` and ``concept`` required; an unknown key or a wrong type is refused with a
message naming it)::

    checkpoint: runs/decoder_collab_ml100k   # a checkpoint file, or a run folder (its best checkpoint)
    concept: genre == "Horror"            # recframe.unlearning.concepts
    data: {}                              # optional overrides of the checkpoint's stored data settings
    methods:                              # each optional; settings below are the defaults
      retrain: {max_epochs: 20, patience: 4, check_val_every_n_epoch: 1, seed: 0}
      ga: {steps: 100, batch_size: 64, lr: 1.0e-4, retain_weight: 1.0, grad_clip: 1.0, seed: 0}
      npo: {beta: 0.1, steps: 100, ...}   # plus the ga keys
      suppression: {threshold: 0.5, penalty: -1.0e+9}
      tracer: {coherence_weight: 1.0, representation_weight: 1.0, reassign: true, steps: 100, ...}
      tracer@no_reassign: {reassign: false}  # NAME@LABEL: another setting of a method, its own row
    eval_batch_size: 256
    choose_on_validation: false           # true: score validation too and choose one setting per method
                                          # (recframe.unlearning.selection; list variants as NAME@LABEL)
    save_dir: runs/unlearn_horror         # unlearned checkpoints (<method>.ckpt); optional
    output: runs/unlearn_horror.json      # the report; optional

The data are rebuilt from the checkpoint's stored config (``data:`` overrides single keys) and must have the
checkpoint's data fingerprint.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
from pathlib import Path
from typing import Any

import torch
import yaml

from recframe.checkpoint_io import atomic_write
from recframe.data.interactions import DataError

__all__ = ["TOP_KEYS", "load_config", "main"]

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


def _method_keys() -> dict[str, list[str]]:
    from recframe.unlearning.methods import FinetuneSettings
    from recframe.unlearning.retrain import RetrainSettings
    from recframe.unlearning.suppression import SuppressTokens
    from recframe.unlearning.tracer import TracerSettings

    loop = [f.name for f in dataclasses.fields(FinetuneSettings)]
    return {
        "retrain": [f.name for f in dataclasses.fields(RetrainSettings)],
        "ga": loop,
        "npo": [*loop, "beta"],
        "suppression": [
            "threshold",
            *[p for p in inspect.signature(SuppressTokens).parameters if p != "prefixes"],
        ],
        "tracer": [*loop, *(f.name for f in dataclasses.fields(TracerSettings))],
    }


def load_config(source: str | Path | dict[str, Any]) -> dict[str, Any]:
    """Read and validate an unlearning config (a YAML path or a parsed dict); the concept is parsed."""
    from recframe.unlearning.concepts import parse_concept

    if isinstance(source, dict):
        raw = dict(source)
    else:
        path = Path(source)
        if not path.is_file():
            raise DataError(
                f"--config {path}: no such file; give an unlearning YAML config "
                "(e.g. configs/unlearn_ml100k_horror.yaml)."
            )
        raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict):
        raise DataError("the unlearning config must be a mapping with keys " + ", ".join(sorted(TOP_KEYS)))
    for key, value in raw.items():
        if key not in TOP_KEYS:
            raise DataError(f"{key}: unknown key; valid keys: {sorted(TOP_KEYS)}")
        if value is not None and not isinstance(value, TOP_KEYS[key]):
            raise DataError(f"{key}: expected {TOP_KEYS[key].__name__}, got {value!r}")
    for key in ("checkpoint", "concept"):
        if not raw.get(key):
            raise DataError(
                f"{key}: missing; the config needs checkpoint (a trained generative model's "
                'checkpoint) and concept (e.g. genre == "Horror").'
            )
    raw["concept"] = parse_concept(raw["concept"])
    methods = raw.get("methods") or {"suppression": {}, "tracer": {}}
    known = _method_keys()
    for name, settings in methods.items():
        kind = name.split("@", 1)[0]  # NAME@LABEL: a variant of NAME (recframe.unlearning.pipeline)
        if kind not in known:
            raise DataError(
                f"methods.{name}: unknown method; choose from {sorted(known)} (or NAME@LABEL for a variant)"
            )
        if settings is not None and not isinstance(settings, dict):
            raise DataError(f"methods.{name}: expected a mapping of settings, got {settings!r}")
        for key in settings or {}:
            if key not in known[kind]:
                raise DataError(f"methods.{name}.{key}: unknown setting; {kind} takes {known[kind]}")
    raw["methods"] = {k: dict(v or {}) for k, v in methods.items()}
    return raw


def main(argv: list[str] | None = None) -> int:
    """``recframe unlearn --config FILE [--output JSON] [--save_dir DIR]``."""
    from recframe.unlearning.pipeline import data_settings, load_generative, report_table, run_unlearning

    parser = argparse.ArgumentParser(prog="recframe unlearn", description=__doc__.splitlines()[0])
    parser.add_argument("--config", "-c", required=True, help="unlearning YAML config")
    parser.add_argument("--output", help="report JSON (overrides the config's output)")
    parser.add_argument("--save_dir", help="where unlearned checkpoints go (overrides the config)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ns = parser.parse_args(argv)
    if ns.threads:
        torch.set_num_threads(ns.threads)
    cfg = load_config(ns.config)
    model, ckpt = load_generative(cfg["checkpoint"])
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
        eval_batch_size=int(cfg.get("eval_batch_size") or 256),
        expect_fingerprint=stored,
        stages=("valid", "test") if cfg.get("choose_on_validation") else ("test",),
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
