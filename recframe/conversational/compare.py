"""Seen against held-out rejection phrasings: paired differences and the side-by-side tables.

Both settings of a seed hold the same dialogues (same POIs, reviews, candidates and targets; only the
wording of the rejection turns differs, see :mod:`recframe.conversational.phrasings`), so for each system
and metric the per-dialogue difference held-out − seen is paired, as is each rejection-aware re-ranker
against the system it wraps within one setting. Intervals are 95 % paired bootstrap intervals
(:func:`~recframe.conversational.stats.paired_bootstrap`); an interval excluding 0 is "significant".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from recframe.conversational.metrics import LOWER_IS_BETTER, metric_names
from recframe.conversational.stats import paired_bootstrap, paired_ttest

__all__ = ["compare_phrasings", "render_comparison", "direction"]

Values = Mapping[str, Mapping[str, np.ndarray]]


def _test(a: np.ndarray, b: np.ndarray, samples: int) -> dict[str, Any]:
    ci = paired_bootstrap(a, b, samples)
    return {**paired_ttest(a, b), "ci95": ci, "significant": bool(ci[0] > 0 or ci[1] < 0)}


def _mean(x: np.ndarray) -> float:
    return float(np.nanmean(x)) if np.isfinite(x).any() else math.nan


def _identical(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.array_equal(a, b, equal_nan=True))


def compare_phrasings(
    seen: Values, held_out: Values, ks: Sequence[int], bases: Mapping[str, str], samples: int
) -> dict[str, list[dict[str, Any]]]:
    """Paired comparisons between the two phrasing settings.

    ``seen[system][metric]`` and ``held_out[system][metric]``: per-dialogue values over the same dialogues
    in the same order; ``bases``: rejection-aware system -> the system it wraps. Returns ``{"changes":
    [...], "reranker_vs_base": [...]}``: each system's held-out − seen difference per metric (``identical``
    when every dialogue's value is unchanged), and each re-ranker − its base within each setting.
    """
    changes, versus = [], []
    for family, metrics in metric_names(ks).items():
        for system in seen:
            for m in metrics:
                a, b = np.asarray(held_out[system][m]), np.asarray(seen[system][m])
                changes.append(
                    {
                        "system": system,
                        "family": family,
                        "metric": m,
                        "seen": _mean(b),
                        "held_out": _mean(a),
                        "identical": _identical(a, b),
                        **_test(a, b, samples),
                    }
                )
        for system, base in bases.items():
            if system not in seen or base not in seen:
                continue
            for m in metrics:
                row: dict[str, Any] = {"system": system, "base": base, "family": family, "metric": m}
                for name, values in (("seen", seen), ("held_out", held_out)):
                    row[name] = _test(np.asarray(values[system][m]), np.asarray(values[base][m]), samples)
                versus.append(row)
    return {"changes": changes, "reranker_vs_base": versus}


def direction(metric: str, ci: Sequence[float], first: str, second: str) -> str:
    """The verdict of a difference ``first − second`` of ``metric`` from its 95 % interval ``ci``:
    which side is better (lower is better for :data:`LOWER_IS_BETTER`), or no significant difference."""
    low, high = ci
    if not (math.isfinite(low) and math.isfinite(high)) or (low <= 0 <= high):
        return "no significant difference"
    higher = low > 0
    better = higher != (metric in LOWER_IS_BETTER)
    return f"{first} better" if better else f"{second} better"


def _f(x: float) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.3f}"


def _ci(t: Mapping[str, Any]) -> str:
    return f"{_f(t['mean_diff'])} [{_f(t['ci95'][0])}, {_f(t['ci95'][1])}]"


def render_comparison(payload: Mapping[str, Any]) -> str:
    """Markdown: the two settings side by side, each re-ranker against its base in both, and each system's
    held-out − seen change (rows identical on every dialogue listed, not tabled)."""
    seen, held = payload["settings"]["seen"]["table"], payload["settings"]["held_out"]["table"]
    effect = payload["phrasing_effect"]
    lines = [
        "**Seen against held-out rejection phrasings.** The baselines (the rejection-aware re-ranker's "
        "complaint cues in particular) were built against the `seen` phrasings, the generator's own "
        "rejection templates. The `held_out` phrasings (`recframe.conversational.phrasings`) were written "
        "separately and share no word with those cues or templates other than the value phrase and stop "
        "words. Each seed gives the same POIs, reviews, dialogues and targets under both; only the wording "
        "of the rejection turns differs, so every difference below is paired per dialogue.",
        "",
        "Each cell: seen / held-out (mean over dialogues).",
        "",
    ]
    for family, metrics in payload["families"].items():
        header = "| system | " + " | ".join(metrics) + " |"
        lines += [f"**{family}**", "", header, "|---" * (len(metrics) + 1) + "|"]
        for s in payload["systems"]:
            cells = [f"{_f(seen[s][m]['mean'])} / {_f(held[s][m]['mean'])}" for m in metrics]
            lines.append(f"| {s} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        "**Each rejection-aware re-ranker against the system it wraps**, per setting: Δ = re-ranker − base "
        "with its 95 % paired bootstrap interval (lower is better for turns_to_recovery and "
        "repeat_rejected_rate).",
        "",
        "| re-ranker | base | metric | seen: Δ [95 % CI] | seen verdict | held-out: Δ [95 % CI] | "
        "held-out verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in effect["reranker_vs_base"]:
        verdicts = [direction(r["metric"], r[k]["ci95"], "re-ranker", "base") for k in ("seen", "held_out")]
        lines.append(
            f"| {r['system']} | {r['base']} | {r['metric']} | {_ci(r['seen'])} | {verdicts[0]} | "
            f"{_ci(r['held_out'])} | {verdicts[1]} |"
        )
    same = [c for c in effect["changes"] if c["identical"]]
    lines += [
        "",
        "**What the held-out wording changes**, per system: Δ = held-out − seen over the same dialogues, "
        "with its 95 % paired bootstrap interval.",
        "",
        "| system | metric | seen | held-out | Δ [95 % CI] | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for c in effect["changes"]:
        if not c["identical"]:
            verdict = direction(c["metric"], c["ci95"], "held-out", "seen")
            lines.append(
                f"| {c['system']} | {c['metric']} | {_f(c['seen'])} | {_f(c['held_out'])} | {_ci(c)} | "
                f"{verdict} |"
            )
    if same:
        by_system: dict[str, list[str]] = {}
        for c in same:
            by_system.setdefault(c["system"], []).append(c["metric"])
        lines += [
            "",
            "Identical on every dialogue under both phrasings: "
            + "; ".join(f"{s} ({', '.join(ms)})" for s, ms in by_system.items())
            + ".",
        ]
    return "\n".join(lines)
