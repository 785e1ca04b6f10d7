"""``recframe conversational``: evaluate baselines, generate a synthetic release, validate a release.

::

    recframe conversational evaluate --config configs/conversational_trace.yaml [--seeds 0 1]
    recframe conversational generate --out datasets/trace-synthetic \
        [--dialogues 1000] [--pois 2400] [--seed 0] [--rejection-phrasings seen|held_out]
    recframe conversational validate datasets/trace

Config keys of ``evaluate`` (all optional; defaults in brackets)::

    benchmark:
      release: null            # folder of a TRACE-format release; null = generate one per seed
      seeds: [0]               # generator seeds (each a fresh benchmark)
      rejection_phrasings: [seen, held_out]  # rejection wordings to run, each reported: seen (the
                               # generator's templates the baselines were built against) and held_out
                               # (recframe.conversational.phrasings); ignored with a release
      generator: {...}         # GeneratorConfig fields: n_dialogues [1000], n_pois [2400], n_cities [8],
                               # reviews_per_poi [14], n_candidates [20], n_hard_negatives [5],
                               # rejection_probs [[0.3, 0.5, 0.2]], p_corrupt [0.35], p_reencode [0.15],
                               # walk_km [1.5], radius_km [5.0]
    baselines:                 # [popularity, bm25, dense, synthesis, rejection_aware (dense), (bm25)]
      - {name: bm25, k1: 1.2, b: 0.75}   # name + the baseline's constructor arguments
    metrics: {ks: [1, 5, 10], cap: 10}
    encoder: {name: all-MiniLM-L6-v2, cache_dir: null}
    bootstrap: {samples: 5000}
    output: {dir: benchmarks/results, name: trace_benchmark}

A wrong key or value stops before any work, naming the key. ``--seeds`` overrides ``benchmark.seeds`` with
a warning, and the results name both (a committed result should come from the config as written).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from recframe.data.interactions import DataError

__all__ = ["main", "parse_config"]

TOP_KEYS = {"benchmark", "baselines", "metrics", "encoder", "bootstrap", "output"}
SECTION_KEYS = {
    "benchmark": {"release", "seeds", "generator", "rejection_phrasings"},
    "metrics": {"ks", "cap"},
    "encoder": {"name", "cache_dir"},
    "bootstrap": {"samples"},
    "output": {"dir", "name"},
}


def _fail(key: str, message: str) -> DataError:
    return DataError(f"config key '{key}': {message}")


def _pos_int(value: Any, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(key, f"must be a positive integer, got {value!r}")
    return value


def parse_config(raw: Any) -> tuple[Any, dict[str, str]]:
    """``(BenchmarkConfig, {"dir", "name"})`` from a parsed YAML mapping; DataError naming a bad key."""
    from recframe.conversational.baselines import SYSTEMS
    from recframe.conversational.benchmark import DEFAULT_BASELINES, BenchmarkConfig
    from recframe.conversational.generator import GeneratorConfig
    from recframe.conversational.phrasings import PHRASINGS

    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise _fail("<top>", f"the config must be a mapping, got {type(raw).__name__}")
    for key in raw:
        if key not in TOP_KEYS:
            raise _fail(key, f"unknown key; use {', '.join(sorted(TOP_KEYS))}")
    sec: dict[str, dict[str, Any]] = {}
    for name, allowed in SECTION_KEYS.items():
        value = raw.get(name) or {}
        if not isinstance(value, dict):
            raise _fail(name, f"must be a mapping, got {type(value).__name__}")
        for key in value:
            if key not in allowed:
                raise _fail(f"{name}.{key}", f"unknown key; use {', '.join(sorted(allowed))}")
        sec[name] = value
    bench = sec["benchmark"]
    gen_raw = bench.get("generator") or {}
    if not isinstance(gen_raw, dict):
        raise _fail("benchmark.generator", "must be a mapping of GeneratorConfig fields")
    fields = {f.name for f in dataclasses.fields(GeneratorConfig)} - {"seed", "rejection_phrasings"}
    for key in gen_raw:
        if key == "rejection_phrasings":
            raise _fail(
                "benchmark.generator.rejection_phrasings",
                "set it one level up as benchmark.rejection_phrasings, a list of seen and/or held_out",
            )
        if key not in fields:
            raise _fail(f"benchmark.generator.{key}", f"unknown key; use {', '.join(sorted(fields))}")
    if "rejection_probs" in gen_raw:
        gen_raw = {**gen_raw, "rejection_probs": tuple(gen_raw["rejection_probs"])}
    try:
        generator = GeneratorConfig(**gen_raw)
    except (TypeError, ValueError) as exc:
        raise _fail("benchmark.generator", str(exc)) from None
    seeds = bench.get("seeds", [0])
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        raise _fail("benchmark.seeds", f"must be a non-empty list of integers, got {seeds!r}")
    phrasings = bench.get("rejection_phrasings", list(PHRASINGS))
    if (
        not isinstance(phrasings, list)
        or not phrasings
        or any(p not in PHRASINGS for p in phrasings)
        or len(set(phrasings)) != len(phrasings)
    ):
        raise _fail(
            "benchmark.rejection_phrasings",
            f"must be a list of distinct settings among {', '.join(PHRASINGS)}, got {phrasings!r}",
        )
    release = bench.get("release")
    if release is not None and not Path(str(release)).is_dir():
        raise _fail(
            "benchmark.release",
            f"{release!r} is not a folder; give a TRACE-format release folder or null to generate one",
        )
    baselines = raw.get("baselines", list(DEFAULT_BASELINES))
    if not isinstance(baselines, list) or not baselines:
        raise _fail("baselines", "must be a non-empty list of baseline names or {name: ..., <settings>}")
    specs = []
    for i, b in enumerate(baselines):
        spec = {"name": b} if isinstance(b, str) else b
        if not isinstance(spec, dict) or spec.get("name") not in SYSTEMS:
            raise _fail(f"baselines[{i}]", f"needs a name, one of {', '.join(SYSTEMS)}; got {b!r}")
        specs.append(dict(spec))
    ks = sec["metrics"].get("ks", [1, 5, 10])
    if not isinstance(ks, list) or not ks:
        raise _fail("metrics.ks", f"must be a non-empty list of positive integers, got {ks!r}")
    ks = [_pos_int(k, "metrics.ks") for k in ks]
    cap = _pos_int(sec["metrics"].get("cap", 10), "metrics.cap")
    samples = _pos_int(sec["bootstrap"].get("samples", 5000), "bootstrap.samples")
    encoder = sec["encoder"].get("name", "all-MiniLM-L6-v2")
    if not isinstance(encoder, str):
        raise _fail("encoder.name", f"must be an encoder name or a model folder, got {encoder!r}")
    cfg = BenchmarkConfig(
        release=None if release is None else str(release),
        generator=generator,
        seeds=tuple(seeds),
        rejection_phrasings=tuple(phrasings),
        baselines=tuple(specs),
        ks=tuple(ks),
        cap=cap,
        encoder=encoder,
        cache_dir=sec["encoder"].get("cache_dir"),
        bootstrap_samples=samples,
    )
    out = {
        "dir": str(sec["output"].get("dir", "benchmarks/results")),
        "name": str(sec["output"].get("name", "trace_benchmark")),
    }
    return cfg, out


def _load_yaml(path: str) -> Any:
    p = Path(path)
    if not p.is_file():
        raise DataError(
            f"config file {path} does not exist; give --config FILE (e.g. configs/conversational_trace.yaml)."
        )
    try:
        return yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise DataError(f"config file {path} is not valid YAML: {exc}") from None


def write_report(out_dir: str | Path, name: str, payload: dict[str, Any], markdown: str) -> tuple[Path, Path]:
    """Write ``NAME.json`` (payload + library versions + date) and ``NAME.md`` atomically."""
    from recframe.callbacks import library_versions
    from recframe.checkpoint_io import atomic_write

    out = Path(out_dir)
    payload = {**payload, "versions": library_versions(), "date": time.strftime("%Y-%m-%d")}
    js, md = out / f"{name}.json", out / f"{name}.md"
    atomic_write(js, lambda fh: fh.write(json.dumps(payload, indent=1, default=str).encode()))
    atomic_write(md, lambda fh: fh.write(markdown.encode()))
    return js, md


def _evaluate(args: argparse.Namespace) -> int:
    from recframe.conversational.benchmark import render_markdown, run_benchmark

    cfg, out = parse_config(_load_yaml(args.config))
    cfg.progress = not args.no_progress
    config_seeds = list(cfg.seeds)
    if args.seeds and list(args.seeds) != config_seeds:
        print(
            f"recframe conversational evaluate: warning: --seeds {' '.join(map(str, args.seeds))} overrides "
            f"benchmark.seeds {config_seeds} of {args.config}; the results will name both.",
            file=sys.stderr,
        )
    if args.seeds:
        cfg.seeds = tuple(args.seeds)
    started = time.perf_counter()
    payload = run_benchmark(cfg)
    seeds = f" --seeds {' '.join(map(str, args.seeds))}" if args.seeds else ""
    payload["command"] = f"recframe conversational evaluate --config {args.config}{seeds}"
    payload["config_seeds"] = config_seeds
    payload["wall_seconds"] = time.perf_counter() - started
    markdown = render_markdown(payload)
    js, md = write_report(out["dir"], out["name"], payload, markdown)
    print(markdown)
    print(f"wrote {js} and {md}")
    return 0


def single_candidate_warning(dialogues: Sequence[Any], n_pois: int) -> str | None:
    """A warning when some dialogues have one candidate (the target), where every ranking is perfect.

    The generator draws a dialogue's candidates from the POIs of its city; with too few POIs per city a
    dialogue ends up with the target alone. ``None`` when every dialogue has at least two candidates.
    """
    from recframe.conversational.generator import GeneratorConfig

    single = sum(len(d.candidates) == 1 for d in dialogues)
    if not single:
        return None
    cfg = GeneratorConfig()
    enough = cfg.n_candidates * cfg.n_cities
    return (
        f"{single} of {len(dialogues)} dialogues have a single candidate (the target), so every ranking "
        f"metric is trivially perfect on them; --pois {n_pois} is too few for {cfg.n_cities} cities: "
        f"give --pois {enough} or more ({cfg.n_candidates} candidates per city)."
    )


def _generate(args: argparse.Namespace) -> int:
    from recframe.conversational.generator import generate
    from recframe.conversational.loader import write_release

    try:
        release, _ = generate(
            n_dialogues=args.dialogues,
            n_pois=args.pois,
            seed=args.seed,
            rejection_phrasings=args.rejection_phrasings,
        )
    except ValueError as exc:
        raise DataError(str(exc)) from None
    folder = write_release(release, args.out)
    warning = single_candidate_warning(release.dialogues, args.pois)
    if warning:
        print(f"recframe conversational generate: warning: {warning}", file=sys.stderr)
    print(
        f"wrote {len(release.dialogues)} dialogues, {len(release.pois)} POIs, {len(release.reviews)} reviews "
        f"to {folder}"
    )
    return 0


def _validate(args: argparse.Namespace) -> int:
    from recframe.conversational.validate import validate_release

    issues = validate_release(args.folder)
    buf = io.StringIO()
    for issue in issues:
        print(issue, file=buf)
    print(buf.getvalue(), end="")
    print(f"{args.folder}: {'valid' if not issues else f'{len(issues)} error(s)'}")
    return 0 if not issues else 1


def main(argv: list[str]) -> int:
    """Entry point of ``recframe conversational``."""
    from recframe.conversational.phrasings import PHRASINGS

    parser = argparse.ArgumentParser(
        prog="recframe conversational", description="TRACE-style conversational recommendation benchmark."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="run the baselines and write the results tables")
    ev.add_argument("--config", required=True, help="YAML config (see recframe.conversational.cli)")
    ev.add_argument("--no-progress", action="store_true", help="no progress bars")
    ev.add_argument("--seeds", type=int, nargs="+", help="override benchmark.seeds")
    gen = sub.add_parser("generate", help="write a synthetic release with planted ground truth")
    gen.add_argument("--out", required=True)
    gen.add_argument("--dialogues", type=int, default=1000)
    gen.add_argument("--pois", type=int, default=2400)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument(
        "--rejection-phrasings",
        choices=PHRASINGS,
        default="seen",
        help="wording of the rejection turns: seen (the templates the baselines were built against) or "
        "held_out (written apart from them)",
    )
    val = sub.add_parser("validate", help="check a release line by line")
    val.add_argument("folder")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    return {"evaluate": _evaluate, "generate": _generate, "validate": _validate}[args.command](args)
