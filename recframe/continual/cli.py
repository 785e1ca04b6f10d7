"""``recframe continual --config FILE``: run continual learners through the stage protocol and report them.

The YAML config (every key optional except ``data.dataset``). Malformed YAML, an unknown key, a wrong type
(``hidden: sixteen``) or a value out of range (``replay: {capacity: -5}``) is refused in one line naming
the file and the key, before the data load and any training::

    seeds: [0, 1, 2]
    data: {dataset: ml-100k, root: datasets, n_stages: 5, validation_share: 0.3}
    backbone: {hidden: 64, n_layers: 2, ..., base_epochs: 20, stage_epochs: 5}   # BackboneSettings fields
    methods:                                  # name -> settings (constructor keywords of the learner)
      fine-tune: {}
      replay: {capacity: 2000}
    output: runs/continual.json

``data.dataset`` is anything :func:`recframe.data.datamodule.load_source` reads (a catalogued name, a file,
``synthetic`` with ``data.synthetic`` keywords) or ``continual-shift`` (:mod:`recframe.continual.synthetic`,
keywords in ``data.synthetic``). Exact duplicate rows are dropped and signed labels derived as in
:class:`~recframe.data.RecDataModule`.

**Validation users.** A seeded share ``validation_share`` of the users is the *validation* population: their
stage tests choose settings (``benchmarks/continual_ml100k.py`` does), the other users are the reported
*test* population. Both are evaluated in the same pass and every user's rows train every model alike; no
user's metrics are ever used both to choose and to report.

When ``vamirec`` runs, its backbone is the fine-tune learner's (same seed, same batches), so its
``fine-tune`` row is reported and a separate ``fine-tune`` run is skipped. A progress bar per stage is shown
on stderr when it is a terminal (``--progress`` / ``--no-progress`` decide otherwise).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import typing
from pathlib import Path
from typing import Any

import numpy as np

from recframe.checkpoint_io import atomic_write
from recframe.continual.baselines import (
    EWC,
    BackboneSettings,
    ContinualLearner,
    Distillation,
    FineTune,
    FullRetrain,
    Replay,
)
from recframe.continual.protocol import ProtocolResult, run_protocol
from recframe.continual.stages import StagedInteractions, split_stages
from recframe.continual.vamirec import VAMIRec
from recframe.data.interactions import DataError
from recframe.yaml_config import build_settings, check_value, in_file, read_yaml_config

__all__ = ["METHODS", "ContinualConfig", "build_data", "load_config", "main", "run_comparison",
           "validation_users"]

METHODS: dict[str, type[ContinualLearner]] = {
    "fine-tune": FineTune, "full-retrain": FullRetrain, "replay": Replay, "distillation": Distillation,
    "ewc": EWC, "vamirec": VAMIRec,
}
DATA_KEYS = {"dataset": str, "root": str, "n_stages": int, "validation_share": float, "synthetic": dict,
             "columns": dict, "like_threshold": float, "dislike_threshold": float}
TOP_KEYS = {"seeds": list, "data": dict, "backbone": dict, "methods": dict, "output": str}


@dataclasses.dataclass
class ContinualConfig:
    """A validated continual config (see the module docstring)."""

    data: dict[str, Any]
    backbone: BackboneSettings
    methods: dict[str, dict[str, Any]]
    seeds: list[int]
    output: str | None = None


def _check_keys(section: dict[str, Any], allowed: dict[str, type], where: str) -> dict[str, Any]:
    """``section`` with every key known and every value of its type (``None`` kept)."""
    out: dict[str, Any] = {}
    for key, value in section.items():
        if key not in allowed:
            raise DataError(f"{where}{key}: unknown key; valid keys here: {sorted(allowed)}")
        out[key] = None if value is None else check_value(value, allowed[key], f"{where}{key}")
    return out


def load_config(source: str | Path | dict[str, Any]) -> ContinualConfig:
    """Read and validate a config (a YAML path or an already-parsed dict).

    Raises:
        DataError: one line naming the file (for a path) and the key.
    """
    if isinstance(source, dict):
        return _validate(source)
    raw = read_yaml_config(source, "a continual", "configs/continual_ml100k.yaml")
    with in_file(source):
        return _validate(raw)


def _validate(raw: dict[str, Any]) -> ContinualConfig:
    raw = _check_keys(raw, TOP_KEYS, "")
    data = _check_keys(dict(raw.get("data") or {}), DATA_KEYS, "data.")
    data = {k: v for k, v in data.items() if v is not None}
    if "dataset" not in data:
        raise DataError("data.dataset: missing; name the data (e.g. ml-100k, continual-shift or a file).")
    share = data.get("validation_share", 0.3)
    if not 0 <= share < 1:
        raise DataError(f"data.validation_share: {share}; it must be in [0, 1).")
    n_stages = data.get("n_stages", 5)
    if n_stages < 2:
        raise DataError(f"data.n_stages: {n_stages}; continual learning needs a whole number of stages >= 2.")
    settings = build_settings(BackboneSettings, raw.get("backbone"), "backbone.")
    methods = raw.get("methods") or {"fine-tune": {}}
    for name, kwargs in methods.items():
        if name not in METHODS:
            raise DataError(f"methods.{name}: unknown method; choose from {sorted(METHODS)}")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise DataError(f"methods.{name}: expected a mapping of settings, got {kwargs!r}")
        methods[name] = _check_method_kwargs(name, kwargs or {}, settings)
    seeds = raw.get("seeds", [0])
    if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise DataError(f"seeds: expected a non-empty list of whole numbers, got {seeds!r}")
    return ContinualConfig(data=data, backbone=settings, methods=dict(methods),
                           seeds=list(seeds), output=raw.get("output"))


def _check_method_kwargs(name: str, kwargs: dict[str, Any], settings: BackboneSettings) -> dict[str, Any]:
    """``kwargs`` of learner ``name``: known keywords of its constructor, of the annotated types, in the
    learner's ranges (:meth:`~recframe.continual.baselines.ContinualLearner.check_options`)."""
    cls = METHODS[name]
    hints = typing.get_type_hints(cls.__init__)
    allowed = [p for p in hints if p not in ("self", "data", "settings", "seed", "progress", "return")]
    checked: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key not in allowed:
            raise DataError(f"methods.{name}.{key}: unknown setting; {name} takes {allowed}")
        checked[key] = check_value(value, hints[key], f"methods.{name}.{key}")
    try:
        cls.check_options(settings, **checked)
    except ValueError as exc:
        raise DataError(f"methods.{name}.{exc}") from None
    return checked


def build_data(data: dict[str, Any]) -> StagedInteractions:
    """The staged interactions a config's ``data`` section names."""
    from recframe.data.datamodule import load_source
    from recframe.data.filters import drop_exact_duplicates, signed_labels

    n_stages = int(data.get("n_stages", 5))
    if data["dataset"] == "continual-shift":
        from recframe.continual.synthetic import make_shift_data

        kwargs = {"n_stages": n_stages, **(data.get("synthetic") or {})}
        try:
            inter = make_shift_data(**kwargs).interactions
        except (TypeError, ValueError) as exc:
            problem = " ".join(str(exc).split())
            raise DataError(f"data.synthetic: {problem} (continual-shift keywords: n_users, n_items, "
                            "n_clusters, per_stage, shift_rate, noise_rate, seed).") from None
    else:
        inter = load_source(data["dataset"], data.get("root", "datasets"), data.get("columns"),
                            data.get("synthetic"))
    inter = drop_exact_duplicates(inter)
    inter = signed_labels(inter, like_threshold=float(data.get("like_threshold", 4.0)),
                          dislike_threshold=float(data.get("dislike_threshold", 2.0)))
    return split_stages(inter, n_stages)


def validation_users(n_users: int, share: float, seed: int = 0) -> np.ndarray:
    """Boolean ``[n_users + 1]``: the seeded validation population (index 0, padding, is False)."""
    rng = np.random.default_rng(10_007 + seed)
    mask = np.zeros(n_users + 1, dtype=bool)
    mask[1:] = rng.random(n_users) < share
    return mask


def _population_summary(result: ProtocolResult, keep: np.ndarray) -> dict[str, dict[str, Any]]:
    """Means over stages, per-stage values and BWT of one user population (``keep`` per dense user)."""
    out: dict[str, dict[str, Any]] = {}
    for name, evals in result.stages.items():
        row: dict[str, Any] = {}
        for metric in evals[0].per_user:
            per_stage = [float(e.per_user[metric][keep[e.users]].mean()) for e in evals]
            row[metric] = float(np.mean(per_stage))
            row[f"{metric} per stage"] = per_stage
            back = result.backward.get(name, [])
            if back:
                row[f"bwt {metric}"] = float(np.mean(
                    [b.per_user[metric][keep[b.users]].mean() - e.per_user[metric][keep[e.users]].mean()
                     for b, e in zip(back, evals)]))
        row["users per stage"] = [int(keep[e.users].sum()) for e in evals]
        out[name] = row
    return out


def run_comparison(data: StagedInteractions, settings: BackboneSettings, methods: dict[str, dict[str, Any]],
                   seeds: list[int], validation_share: float = 0.3, progress: bool = False,
                   per_user: bool = False) -> dict[str, Any]:
    """Every method under every seed; summaries for the validation and the test users.

    Returns ``{"runs": {seed: {row: {"valid": ..., "test": ...}}}, "seconds": ...}`` and, with
    ``per_user``, per-user test NDCG@10 per stage (``{seed: {row: [[values], ...]}}``) plus the user ids.
    """
    valid = validation_users(data.inter.n_users, validation_share)
    runs: dict[str, Any] = {}
    per: dict[str, Any] = {}
    users: dict[str, Any] = {}
    seconds: dict[str, Any] = {}
    for seed in seeds:
        runs[str(seed)], per[str(seed)], seconds[str(seed)] = {}, {}, {}
        names = [m for m in methods if not (m == "fine-tune" and "vamirec" in methods)]
        for name in names:
            learner = METHODS[name](data, settings, seed=seed, progress=progress, **methods[name])
            result = run_protocol(learner)
            seconds[str(seed)][name] = round(result.seconds, 1)
            v, t = _population_summary(result, valid), _population_summary(result, ~valid)
            for row in result.stages:
                runs[str(seed)][row] = {"valid": v[row], "test": t[row]}
                if per_user:
                    evals = result.stages[row]
                    per[str(seed)][row] = [e.per_user["ndcg@10"][~valid[e.users]].tolist() for e in evals]
                    users = {"test users per stage": [e.users[~valid[e.users]].tolist() for e in evals]}
            if isinstance(learner, VAMIRec):
                runs[str(seed)][learner.name]["operations"] = learner.choices_
    out: dict[str, Any] = {"runs": runs, "seconds": seconds, "validation_share": validation_share}
    if per_user:
        out["per_user_ndcg@10"] = per
        out.update(users)
    return out


def mean_table(runs: dict[str, Any], population: str = "test",
               metrics: tuple[str, ...] = ("ndcg@10", "recall@10")) -> str:
    """Markdown: mean over stages (mean ± sd over seeds) and BWT for every row of ``runs``."""
    rows = list(next(iter(runs.values())))
    head = "| method | " + " | ".join(f"mean {m}" for m in metrics) + " | " + \
        " | ".join(f"BWT {m}" for m in metrics) + " |"
    lines = [head, "|" + "---|" * (1 + 2 * len(metrics))]
    for row in rows:
        cells = []
        for key in [*metrics, *(f"bwt {m}" for m in metrics)]:
            vals = [runs[s][row][population].get(key, float("nan")) for s in runs]
            cells.append(f"{np.mean(vals):.4f} ± {np.std(vals):.4f}")
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``recframe continual --config FILE [--output JSON] [--progress | --no-progress]``."""
    parser = argparse.ArgumentParser(prog="recframe continual", description=__doc__.splitlines()[0])
    parser.add_argument("--config", "-c", required=True, help="continual YAML config")
    parser.add_argument("--output", help="results JSON (overrides the config's output)")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="a progress bar per stage on stderr (default: when stderr is a terminal)")
    ns = parser.parse_args(argv)
    progress = sys.stderr.isatty() if ns.progress is None else ns.progress
    cfg = load_config(ns.config)
    with in_file(ns.config):  # a data.synthetic keyword the generator refuses names the file too
        data = build_data(cfg.data)
    result = run_comparison(data, cfg.backbone, cfg.methods, cfg.seeds,
                            float(cfg.data.get("validation_share", 0.3)), progress=progress)
    result["config"] = {"data": cfg.data, "backbone": dataclasses.asdict(cfg.backbone),
                        "methods": cfg.methods, "seeds": cfg.seeds}
    result["data_fingerprint"] = data.inter.fingerprint
    table = mean_table(result["runs"])
    print(f"Continual, {data.n_stages} stages, {len(cfg.seeds)} seed(s), test users, mean over stages:\n")
    print(table)
    output = ns.output or cfg.output
    if output:
        atomic_write(output, lambda fh: fh.write(json.dumps(result, indent=2).encode()))
        print(f"wrote {output}")
    return 0
