"""Which device a benchmark run trained on, and the rule that a paired comparison stays on one device.

A GPU and a CPU round floats differently, so the same seed can early-stop at another epoch and end with
other numbers on each. A paired comparison whose two arms (or whose seeds within one arm) trained on
different devices mixes that difference into the effect it reports. Every multi-seed benchmark therefore
asks :func:`refusal` before it computes a paired interval, and records a refusal instead of a number when
the arms cross devices; :func:`cross_device_comparisons` re-checks every stored result
(``tests/benchmarks/test_devices.py`` runs it over ``benchmarks/results``).

A run's device is its ``device`` entry (``cpu`` or ``cuda:0 <name>``, recorded since issue 18), else the
GPU its ``machine`` entry names (runs on a lent GPU wrote the machine in words), else the CPU.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS

_GPU_NAME = re.compile(r"NVIDIA\s+[A-Za-z0-9-]+")


def run_device(run: Mapping[str, Any]) -> str:
    """``"cpu"`` or the GPU's name (``"NVIDIA H200"``) a stored run trained on."""
    for text in (str(run.get("device") or ""), str(run.get("machine") or "")):
        if any(tag in text for tag in ("cuda", "GPU", "NVIDIA")):
            found = _GPU_NAME.search(text)
            return found.group(0) if found else "GPU"
    return "cpu"


def devices(runs: Iterable[Mapping[str, Any]]) -> list[str]:
    """The sorted distinct devices of ``runs``."""
    return sorted({run_device(r) for r in runs})


def refusal(base: Iterable[Mapping[str, Any]], alt: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """``None`` when every run of both arms trained on one device; otherwise the record a benchmark
    stores instead of the paired interval (``{"refused": reason, "devices": {...}}``)."""
    base, alt = list(base), list(alt)
    used = devices([*base, *alt])
    if len(used) <= 1:
        return None
    return {"refused": (f"the arms ran on different devices (alternative: {', '.join(devices(alt))}; "
                        f"baseline: {', '.join(devices(base))}); rerun both on one device"),
            "devices": {"alternative": devices(alt), "baseline": devices(base)}}


# ------------------------------------------------------------------ the check over stored results
def _grouped(folder: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.json")):
        run = json.loads(path.read_text())
        if "row" in run:
            out.setdefault(str(run["row"]), []).append(run)
    return out


def _split(key: str, separators: tuple[str, ...]) -> tuple[str, str] | None:
    """``(alternative, baseline)`` from a comparison key like ``"ALT vs BASE"`` or ``"ALT - BASE"``."""
    for sep in separators:
        if sep in key:
            alt, base = key.split(sep, 1)
            return alt, base
    return None


def _row_pairs(results: Path, name: str, field: str, separators: tuple[str, ...]) -> Iterable[tuple]:
    path = results / f"{name}.json"
    if not path.exists():
        return
    comparisons = json.loads(path.read_text()).get(field) or {}
    runs = _grouped(results / name)
    for key, value in comparisons.items():
        if isinstance(value, Mapping) and "refused" in value:
            continue
        arms = _split(key, separators)
        if arms and arms[0] in runs and arms[1] in runs:
            yield f"{name}: {key}", runs[arms[1]], runs[arms[0]]


def _signed_pairs(results: Path) -> Iterable[tuple]:
    path = results / "ml100k_signed.json"
    if not path.exists():
        return
    runs = _grouped(results / "ml100k_signed")
    for key, value in (json.loads(path.read_text()).get("valence_margin_paired") or {}).items():
        if isinstance(value, Mapping) and "refused" in value:
            continue
        base = key.removesuffix(" + ValenceMargin")
        if key in runs and base in runs:
            yield f"ml100k_signed: {key} vs {base}", runs[base], runs[key]


def _recmem_pairs(results: Path) -> Iterable[tuple]:
    path = results / "recmem_long.json"
    if not path.exists():
        return
    folder = results / "recmem_long"
    payload = json.loads(path.read_text())
    for key in payload.get("claims") or {}:
        found = re.match(r"(\w+?)_recmem_minus_(full|truncation)@", key)
        if not found:
            continue
        data, other = found.group(1), found.group(2).capitalize()
        chosen = (payload.get("chosen") or {}).get(data, {})  # the grid point each model's claim rests on
        runs = [json.loads(p.read_text()) for p in sorted(folder.glob(f"acc_{data}_*.json"))]
        arms = [[r for r in runs
                 if r.get("model") == row and r.get("point", "base") == chosen.get(row, "base")]
                for row in (other, "RecMem")]
        if all(arms):
            yield f"recmem_long: {key}", arms[0], arms[1]


def cross_device_comparisons(results: Path = RESULTS) -> list[str]:
    """Every stored paired comparison (not refused) whose runs trained on more than one device, as
    ``"benchmark: comparison (devices)"`` lines; empty when every comparison stays on one device."""
    found: list[tuple] = [
        *_row_pairs(results, "ml100k_generative", "paired", (" vs ",)),
        *_row_pairs(results, "cold_start", "paired", (" - ",)),
        *_signed_pairs(results),
        *_recmem_pairs(results),
    ]
    for path in sorted(results.glob("amazon_*.json")):
        found.extend(_row_pairs(results, path.stem, "comparisons", (" vs ",)))
    out = []
    for label, base, alt in found:
        reason = refusal(base, alt)
        if reason is not None:
            out.append(f"{label} ({reason['refused']})")
    return out


__all__ = ["cross_device_comparisons", "devices", "refusal", "run_device"]
