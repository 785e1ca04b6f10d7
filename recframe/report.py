"""Metric tables for terminals and docs (markdown, so they paste into results files)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def metrics_table(rows: Mapping[str, Mapping[str, float]], columns: Sequence[str], digits: int = 4,
                  formats: Mapping[str, str] | None = None) -> str:
    """A markdown table: one row per entry of ``rows``, one column per metric key.

    Values print with ``digits`` decimals unless ``formats`` gives a column its
    own format spec (e.g. ``{"train s": ".0f"}``); integers print as integers and
    missing values as ``-``.
    """
    formats = dict(formats or {})

    def cell(values: Mapping[str, float], col: str) -> str:
        if col not in values:
            return "-"
        value = values[col]
        if isinstance(value, int):
            return str(value)
        return format(value, formats.get(col, f".{digits}f"))

    head = "| run | " + " | ".join(columns) + " |"
    rule = "|---|" + "---:|" * len(columns)
    body = []
    for name, values in rows.items():
        cells = [cell(values, c) for c in columns]
        body.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join([head, rule, *body])


def metric_columns(names: Sequence[str], ks: Sequence[int]) -> list[str]:
    """``["recall@10", "ndcg@10", "recall@20", ...]`` in K-major order."""
    return [f"{n}@{k}" for k in ks for n in names]
