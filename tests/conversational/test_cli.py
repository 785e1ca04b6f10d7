"""``recframe conversational``: config errors name the key; evaluate runs end to end on planted data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from recframe.cli import main as recframe_main
from recframe.conversational.cli import main, parse_config

SMALL = {
    "benchmark": {"seeds": [0, 1], "generator": {"n_dialogues": 40, "n_pois": 120, "n_cities": 2}},
    "baselines": ["popularity", "bm25", {"name": "rejection_aware", "base": "bm25"}],
    "bootstrap": {"samples": 300},
}


@pytest.mark.parametrize(
    "raw, key",
    [
        ({"benchmarks": {}}, "'benchmarks'"),
        ({"benchmark": {"generator": {"n_dialogue": 5}}}, "'benchmark.generator.n_dialogue'"),
        ({"benchmark": {"generator": {"n_dialogues": 0}}}, "'benchmark.generator'"),
        ({"benchmark": {"seeds": "0"}}, "'benchmark.seeds'"),
        ({"benchmark": {"release": "no/such/folder"}}, "'benchmark.release'"),
        ({"baselines": ["bm25", "gpt"]}, "'baselines[1]'"),
        ({"metrics": {"ks": [1, 0]}}, "'metrics.ks'"),
        ({"metrics": {"cutoff": 3}}, "'metrics.cutoff'"),
        ({"output": "here"}, "'output'"),
    ],
)
def test_config_errors_name_the_key(
    raw: dict, key: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(SystemExit) as info:
        recframe_main(["conversational", "evaluate", "--config", str(path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"config key {key}" in err and len(err.strip().splitlines()) == 1


def test_defaults_parse() -> None:
    cfg, out = parse_config(yaml.safe_load(Path("configs/conversational_trace.yaml").read_text()))
    assert cfg.generator.n_dialogues == 1000 and cfg.seeds == (0, 1, 2) and len(cfg.baselines) == 6
    assert out == {"dir": "benchmarks/results", "name": "trace_benchmark"}


def test_evaluate_end_to_end_recovers_planted_structure(tmp_path: Path) -> None:
    config = {**SMALL, "output": {"dir": str(tmp_path), "name": "small"}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["evaluate", "--config", str(path), "--no-progress"]) == 0
    payload = json.loads((tmp_path / "small.json").read_text())
    md = (tmp_path / "small.md").read_text()
    table = payload["table"]
    assert set(payload["systems"]) == {"Popularity", "BM25", "Rejection-aware (BM25)"}
    pop, bm, rej = table["Popularity"], table["BM25"], table["Rejection-aware (BM25)"]
    # planted: stated preferences are verbalised in reviews, so text retrieval beats popularity
    assert bm["recall@1"]["mean"] > pop["recall@1"]["mean"] + 0.15
    # rejected POIs are never re-offered by the re-ranker; plain BM25 re-offers some (complaint words)
    assert rej["repeat_rejected_rate"]["mean"] == 0.0 < bm["repeat_rejected_rate"]["mean"]
    assert rej["success_after_rejection"]["mean"] > bm["success_after_rejection"]["mean"]
    assert bm["citation_precision"]["mean"] == 1.0 and pop["citation_density"]["mean"] == 0.0
    assert {t["metric"] for t in payload["tests"]} >= {"recall@1", "grounding_score", "turns_to_recovery"}
    assert all(0.0 <= t["p"] <= 1.0 for t in payload["tests"] if t["p"] == t["p"])
    probes = payload["grounding_agreement"]["probes"]["grounding_score"]
    assert probes["rho"] > 0.3 and probes["p"] < 1e-3
    kinds = payload["grounding_agreement"]["kind_accepted"]
    assert kinds["reencoded_nfd"] == kinds["reencoded_nbsp"] == 1.0 and kinds["paraphrased"] == 0.0
    assert "**Accuracy**" in md and "**Recovery**" in md and "Paired tests" in md


def test_generate_and_validate_commands(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["generate", "--out", str(tmp_path), "--dialogues", "5", "--pois", "80"]) == 0
    assert main(["validate", str(tmp_path)]) == 0
    (tmp_path / "dialogues.jsonl").write_text('{"dialogue_id": 3}\n')
    assert main(["validate", str(tmp_path)]) == 1
    assert "dialogues.jsonl:1: dialogue_id" in capsys.readouterr().out
