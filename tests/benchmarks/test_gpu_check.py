"""``python -m benchmarks.gpu_check`` at a tiny size on the CPU: every part runs or says why not, the JSON
records the device, and the budgets skip or stop a part with a note."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import benchmarks.common
from benchmarks import gpu_check
from recframe.data import catalog
from recframe.data.s3rec_format import mirror_dirs

TINY = ["--in-process", "--threads", "1", "--min-seconds", "0.05", "--index-items", "2000", "--queries", "32",
        "--cpu-queries", "16", "--eval-items", "300,600", "--eval-users", "32", "--sasrec-epochs", "1",
        "--sasrec-batches", "1", "--kmeans-items", "3000", "--kmeans-n-iter", "5"]


def _beauty_mirror() -> Path | None:
    """The folder of the raw S3-Rec Beauty files that the catalogue's mirror entry names, if present."""
    source = next(s for s in catalog.get_entry("amazon-beauty")["sources"] if "mirror" in s)
    files = source["files"].values()
    return next((d for d in mirror_dirs(source) if all((d / f).is_file() for f in files)), None)


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Results under ``tmp_path``; the data environment restored after the test."""
    monkeypatch.setattr(benchmarks.common, "RESULTS", tmp_path / "results")
    monkeypatch.setenv("RECFRAME_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("RECFRAME_S3REC_DIR", str(tmp_path / "no-mirror"))
    return tmp_path / "results" / gpu_check.RESULT_DIR


def _rows(payload: dict, kind: str) -> list[dict]:
    return [r for r in payload["rows"] if r.get("kind") == kind]


def test_gpu_check_tiny_on_cpu(results: Path, tmp_path: Path) -> None:
    mirror = _beauty_mirror()
    if mirror is None:
        pytest.skip("the raw S3-Rec Beauty files (the catalogue's mirror folder) are not on this machine")
    # Generous budgets: this test checks what each part reports, not how fast; under the default 60 s the
    # cuda_tests part's pytest subprocess ran out of time on a loaded 2-core machine. Budget stops have
    # their own test below.
    roomy = [a for part in gpu_check.PARTS for a in ("--budget", f"{part}=900")]
    out = gpu_check.main([*TINY, *roomy, "--time-limit", "7200", "--device", "cpu",
                          "--s3rec-dir", str(mirror), "--data-root", str(tmp_path / "data")])
    assert [r["part"] for r in out["records"]] == list(gpu_check.PARTS)

    summary = json.loads((results / "summary.json").read_text())
    assert summary["device"] == "cpu" and summary["device_name"] == "cpu"
    assert {"torch", "numpy"} <= set(summary["versions"]) and "faiss_gpu" in summary["gpu_env"]
    assert [p["part"] for p in summary["parts"]] == list(gpu_check.PARTS)
    for part in summary["parts"]:
        assert part["status"] == "ran", part  # every part ran here (skipped ones would carry a reason)
    parts = {name: json.loads((results / f"{name}.json").read_text()) for name in gpu_check.PARTS}
    for name, payload in parts.items():
        assert payload["device"] == "cpu" and payload["device_name"] == "cpu" and "versions" in payload, name
        assert (results / f"{name}.md").read_text().startswith("# GPU check"), name

    # (a) the CUDA-only evaluator test is found and, with no CUDA here, skips
    tests = _rows(parts["cuda_tests"], "test")
    assert "tests/metrics/test_evaluator.py::test_cuda_matches_cpu" in _rows(parts["cuda_tests"],
                                                                             "discovered")[0]["tests"]
    expected = "passed" if torch.cuda.is_available() else "skipped"
    assert tests and all(t["outcome"] == expected for t in tests)

    # (b) the GPU methods say why they did not run; the CPU ones agree with raw FAISS exactly
    methods = {r["method"]: r for r in _rows(parts["item_index"], "method")}
    assert set(methods) == {"itemindex_gpu", "faiss_gpu_raw", "itemindex_cpu", "faiss_cpu_raw"}
    assert "GPU" in methods["itemindex_gpu"]["skipped"] and "GPU" in methods["faiss_gpu_raw"]["skipped"]
    assert methods["itemindex_cpu"]["queries_per_s"] > 0 and methods["faiss_cpu_raw"]["queries_per_s"] > 0
    agreement = _rows(parts["item_index"], "agreement")[0]["top_k_overlap_with_faiss_cpu_raw"]
    assert agreement == {"itemindex_cpu": 1.0}
    ratios = _rows(parts["item_index"], "ratios")[0]["queries_per_s_ratios"]
    assert set(ratios) == {"itemindex_cpu / faiss_cpu_raw"}

    # (c) users/s at each size
    sizes = _rows(parts["evaluator"], "size")
    assert [s["items"] for s in sizes] == [300, 600] and all(s["users_per_s"] > 0 for s in sizes)

    # (d) Beauty prepared from the folder given; one epoch per loss; chunked CE = the full softmax's value
    prep = _rows(parts["sasrec_beauty"], "prepare")[0]
    assert prep["from_s3rec_dir"] and (tmp_path / "data" / "amazon-beauty" / "amazon-beauty.inter").is_file()
    losses = {r["loss"]: r for r in _rows(parts["sasrec_beauty"], "loss")}
    assert set(losses) == {"ce", "chunked", "sampled_logq"}
    for row in losses.values():
        assert row["epochs"] == 1 and row["s_per_epoch"] > 0 and row["peak_gib"] > 0
        assert row["n_items"] == 12101 and row["steps_per_epoch"] == 1
        assert math.isfinite(row["last_train_loss"])
    assert losses["chunked"]["last_train_loss"] == pytest.approx(losses["ce"]["last_train_loss"], abs=1e-3)

    # (e) seconds, iterations and inertia per level
    fit = _rows(parts["rq_kmeans"], "fit")[0]
    assert len(fit["level_seconds"]) == len(fit["inertia"]) == len(fit["iterations"]) == 3
    assert not fit["faiss_on_gpu"] and fit["inertia"][0] > fit["inertia"][2] > 0


def test_a_part_without_budget_is_skipped_with_a_note(results: Path) -> None:
    out = gpu_check.main([*TINY, "--parts", "evaluator,rq_kmeans", "--time-limit", "1"])
    assert [r["status"] for r in out["records"]] == ["skipped", "skipped"]
    summary = json.loads((results / "summary.json").read_text())
    assert summary["device"] == "cpu" and all("time budget gone" in p["reason"] for p in summary["parts"])


def test_a_part_past_its_budget_is_stopped_in_its_own_process(results: Path) -> None:
    out = gpu_check.main(["--threads", "1", "--parts", "rq_kmeans", "--budget", "rq_kmeans=1",
                          "--kmeans-items", "3000000", "--device", "cpu"])
    record = out["records"][0]
    assert record["status"] == "stopped" and "budget of 1 s" in record["reason"]
    assert record["wall_s"] < 30
    assert json.loads((results / "rq_kmeans.json").read_text())["status"] == "stopped"


def test_cuda_only_tests_are_found_by_their_skip_marks(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    (tests / "sub").mkdir(parents=True)
    (tests / "test_a.py").write_text(
        "import pytest, torch, faiss\n"
        "@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs CUDA')\n"
        "def test_gpu(): pass\n"
        "@pytest.mark.skipif(True, reason='other')\n"
        "def test_other(): pass\n"
        "class TestIndex:\n"
        "    @pytest.mark.skipif(faiss.get_num_gpus() == 0, reason='no FAISS GPU')\n"
        "    def test_on_gpu(self): pass\n"
        "    def test_plain(self): pass\n")
    (tests / "sub" / "test_b.py").write_text(
        "import pytest, torch\n"
        "pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='CUDA')\n"
        "def test_one(): pass\n")
    assert gpu_check.cuda_only_tests(tests) == ["tests/sub/test_b.py", "tests/test_a.py::test_gpu",
                                                "tests/test_a.py::TestIndex::test_on_gpu"]


def test_bad_arguments_get_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="PART=SECONDS"):
        gpu_check.parse(["--budget", "nothing=3"])
    with pytest.raises(SystemExit):
        gpu_check.parse(["--parts", "item_index,warp_drive"])
    assert "unknown part 'warp_drive'" in capsys.readouterr().err
    gpu_check.main(["--missing-modules"])
    assert capsys.readouterr().out.strip() == ""  # the project's environment has every module the parts need
