"""Choosing each unlearning method's settings on validation data.

The unlearning methods have knobs (the fine-tuning learning rate, suppression's threshold) that trade
forgetting against retained utility. A fair comparison tunes every method the same way, on the validation
split, and reports the chosen setting's test numbers. :func:`expand_grid` turns a config's ``methods`` into
``NAME@LABEL`` variants (:func:`recframe.unlearning.pipeline.method_kind`), one per grid value;
:func:`choose_settings` picks one variant per method from the validation rows of
:func:`~recframe.unlearning.pipeline.run_unlearning` (run with ``stages=("valid", "test")``; its
``rows_by_stage["valid"]``).

The rule (fixed before any run, the same for every method):

1. **Forget first.** A variant is eligible when its validation concept exposure@10 is at most
   ``target = max(exposure(retrain), floor * exposure(original))``: as low as the model retrained without the
   concept, or a tenth (``floor = 0.1``) of the original's when the retrained model shows less than that.
   Unlearning that leaves the concept in the lists is not a candidate, whatever its utility.
2. **Then keep utility.** Among eligible variants, the highest validation retain NDCG@10 wins.
3. If no variant is eligible, the one with the lowest exposure (the strongest forgetting on offer) wins,
   and the choice is flagged ``eligible: False``.

The retrain reference and ``original`` are never tuned. Every method gets the same number of settings to
choose from (a method with more settings has more chances to fit the validation split): :func:`grid_sizes`
counts them, and the benchmarks refuse a grid whose families differ in size.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from recframe.unlearning.pipeline import method_kind

__all__ = ["EXPOSURE_FLOOR", "choose_settings", "expand_grid", "grid_sizes", "variant_label"]

#: the share of the original's validation exposure that counts as forgotten when the retrained model's
#: exposure is lower still
EXPOSURE_FLOOR = 0.1


def variant_label(settings: dict[str, Any]) -> str:
    """``key=value`` pairs joined by ``,`` (``lr=0.0001``): the ``LABEL`` of a grid variant."""
    return ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in settings.items())


def expand_grid(
    methods: dict[str, dict[str, Any]], grid: dict[str, Iterable[dict[str, Any]]]
) -> dict[str, dict[str, Any]]:
    """``methods`` with every method named in ``grid`` replaced by one ``NAME@LABEL`` variant per grid point.

    A grid point's settings override the method's own; ``grid`` keys may themselves be variants
    (``tracer@no_reassign``), whose base settings are the method's (``tracer``) plus the key's ones in
    ``methods`` when present. Methods absent from ``grid`` are kept as they are; grid entries whose method is
    absent from ``methods`` are skipped.
    """
    out: dict[str, dict[str, Any]] = {}
    for name, settings in methods.items():
        if name not in grid:
            out[name] = dict(settings or {})
    for name, points in grid.items():
        kind = method_kind(name)
        if kind not in methods:
            continue
        base = {**(methods.get(kind) or {}), **(methods.get(name) or {})}
        for point in points:
            out[f"{name}@{variant_label(point)}"] = {**base, **point}
    return out


def _family(name: str) -> str:
    """The grid a variant belongs to: the name up to its last ``@`` (``tracer@no_reassign@lr=1e-4`` ->
    ``tracer@no_reassign``)."""
    return name.rsplit("@", 1)[0] if "@" in name else name


def grid_sizes(valid_rows: dict[str, Any]) -> dict[str, int]:
    """Settings per grid family in a validation table (``original`` and ``retrain`` are not tuned)."""
    sizes: dict[str, int] = {}
    for name in valid_rows:
        if name not in ("original", "retrain"):
            sizes[_family(name)] = sizes.get(_family(name), 0) + 1
    return sizes


def choose_settings(valid_rows: dict[str, dict[str, float]]) -> dict[str, dict[str, Any]]:
    """One variant per grid family from validation rows (module docstring's rule).

    ``valid_rows`` must hold ``original`` and may hold ``retrain``; every other row is a variant. Returns
    ``{family: {"chosen": name, "eligible": bool, "target_exposure": float}}``.
    """
    if "original" not in valid_rows:
        raise ValueError("choose_settings needs the original model's validation row")
    exposure_original = valid_rows["original"]["exposure@10"]
    exposure_retrain = valid_rows.get("retrain", {}).get("exposure@10", 0.0)
    target = max(exposure_retrain, EXPOSURE_FLOOR * exposure_original)
    families: dict[str, list[str]] = {}
    for name in valid_rows:
        if name in ("original", "retrain"):
            continue
        families.setdefault(_family(name), []).append(name)
    out: dict[str, dict[str, Any]] = {}
    for family, names in families.items():
        eligible = [n for n in names if valid_rows[n]["exposure@10"] <= target]
        if eligible:
            chosen = max(eligible, key=lambda n: (valid_rows[n]["retain_ndcg@10"], -names.index(n)))
        else:
            row = valid_rows
            chosen = min(names, key=lambda n: (row[n]["exposure@10"], -row[n]["retain_ndcg@10"]))
        out[family] = {"chosen": chosen, "eligible": bool(eligible), "target_exposure": target}
    return out
