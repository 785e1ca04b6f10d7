"""Metric tables for terminals and docs (markdown, so they paste into results files)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def metrics_table(rows: Mapping[str, Mapping[str, float]], columns: Sequence[str], digits: int = 4) -> str:
    """A markdown table: one row per entry of ``rows``, one column per metric key.

    Missing values print as ``-``.
    """
    head = "| run | " + " | ".join(columns) + " |"
    rule = "|---|" + "---:|" * len(columns)
    body = []
    for name, values in rows.items():
        cells = [f"{values[c]:.{digits}f}" if c in values else "-" for c in columns]
        body.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join([head, rule, *body])


def metric_columns(names: Sequence[str], ks: Sequence[int]) -> list[str]:
    """``["recall@10", "ndcg@10", "recall@20", ...]`` in K-major order."""
    return [f"{n}@{k}" for k in ks for n in names]
