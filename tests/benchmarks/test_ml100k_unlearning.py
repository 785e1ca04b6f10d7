"""benchmarks.ml100k_unlearning --smoke: the whole pipeline on the synthetic smoke decoder, in seconds."""

from __future__ import annotations

import json

import torch

from benchmarks.ml100k_unlearning import SMOKE_CONCEPTS, main


def test_smoke_run_writes_a_table_per_concept(tmp_path) -> None:
    torch.set_num_threads(1)
    assert main(["--smoke", "--out", str(tmp_path)]) == 0
    payload = json.loads((tmp_path / "ml100k_unlearning.json").read_text())
    assert list(payload["concepts"]) == list(SMOKE_CONCEPTS)
    for report in payload["concepts"].values():
        rows = report["rows"]
        assert list(rows) == ["original", "retrain", "ga", "npo", "suppression", "tracer"]
        for name in ("ga", "npo", "suppression", "tracer"):
            assert 0 <= rows[name]["exposure@10"] <= 1 and 0 <= rows[name]["distance_to_retrain@10"] <= 1
        assert rows["suppression"]["exposure@10"] <= rows["original"]["exposure@10"]
    md = (tmp_path / "ml100k_unlearning.md").read_text()
    assert md.count("| method |") == 2 and "| tracer |" in md
