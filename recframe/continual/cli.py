"""``recframe continual --config FILE``: run continual learners through the stage protocol and report them.

The YAML config (every key optional except ``data.dataset``; an unknown key or a wrong type is refused with
a message naming it)::

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
``fine-tune`` row is reported and a separate ``fine-tune`` run is skipped.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

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


def _type_ok(value: Any, kind: type) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _check_keys(section: dict[str, Any], allowed: dict[str, type], where: str) -> None:
    for key, value in section.items():
        if key not in allowed:
            raise DataError(f"{where}{key}: unknown key; valid keys here: {sorted(allowed)}")
        kind = allowed[key]
        if value is not None and not _type_ok(value, kind):
            raise DataError(f"{where}{key}: expected {kind.__name__}, got {value!r}")


def load_config(source: str | Path | dict[str, Any]) -> ContinualConfig:
    """Read and validate a config (a YAML path or an already-parsed dict)."""
    if isinstance(source, dict):
        raw = source
    else:
        path = Path(source)
        if not path.is_file():
            raise DataError(f"--config {path}: no such file; give a continual YAML config "
                            "(e.g. configs/continual_ml100k.yaml).")
        raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict):
        raise DataError("the continual config must be a mapping with keys " + ", ".join(sorted(TOP_KEYS)))
    _check_keys(raw, TOP_KEYS, "")
    data = dict(raw.get("data") or {})
    _check_keys(data, DATA_KEYS, "data.")
    if "dataset" not in data:
        raise DataError("data.dataset: missing; name the data (e.g. ml-100k, continual-shift or a file).")
    share = float(data.get("validation_share", 0.3))
    if not 0 <= share < 1:
        raise DataError(f"data.validation_share: {share}; it must be in [0, 1).")
    fields = {f.name: f.type for f in dataclasses.fields(BackboneSettings)}
    backbone = dict(raw.get("backbone") or {})
    for key in backbone:
        if key not in fields:
            raise DataError(f"backbone.{key}: unknown key; valid keys: {sorted(fields)}")
    try:
        settings = BackboneSettings(**backbone)
    except TypeError as err:
        raise DataError(f"backbone: {err}") from None
    methods = raw.get("methods") or {"fine-tune": {}}
    for name, kwargs in methods.items():
        if name not in METHODS:
            raise DataError(f"methods.{name}: unknown method; choose from {sorted(METHODS)}")
        if kwargs is not None and not isinstance(kwargs, dict):
            raise DataError(f"methods.{name}: expected a mapping of settings, got {kwargs!r}")
        _check_method_kwargs(name, kwargs or {})
    seeds = raw.get("seeds", [0])
    if not seeds or not all(_type_ok(s, int) for s in seeds):
        raise DataError(f"seeds: expected a non-empty list of whole numbers, got {seeds!r}")
    methods = {k: dict(v or {}) for k, v in methods.items()}
    return ContinualConfig(data=data, backbone=settings, methods=methods,
                           seeds=list(seeds), output=raw.get("output"))


def _check_method_kwargs(name: str, kwargs: dict[str, Any]) -> None:
    import inspect

    params = inspect.signature(METHODS[name].__init__).parameters
    allowed = [p for p in params if p not in ("self", "data", "settings", "seed", "progress")]
    for key in kwargs:
        if key not in allowed:
            raise DataError(f"methods.{name}.{key}: unknown setting; {name} takes {allowed}")


def build_data(data: dict[str, Any]) -> StagedInteractions:
    """The staged interactions a config's ``data`` section names."""
    from recframe.data.datamodule import load_source
    from recframe.data.filters import drop_exact_duplicates, signed_labels

    n_stages = int(data.get("n_stages", 5))
    if data["dataset"] == "continual-shift":
        from recframe.continual.synthetic import make_shift_data

        kwargs = {"n_stages": n_stages, **(data.get("synthetic") or {})}
        inter = make_shift_data(**kwargs).interactions
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
    """``recframe continual --config FILE [--output JSON] [--progress]``."""
    parser = argparse.ArgumentParser(prog="recframe continual", description=__doc__.splitlines()[0])
    parser.add_argument("--config", "-c", required=True, help="continual YAML config")
    parser.add_argument("--output", help="results JSON (overrides the config's output)")
    parser.add_argument("--progress", action="store_true", help="show a progress bar per stage")
    ns = parser.parse_args(argv)
    cfg = load_config(ns.config)
    data = build_data(cfg.data)
    result = run_comparison(data, cfg.backbone, cfg.methods, cfg.seeds,
                            float(cfg.data.get("validation_share", 0.3)), progress=ns.progress)
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
