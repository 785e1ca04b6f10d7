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
        ({"benchmark": {"rejection_phrasings": ["seen", "unseen"]}}, "'benchmark.rejection_phrasings'"),
        ({"benchmark": {"rejection_phrasings": "held_out"}}, "'benchmark.rejection_phrasings'"),
        (
            {"benchmark": {"generator": {"rejection_phrasings": "held_out"}}},
            "'benchmark.generator.rejection_phrasings'",
        ),
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
    assert cfg.rejection_phrasings == ("seen", "held_out")
    assert out == {"dir": "benchmarks/results", "name": "trace_benchmark"}


def test_evaluate_end_to_end_recovers_planted_structure(tmp_path: Path) -> None:
    config = {**SMALL, "output": {"dir": str(tmp_path), "name": "small"}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["evaluate", "--config", str(path), "--no-progress"]) == 0
    payload = json.loads((tmp_path / "small.json").read_text())
    md = (tmp_path / "small.md").read_text()
    assert list(payload["settings"]) == ["seen", "held_out"] and payload["built_against"] == "seen"
    assert payload["config"]["seeds"] == payload["config_seeds"] == [0, 1]
    seen = payload["settings"]["seen"]
    table = seen["table"]
    assert set(payload["systems"]) == {"Popularity", "BM25", "Rejection-aware (BM25)"}
    pop, bm, rej = table["Popularity"], table["BM25"], table["Rejection-aware (BM25)"]
    # planted: stated preferences are verbalised in reviews, so text retrieval beats popularity
    assert bm["recall@1"]["mean"] > pop["recall@1"]["mean"] + 0.15
    # rejected POIs are never re-offered by the re-ranker; plain BM25 re-offers some (complaint words)
    assert rej["repeat_rejected_rate"]["mean"] == 0.0 < bm["repeat_rejected_rate"]["mean"]
    assert rej["success_after_rejection"]["mean"] > bm["success_after_rejection"]["mean"]
    assert bm["citation_precision"]["mean"] == 1.0 and pop["citation_density"]["mean"] == 0.0
    assert {t["metric"] for t in seen["tests"]} >= {"recall@1", "grounding_score", "turns_to_recovery"}
    assert all(0.0 <= t["p"] <= 1.0 for t in seen["tests"] if t["p"] == t["p"])
    probes = seen["grounding_agreement"]["probes"]["grounding_score"]
    assert probes["rho"] > 0.3 and probes["p"] < 1e-3
    kinds = seen["grounding_agreement"]["kind_accepted"]
    assert kinds["reencoded_nfd"] == kinds["reencoded_nbsp"] == 1.0 and kinds["paraphrased"] == 0.0
    # held-out wording: same dialogues, so text-blind Popularity is unchanged on every dialogue; rejected POIs
    # are still never re-offered (the re-ranker reads the reject act, not the words)
    held = payload["settings"]["held_out"]
    assert held["benchmarks"] == seen["benchmarks"]
    assert held["table"]["Popularity"] == table["Popularity"]
    assert held["table"]["Rejection-aware (BM25)"]["repeat_rejected_rate"]["mean"] == 0.0
    changes = payload["phrasing_effect"]["changes"]
    assert all(c["identical"] for c in changes if c["system"] == "Popularity")
    assert any(not c["identical"] for c in changes if c["system"] == "Rejection-aware (BM25)")
    versus = payload["phrasing_effect"]["reranker_vs_base"]
    assert {(v["system"], v["base"]) for v in versus} == {("Rejection-aware (BM25)", "BM25")}
    assert all(set(v) >= {"seen", "held_out"} for v in versus)
    assert md.startswith("Command: `recframe conversational evaluate --config ")
    assert "Seen against held-out rejection phrasings" in md and "### Rejection phrasings: held out" in md
    assert md.count("**Accuracy**") == 3 and "**Recovery**" in md and md.count("Paired tests") == 2


def test_seeds_override_is_warned_and_recorded(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = {
        "benchmark": {
            "seeds": [0, 1],
            "rejection_phrasings": ["held_out"],
            "generator": {"n_dialogues": 10, "n_pois": 60, "n_cities": 1},
        },
        "baselines": ["popularity"],
        "bootstrap": {"samples": 50},
        "output": {"dir": str(tmp_path), "name": "one"},
    }
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["evaluate", "--config", str(path), "--no-progress", "--seeds", "0"]) == 0
    assert "--seeds 0 overrides benchmark.seeds [0, 1]" in capsys.readouterr().err
    payload = json.loads((tmp_path / "one.json").read_text())
    assert payload["config"]["seeds"] == [0] and payload["config_seeds"] == [0, 1]
    assert list(payload["settings"]) == ["held_out"] and "phrasing_effect" not in payload
    md = (tmp_path / "one.md").read_text()
    assert "(seeds [0] given on the command line; the config file says [0, 1])" in md.splitlines()[0]


def test_generate_and_validate_commands(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["generate", "--out", str(tmp_path), "--dialogues", "5", "--pois", "80"]) == 0
    assert main(["validate", str(tmp_path)]) == 0
    (tmp_path / "dialogues.jsonl").write_text('{"dialogue_id": 3}\n')
    assert main(["validate", str(tmp_path)]) == 1
    assert "dialogues.jsonl:1: dialogue_id" in capsys.readouterr().out


def test_generate_with_held_out_phrasings_validates(tmp_path: Path) -> None:
    args = ["generate", "--out", str(tmp_path), "--dialogues", "8", "--pois", "160"]
    assert main([*args, "--rejection-phrasings", "held_out"]) == 0
    assert main(["validate", str(tmp_path)]) == 0
    rejects = [
        t
        for line in (tmp_path / "dialogues.jsonl").read_text().splitlines()
        for t in json.loads(line)["turns"]
        if t["act"] == "reject"
    ]
    assert rejects and not any(t["text"].startswith("Hmm,") for t in rejects)
