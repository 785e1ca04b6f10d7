"""The shared seeded-run loop and the Amazon table built on it (fake fits; no training)."""

from __future__ import annotations

import json
from pathlib import Path

import benchmarks.amazon as amazon
import benchmarks.seeded_runs as seeded_runs


def _fake_fit(calls: list):
    def fit(config, overrides, ckpt_path=None, after_test=None):
        calls.append((str(config), list(overrides), ckpt_path))
        seed = int(overrides[overrides.index("--seed_everything") + 1])
        ranks = "".join("0" if (u + seed) % 3 == 0 else "-" for u in range(60))
        return {"device": "cpu", "train_seconds": 1.0, "epochs": 3, "best_checkpoint_epoch": 2,
                "valid": {"ndcg@10": 0.1 + seed / 100},
                "test": {m: 0.05 for m in amazon.METRICS}, "test_top10_ranks": ranks}
    return fit


def test_run_missing_stores_each_run_once_and_skips_finished(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(seeded_runs, "fit_and_test", _fake_fit(calls))
    folder = tmp_path / "runs_json"
    jobs = [("SASRec", 0), ("SASRec", 1)]
    args = dict(config_of=lambda row: Path(f"{row}.yaml"),
                overrides_of=lambda row, seed, name: ["--seed_everything", str(seed), "--name", name],
                log_name_of=lambda row, seed: f"x__{row}__{seed}", run_logs=tmp_path / "logs",
                recorded={"extra": ["--a"]})
    seeded_runs.run_missing(jobs, folder, **args)
    assert len(calls) == 2 and calls[0][2] is None
    stored = json.loads(seeded_runs.run_file(folder, "SASRec", 1).read_text())
    assert stored["row"] == "SASRec" and stored["seed"] == 1 and stored["extra"] == ["--a"]
    assert stored["val_curve"] == [] and stored["selected_last"] is False
    seeded_runs.run_missing(jobs, folder, **args)  # both exist: nothing runs again
    assert len(calls) == 2
    assert list(seeded_runs.load_runs(folder, ["SASRec"])) == ["SASRec"]


def test_amazon_table_pairs_and_published_rows(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(seeded_runs, "fit_and_test", _fake_fit(calls))
    import benchmarks.common as common

    monkeypatch.setattr(amazon, "RESULTS", tmp_path)
    monkeypatch.setenv("RECFRAME_DATA", str(tmp_path / "data"))  # an empty collaborative cache
    monkeypatch.setattr(common, "RESULTS", tmp_path)
    monkeypatch.setattr(seeded_runs, "RUN_LOGS", tmp_path / "logs")
    configs = tmp_path / "configs"
    configs.mkdir()
    for stem in ("sasrec", "tiger", "flash"):
        (configs / f"{stem}_beauty.yaml").write_text("model: {}\n")
    monkeypatch.setattr(amazon, "CONFIGS", configs)
    assert amazon.available_rows("beauty") == ["SASRec", "TIGER (attribute IDs)", "FLASH"]
    amazon.main(["--dataset", "beauty", "--seeds", "0", "1"])
    assert len(calls) == 6
    tiger_call = next(c for c in calls if "tiger" in c[0])
    assert "--model.init_args.tokenizer.init_args.seed" in tiger_call[1]
    table = (tmp_path / "amazon_beauty.md").read_text()
    assert "*SASRec (S3-Rec table)*" in table and "0.0318" in table  # the published row beside ours
    assert "FLASH vs TIGER (attribute IDs)" in table
    payload = json.loads((tmp_path / "amazon_beauty.json").read_text())
    # identical per-user ranks on both arms: a zero difference, not significant
    assert payload["comparisons"]["FLASH vs TIGER (attribute IDs)"]["mean"] == 0.0
    best = next(k for k in payload["comparisons"] if k.endswith("vs SASRec"))
    assert best.startswith("TIGER (attribute IDs)") or best.startswith("FLASH")
    # a GPU seed on one arm: the comparison is refused, never computed
    run = amazon.folder("beauty") / "FLASH__seed1.json"
    data = json.loads(run.read_text())
    run.write_text(json.dumps({**data, "device": "cuda:0 NVIDIA H100"}))
    amazon.main(["--dataset", "beauty", "--render-only"])
    payload = json.loads((tmp_path / "amazon_beauty.json").read_text())
    assert "refused" in payload["comparisons"]["FLASH vs TIGER (attribute IDs)"]


def test_amazon_table_marks_runs_that_reached_their_epoch_cap(tmp_path, monkeypatch):
    config = tmp_path / "model.yaml"
    config.write_text("trainer:\n  max_epochs: 3\n")
    run = {"config": str(config), "overrides": ["--seed_everything", "0"]}
    assert amazon.epoch_cap(run) == 3
    assert amazon.epoch_cap({**run, "overrides": ["--trainer.max_epochs", "7"]}) == 7
    assert amazon.epoch_cap({"config": str(tmp_path / "gone.yaml")}) is None
    base = {"device": "cpu", "train_seconds": 1.0, "valid": {"ndcg@10": 0.1},
            "test": {m: 0.05 for m in amazon.METRICS}, "config": str(config)}
    runs = {"SASRec": [{**base, "seed": 0, "epochs": 3, "best_checkpoint_epoch": 2},
                       {**base, "seed": 1, "epochs": 2, "best_checkpoint_epoch": 0}],
            "Popularity": [{**base, "seed": 0, "epochs": 1, "best_checkpoint_epoch": 0,
                            "config": str(tmp_path / "gone.yaml")}]}
    summary = amazon.summarise(runs)
    assert summary["SASRec"]["capped"] == [True, False]
    assert amazon.epochs_cell(summary["SASRec"]) == "3‡ (3), 2 (1)"
    assert amazon.epochs_cell(summary["Popularity"]) == "1 (1)"
    table = amazon.render("toys", summary, {})
    assert "| 3‡ (3), 2 (1) | cpu |" in table and "epochs (best)" in table
