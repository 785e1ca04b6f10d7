"""benchmarks/ml100k_baselines.py without training: the overrides each run gets, the rows a subset keeps."""

import json

import benchmarks.ml100k_baselines as bench


def _run(ndcg: float, extra: list[str]) -> dict:
    metrics = {"recall@10": ndcg, "ndcg@10": ndcg, "recall@20": ndcg, "ndcg@20": ndcg}
    return {"overrides": list(extra), "train_seconds": 1.0, "epochs": 1, "valid": metrics, "test": metrics}


def _patch(monkeypatch, tmp_path):
    calls = []

    def fake_fit(config, extra):
        calls.append((config.name, list(extra)))
        return _run(0.2, extra)

    def fake_write(name, payload, markdown):
        js = tmp_path / f"{name}.json"
        js.write_text(json.dumps(payload))
        return js, tmp_path / f"{name}.md"

    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    monkeypatch.setattr(bench, "fit_and_test", fake_fit)
    monkeypatch.setattr(bench, "write_results", fake_write)
    return calls


def test_max_time_reaches_the_trainer_and_is_recorded(monkeypatch, tmp_path):
    calls = _patch(monkeypatch, tmp_path)
    assert bench.main(["--models", "BPR-MF", "--max-time", "00:00:40:00"]) == 0
    assert calls == [("bprmf_ml100k.yaml", ["--data.split", "loo", "--trainer.max_time", "00:00:40:00"])]
    runs = json.loads((tmp_path / "ml100k_baselines_loo.json").read_text())["runs"]
    assert runs["BPR-MF"]["overrides"][-2:] == ["--trainer.max_time", "00:00:40:00"]


def test_without_max_time_the_configs_cap_stands(monkeypatch, tmp_path):
    calls = _patch(monkeypatch, tmp_path)
    assert bench.main(["--models", "Popularity", "--split", "ratio"]) == 0
    assert calls == [("popularity_ml100k.yaml", ["--data.split", "ratio"])]


def test_a_subset_keeps_the_other_rows(monkeypatch, tmp_path):
    _patch(monkeypatch, tmp_path)
    old = {"Popularity": _run(0.1, []), "SASRec": _run(0.3, [])}
    (tmp_path / "ml100k_baselines_ratio.json").write_text(json.dumps({"runs": old}))
    bench.main(["--models", "Popularity", "--split", "ratio"])
    runs = json.loads((tmp_path / "ml100k_baselines_ratio.json").read_text())["runs"]
    assert list(runs) == ["Popularity", "SASRec"]
    assert runs["Popularity"]["test"]["ndcg@10"] == 0.2 and runs["SASRec"] == old["SASRec"]
