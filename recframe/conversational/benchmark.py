"""The TRACE-style benchmark run: every baseline on generated (or released) dialogues, every metric by
family, paired t-tests and bootstrap intervals between baselines, and the Grounding Score's agreement with
planted citation correctness.

Protocol. For each generator seed a fresh benchmark is planted (different POIs, reviews and dialogues);
each baseline is fitted on its public catalogue and answers every evaluation point. A metric's table value
is its mean over all dialogues of all seeds (per-dialogue means first, see
:mod:`recframe.conversational.metrics`), with the range of the per-seed means. Tests pair dialogues: for
each metric, the best baseline against each other one, a paired t-test (``scipy.stats.ttest_rel``) and a
95 % paired bootstrap interval of the difference; an interval covering 0 is reported as "no significant
difference". No baseline setting is tuned: all are the documented defaults.

Rejection phrasings. Generated benchmarks are run once per ``rejection_phrasings`` setting (default: both):
``seen``, the generator's rejection templates that the rejection-aware re-ranker's complaint cues were
written against, and ``held_out`` (:mod:`recframe.conversational.phrasings`), worded apart from them. A
seed gives the same POIs, reviews, dialogues and targets under both, so each system's per-dialogue change
from ``seen`` to ``held_out`` is a paired difference too (:mod:`recframe.conversational.compare`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recframe.conversational.baselines import build_system
from recframe.conversational.baselines.rejection import RejectionAwareSystem
from recframe.conversational.compare import compare_phrasings, render_comparison
from recframe.conversational.evaluate import (
    all_metric_names,
    evaluation_points,
    per_dialogue,
    planted_correctness,
    probe_study,
    run_system,
)
from recframe.conversational.generator import GeneratorConfig, GroundTruth, generate
from recframe.conversational.loader import load_release
from recframe.conversational.metrics import DEFAULT_CAP, DEFAULT_KS, LOWER_IS_BETTER, metric_names
from recframe.conversational.phrasings import PHRASINGS
from recframe.conversational.schema import Release
from recframe.conversational.stats import paired_bootstrap, paired_ttest, spearman
from recframe.conversational.view import Catalog

__all__ = ["BenchmarkConfig", "run_benchmark", "render_markdown", "paired_verdict", "DEFAULT_BASELINES"]

logger = logging.getLogger("recframe.conversational")

DEFAULT_BASELINES: tuple[dict[str, Any], ...] = (
    {"name": "popularity"},
    {"name": "bm25"},
    {"name": "dense"},
    {"name": "synthesis"},
    {"name": "rejection_aware", "base": "dense"},
    {"name": "rejection_aware", "base": "bm25"},
)
USES_ENCODER = {"dense", "synthesis"}


@dataclass
class BenchmarkConfig:
    """What ``recframe conversational evaluate`` runs (YAML keys: :mod:`recframe.conversational.cli`)."""

    release: str | None = None
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    seeds: tuple[int, ...] = (0,)
    baselines: tuple[dict[str, Any], ...] = DEFAULT_BASELINES
    ks: tuple[int, ...] = DEFAULT_KS
    cap: int = DEFAULT_CAP
    encoder: str = "all-MiniLM-L6-v2"
    cache_dir: str | None = None
    bootstrap_samples: int = 5000
    rejection_phrasings: tuple[str, ...] = PHRASINGS
    progress: bool = True


def _settings(spec: dict[str, Any], cfg: BenchmarkConfig) -> dict[str, Any]:
    settings = {k: v for k, v in spec.items() if k != "name"}
    uses = spec["name"] in USES_ENCODER or (
        spec["name"] == "rejection_aware" and settings.get("base", "dense") == "dense"
    )
    if uses:
        settings.setdefault("encoder", cfg.encoder)
        settings.setdefault("cache_dir", cfg.cache_dir)
    return settings


def _benchmarks(cfg: BenchmarkConfig, phrasing: str) -> list[tuple[str, Release, GroundTruth | None]]:
    if cfg.release is not None:
        return [("release", load_release(cfg.release), None)]
    out = []
    for seed in cfg.seeds:
        release, truth = generate(cfg.generator, seed=seed, rejection_phrasings=phrasing)
        out.append((f"seed {seed}", release, truth))
    return out


def _settings_to_run(cfg: BenchmarkConfig) -> list[str]:
    """``["release"]`` for a loaded release (its own wording), else the configured phrasings."""
    return ["release"] if cfg.release is not None else list(cfg.rejection_phrasings)


def run_benchmark(cfg: BenchmarkConfig) -> dict[str, Any]:
    """Run every baseline on every benchmark of ``cfg``, once per rejection phrasing; returns the
    JSON-ready payload (rendered by :func:`render_markdown`): ``settings[phrasing]`` holds that setting's
    tables and tests, ``phrasing_effect`` the paired held-out − seen differences."""
    settings: dict[str, dict[str, Any]] = {}
    values: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    dialogue_ids: dict[str, list[str]] = {}
    bases: dict[str, str] = {}
    for phrasing in _settings_to_run(cfg):
        logger.info("rejection phrasings: %s", phrasing)
        settings[phrasing], values[phrasing], dialogue_ids[phrasing], found = run_setting(cfg, phrasing)
        bases.update(found)
    payload: dict[str, Any] = {
        "settings": settings,
        "built_against": "seen",
        "rejection_aware_bases": bases,
        "families": metric_names(cfg.ks),
        "systems": next(iter(settings.values()))["systems"],
        "device": _cuda() or "cpu",
        "config": {
            "release": cfg.release,
            "generator": {k: v for k, v in cfg.generator.__dict__.items() if k != "rejection_phrasings"},
            "seeds": list(cfg.seeds),
            "rejection_phrasings": _settings_to_run(cfg),
            "baselines": list(cfg.baselines),
            "ks": list(cfg.ks),
            "cap": cfg.cap,
            "encoder": cfg.encoder,
            "bootstrap_samples": cfg.bootstrap_samples,
        },
    }
    if "seen" in values and "held_out" in values:
        if dialogue_ids["seen"] != dialogue_ids["held_out"]:
            raise RuntimeError("the seen and held-out benchmarks hold different dialogues; cannot pair them.")
        payload["phrasing_effect"] = compare_phrasings(
            values["seen"], values["held_out"], cfg.ks, bases, cfg.bootstrap_samples
        )
    return payload


def _cuda() -> str | None:
    """The GPU the dense encoder runs on (sentence-transformers takes one when present), else None."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return None
    if not torch.cuda.is_available():
        return None
    return f"cuda:0 {torch.cuda.get_device_name(0)}"


def run_setting(
    cfg: BenchmarkConfig, phrasing: str
) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray]], list[str], dict[str, str]]:
    """Every baseline on every benchmark of one phrasing setting: ``(section, values, dialogue ids,
    bases)``, where ``section`` is the setting's JSON (sizes, table, tests, Grounding Score agreement,
    seconds, systems), ``values[system][metric]`` the per-dialogue values over all seeds, and
    ``bases`` maps each rejection-aware system to the name of the system it wraps."""
    names = all_metric_names(cfg.ks)
    ids: list[str] = []
    bases: dict[str, str] = {}
    pooled: dict[str, dict[str, list[np.ndarray]]] = {}
    seed_means: dict[str, dict[str, list[float]]] = {}
    seconds: dict[str, float] = {}
    probe_gs, probe_frac, probe_prec, kinds = [], [], [], []
    sys_gs: dict[str, list[float]] = {}
    sys_pc: dict[str, list[float]] = {}
    sizes = []
    for label, release, truth in _benchmarks(cfg, phrasing):
        ids += [d.dialogue_id for d in release.dialogues]
        points = evaluation_points(release)
        catalog = Catalog.from_release(release)
        sizes.append(
            {
                "benchmark": label,
                "dialogues": len(release.dialogues),
                "pois": len(release.pois),
                "reviews": len(release.reviews),
                "evaluation_points": len(points),
                "after_rejection": sum(p.context.after_rejection for p in points),
            }
        )
        logger.info("%s: %s", label, sizes[-1])
        for spec in cfg.baselines:
            system = build_system(spec["name"], **_settings(spec, cfg))
            if isinstance(system, RejectionAwareSystem):
                bases[system.name] = system.base.name
            run = run_system(
                system, release, points, catalog=catalog, ks=cfg.ks, cap=cfg.cap, progress=cfg.progress
            )
            values = per_dialogue(run.metrics, points, len(release.dialogues), names)
            for m in names:
                pooled.setdefault(run.name, {}).setdefault(m, []).append(values[m])
                seed_means.setdefault(run.name, {}).setdefault(m, []).append(float(np.nanmean(values[m])))
            seconds[run.name] = seconds.get(run.name, 0.0) + run.seconds
            if truth is not None:
                sys_gs.setdefault(run.name, []).extend(m["grounding_score"] for m in run.metrics)
                sys_pc.setdefault(run.name, []).extend(
                    planted_correctness(p, pt.context, release, truth)
                    for p, pt in zip(run.predictions, points)
                )
        if truth is not None:
            study = probe_study(release, truth, points)
            probe_gs.append(study["grounding_score"])
            probe_frac.append(study["correct_fraction"])
            probe_prec.append(study["citation_precision"])
            kinds.append(study["kind_accepted"])
    systems = list(pooled)
    values = {s: {m: np.concatenate(pooled[s][m]) for m in names} for s in systems}
    table = {
        s: {
            m: {
                "mean": float(np.nanmean(values[s][m])) if np.isfinite(values[s][m]).any() else math.nan,
                "seed_min": float(np.nanmin(seed_means[s][m])),
                "seed_max": float(np.nanmax(seed_means[s][m])),
                "dialogues": int(np.isfinite(values[s][m]).sum()),
            }
            for m in names
        }
        for s in systems
    }
    tests = []
    for family, metrics in metric_names(cfg.ks).items():
        for m in metrics:
            sign = -1.0 if m in LOWER_IS_BETTER else 1.0
            best = max(
                systems,
                key=lambda s, m=m: (
                    sign * table[s][m]["mean"] if math.isfinite(table[s][m]["mean"]) else -math.inf
                ),
            )
            for other in systems:
                if other == best:
                    continue
                t = paired_ttest(values[best][m], values[other][m])
                ci = paired_bootstrap(values[best][m], values[other][m], cfg.bootstrap_samples)
                tests.append(
                    {
                        "family": family,
                        "metric": m,
                        "best": best,
                        "other": other,
                        **t,
                        "ci95": ci,
                        "significant": bool(ci[0] > 0 or ci[1] < 0),
                    }
                )
    agreement: dict[str, Any] = {}
    if probe_gs:
        gs, frac, prec = np.concatenate(probe_gs), np.concatenate(probe_frac), np.concatenate(probe_prec)
        agreement["probes"] = {
            "grounding_score": spearman(gs, frac),
            "citation_precision": spearman(prec, frac),
        }
        agreement["kind_accepted"] = {
            k: float(np.mean([d[k] for d in kinds if k in d])) for k in sorted({k for d in kinds for k in d})
        }
        for s in systems:
            if sys_gs.get(s):
                agreement[s] = spearman(np.array(sys_gs[s]), np.array(sys_pc[s]))
                agreement[s]["planted_precision"] = (
                    float(np.nanmean(sys_pc[s])) if np.isfinite(sys_pc[s]).any() else math.nan
                )
    section = {
        "rejection_phrasings": phrasing,
        "benchmarks": sizes,
        "families": metric_names(cfg.ks),
        "table": table,
        "tests": tests,
        "grounding_agreement": agreement,
        "seconds": seconds,
        "systems": systems,
    }
    return section, values, ids, bases


def _f(x: float, digits: int = 3) -> str:
    if x is None or math.isnan(x):
        return "n/a"
    return ("inf" if x > 0 else "-inf") if math.isinf(x) else f"{x:.{digits}f}"


def _p(p: float) -> str:
    if p is None or not math.isfinite(p):
        return "n/a"
    return "<1e-300" if p == 0 else (f"{p:.2g}" if p < 0.001 else f"{p:.3f}")


def paired_verdict(significant: bool, p: float, alpha: float = 0.05) -> str:
    """The verdict of one paired test: the bootstrap interval decides (``significant``: it excludes 0).

    The t-test's ``p`` is only shown alongside; where it falls on the other side of ``alpha``, the
    verdict says so, so a table never shows "no significant difference" next to p = 0.01 unexplained.
    """
    verdict = "significant" if significant else "no significant difference"
    if p is not None and math.isfinite(p) and (p < alpha) != significant:
        side = "<" if p < alpha else "≥"
        verdict += f" (bootstrap CI decides; t-test p {side} {alpha:g} disagrees)"
    return verdict


PHRASING_TITLES = {
    "seen": "Rejection phrasings: seen (the generator's templates the rejection-aware re-ranker was built "
    "against)",
    "held_out": "Rejection phrasings: held out (worded apart from the re-ranker's cues and the seen "
    "templates)",
    "release": "The release's own dialogues",
}


def render_markdown(payload: dict[str, Any]) -> str:
    """The results: the command, the seen vs held-out comparison (when both ran), then each setting's
    tables (:func:`render_setting`). A payload without ``settings`` is one setting's section."""
    if "settings" not in payload:
        return render_setting(payload)
    lines = []
    if payload.get("command"):
        lines += [f"Command: `{payload['command']}`" + _seed_note(payload), ""]
    if "phrasing_effect" in payload:
        lines += [render_comparison(payload), ""]
    for phrasing, section in payload["settings"].items():
        lines += [f"### {PHRASING_TITLES.get(phrasing, phrasing)}", "", render_setting(section)]
    return "\n".join(lines).rstrip("\n") + "\n"


def _seed_note(payload: dict[str, Any]) -> str:
    written = payload.get("config_seeds")
    ran = payload.get("config", {}).get("seeds")
    if written is not None and ran is not None and list(written) != list(ran):
        return f" (seeds {ran} given on the command line; the config file says {written})"
    return ""


def render_setting(payload: dict[str, Any]) -> str:
    """One setting's tables (metrics by family; paired tests; Grounding Score agreement; timing)."""
    sizes = payload["benchmarks"]
    systems = payload["systems"]
    table = payload["table"]
    n_dlg = sum(s["dialogues"] for s in sizes)
    lines = [
        f"TRACE-style benchmark: {len(sizes)} benchmark(s) ({', '.join(s['benchmark'] for s in sizes)}), "
        f"{n_dlg} dialogues, {sum(s['evaluation_points'] for s in sizes)} evaluation points "
        f"({sum(s['after_rejection'] for s in sizes)} right after a rejection), "
        f"{sizes[0]['pois']} POIs and {sizes[0]['reviews']} reviews each. Values: mean over dialogues"
        + (" (range of the per-seed means)." if len(sizes) > 1 else "."),
        "",
    ]
    for family, metrics in payload["families"].items():
        lines += [
            f"**{family}**",
            "",
            "| system | " + " | ".join(metrics) + " |",
            "|---" * (len(metrics) + 1) + "|",
        ]
        for s in systems:
            cells = []
            for m in metrics:
                v = table[s][m]
                rng = f" ({_f(v['seed_min'])}–{_f(v['seed_max'])})" if len(sizes) > 1 else ""
                cells.append(_f(v["mean"]) + rng)
            lines.append(f"| {s} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "**Paired tests**: for each metric the best system against each other one, per dialogue "
        "(t-test: `scipy.stats.ttest_rel`; 95 % paired bootstrap interval of the difference best − other; "
        "lower is better for turns_to_recovery and repeat_rejected_rate). The bootstrap interval decides "
        "the verdict (significant when it excludes 0); p is the t-test's, shown alongside, and a verdict "
        "notes where the t-test at the 5 % level disagrees.",
        "",
        "| family | metric | best | other | Δ mean | 95 % CI | t | p | dialogues | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in payload["tests"]:
        verdict = paired_verdict(t["significant"], t["p"])
        lines.append(
            f"| {t['family']} | {t['metric']} | {t['best']} | {t['other']} | {_f(t['mean_diff'])} | "
            f"[{_f(t['ci95'][0])}, {_f(t['ci95'][1])}] | {_f(t['t'], 2)} | {_p(t['p'])} | {t['n']} | "
            f"{verdict} |"
        )
    agree = payload.get("grounding_agreement") or {}
    if agree:
        pr = agree["probes"]
        lines += [
            "",
            "**Grounding Score vs planted citation correctness** (Spearman over evaluation points).",
            "",
            "| citations judged | points | ρ | p | planted precision |",
            "|---|---|---|---|---|",
            f"| planted probes: Grounding Score | {pr['grounding_score']['n']} | "
            f"{_f(pr['grounding_score']['rho'])} | {_p(pr['grounding_score']['p'])} | |",
            f"| planted probes: citation precision | {pr['citation_precision']['n']} | "
            f"{_f(pr['citation_precision']['rho'])} | {_p(pr['citation_precision']['p'])} | |",
        ]
        for s in systems:
            if s in agree and agree[s]["n"] > 0:  # systems that cite
                a = agree[s]
                lines.append(
                    f"| {s}: Grounding Score | {a['n']} | {_f(a['rho'])} | {_p(a['p'])} | "
                    f"{_f(a['planted_precision'])} |"
                )
        lines += [
            "",
            "Verbatim rule on the probe kinds (fraction accepted): "
            + ", ".join(f"{k} {_f(v, 2)}" for k, v in agree["kind_accepted"].items())
            + ".",
        ]
    lines += [
        "",
        "Time per system (fit + answer, all benchmarks): "
        + ", ".join(f"{s} {payload['seconds'][s]:.1f} s" for s in systems)
        + ".",
    ]
    return "\n".join(lines) + "\n"


def default_output() -> Path:
    """``benchmarks/results`` under the working directory."""
    return Path("benchmarks") / "results"
