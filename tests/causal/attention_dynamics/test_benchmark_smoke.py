"""The benchmark script runs end to end in its smoke mode (tiny batches; prints, writes nothing)."""

from __future__ import annotations

import pytest

from benchmarks import attention_clusters
from benchmarks.common import RESULTS


def test_quick_run_prints_every_table_and_writes_no_files(capsys: pytest.CaptureFixture[str]) -> None:
    before = {p: p.stat().st_mtime_ns for p in RESULTS.glob("attention_clusters.*")}
    assert attention_clusters.main(["--quick"]) == 0
    out = capsys.readouterr().out
    for heading in ("Phase diagram (ODE)", "Dimension deduction", "Time-dependent parameters",
                    "GQA layers, planted V_eff", "GQA layers, PyTorch default initialisation"):
        assert heading in out
    assert out.count("| PyTorch init |") == 2 and "| planted, qk_beta=4 |" in out
    assert {p: p.stat().st_mtime_ns for p in RESULTS.glob("attention_clusters.*")} == before
