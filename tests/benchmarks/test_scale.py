"""``python -m benchmarks.scale`` at a tiny size: every component measured; results, table, plot written."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import scale


def test_scale_benchmark_tiny(tmp_path: Path) -> None:
    out = scale.main(["--sizes", "200x3000", "--in-process", "--min-seconds", "0.01",
                      "--out", str(tmp_path), "--name", "tiny"])
    cells = out["cells"]
    assert {c["component"] for c in cells} == set(scale.COMPONENTS)
    assert all("skipped" not in c and c["seconds"] > 0 for c in cells)
    data = next(c for c in cells if c["component"] == "data" and c["size"] == "200x3000")
    assert 2_000 < data["rows"] < 4_000 and data["items_present"] <= 200
    payload = json.loads((tmp_path / "tiny.json").read_text())
    assert payload["device"] == "cpu" and payload["sizes"] == ["200x3000"] and len(payload["cells"]) == 9
    table = (tmp_path / "tiny.md").read_text()
    assert "| component | 200 items | what grows badly, and where |" in table
    assert "| evaluator, users/s |" in table
    assert (tmp_path / "tiny.png").read_bytes()[:4] == b"\x89PNG"


def test_scale_cell_in_a_fresh_process_and_skips() -> None:
    args = scale.parse(["--sizes", "200x3000", "--min-seconds", "0.01", "--max-logits-gb", "0.0001"])
    args.device = scale.pick_device(args.device)
    row = scale.run_cell("item_index", "200x3000", args)
    assert row["rate"] > 0 and row["peak_rss_mb"] > 0 and row["device"] == "cpu"
    skipped = scale.run_cell("sasrec_ce", "200x3000", args)
    assert skipped["skipped"].startswith("not feasible here")
    assert scale.format_cell(skipped) == "not feasible here"


def test_random_codes_are_a_valid_table() -> None:
    codes, sizes = scale.random_codes(5_000, seed=0)
    assert codes.shape == (5_001, 4) and (codes[0] == 0).all()
    assert len({tuple(r) for r in codes[1:].tolist()}) == 5_000  # every item has its own path
    assert sizes[:3] == (64, 64, 64) and codes[:, 3].max() == sizes[3] - 1


def test_slope_of_a_linear_cost_is_one() -> None:
    rows = [{"component": "evaluator", "items": n, "rows": 10 * n, "seconds": 2e-6 * n} for n in (100, 10**4)]
    assert abs(scale.slope(rows) - 1.0) < 1e-9


def test_a_merged_table_names_every_invocation_in_order(tmp_path: Path) -> None:
    cell = {"component": "data", "size": "200x3000", "rows": 3000, "items": 200, "seconds": 0.1,
            "peak_rss_mb": 500.0, "bytes_per_row_above_imports": 100.0}
    meta = {"device": "cpu", "device_name": "test cpu"}
    scale.write([cell], ["200x3000"], {**meta, "command": "first"}, tmp_path, "m", merge=True)
    assert "`first` on test cpu" in (tmp_path / "m.md").read_text()
    later = {**cell, "size": "300x3000", "items": 300}
    scale.write([later], ["300x3000"], {**meta, "command": "second"}, tmp_path, "m", merge=True)
    payload = json.loads((tmp_path / "m.json").read_text())
    assert payload["commands"] == ["first", "second"] and len(payload["cells"]) == 2
    assert "Merged from `first`; then `second`; on test cpu" in (tmp_path / "m.md").read_text()
