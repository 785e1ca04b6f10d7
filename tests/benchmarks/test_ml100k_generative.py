"""Pure parts of benchmarks/ml100k_generative.py: run naming, seeds, paired comparisons, rendering."""

from __future__ import annotations

from benchmarks.ml100k_generative import (
    ROWS,
    RUNS,
    TRIEREC_PAIRS,
    log_name,
    overrides,
    paired,
    point_folder,
    render,
    summarise,
)


def _run(row: str, seed: int, ndcg: float, ranks: str) -> dict:
    metrics = {"ndcg@5": ndcg, "ndcg@10": ndcg, "recall@5": ndcg, "recall@10": ndcg}
    return {"row": row, "seed": seed, "test": metrics, "valid": metrics, "train_seconds": 10.0,
            "best_checkpoint_epoch": 7, "epochs": 12, "selected_last": False, "test_top10_ranks": ranks}


def test_every_row_config_exists_and_overrides_set_each_seed() -> None:
    from benchmarks.ml100k_generative import CONFIGS

    assert all((CONFIGS / row.config).exists() for row in ROWS.values())
    args = overrides("TIGER (collaborative IDs)", 2)
    assert args[args.index("--seed_everything") + 1] == "2"
    assert args[args.index("--model.init_args.tokenizer.init_args.seed") + 1] == "2"
    assert args[args.index("--model.init_args.collaborative_seed") + 1] == "2"
    assert "--model.init_args.collaborative_seed" not in overrides("TIGER (text IDs)", 2)
    assert log_name("TIGER (text IDs)", 0) != log_name("TIGER (text IDs)", 0, point_folder("lr 0.001"))
    assert log_name("TIGER (text IDs)", 0, RUNS) == "gen_TIGER__text_IDs__seed0"
    assert ("TIGER (text IDs)", "TIGER (text IDs) + TrieRec") in TRIEREC_PAIRS


def test_paired_gain_and_no_significant_difference_wording() -> None:
    runs = {"TIGER (text IDs)": [_run("TIGER (text IDs)", s, 0.05, "--0-" * 25) for s in (0, 1)],
            "TIGER (text IDs) + TrieRec": [_run("TIGER (text IDs) + TrieRec", s, 0.5, "0000" * 25)
                                           for s in (0, 1)],
            "TIGER (collaborative IDs)": [_run("TIGER (collaborative IDs)", 0, 0.05, "0---" * 25)]}
    out = paired(runs, TRIEREC_PAIRS + [("TIGER (text IDs)", "TIGER (collaborative IDs)")])
    gain = out["TIGER (text IDs) + TrieRec vs TIGER (text IDs)"]
    assert gain["significant"] and gain["mean"] == 0.75
    same = out["TIGER (collaborative IDs) vs TIGER (text IDs)"]  # same hit count, other users
    assert same["mean"] == 0.0 and not same["significant"]
    md = render(summarise(runs), out, "cmd")
    assert "no significant difference" in md and "| TIGER (text IDs) | 2 |" in md and "7 (12)" in md


def test_train_seconds_leave_out_only_runs_timed_in_part() -> None:
    runs = [_run("SASRec", s, 0.1, "0" * 4) for s in range(3)]
    runs[1].update(train_seconds=2.0, resumed_from="last.ckpt", train_seconds_complete=False)
    runs[2].update(train_seconds=40.0, resumed_from="last.ckpt", train_seconds_complete=True)
    assert summarise({"SASRec": runs})["SASRec"]["train_seconds"][0] == 25.0


def test_search_selects_the_best_validation_point(tmp_path, monkeypatch) -> None:
    import json

    import benchmarks.ml100k_generative as bench

    monkeypatch.setattr(bench, "RUNS", tmp_path / "table")
    monkeypatch.setattr(bench, "SEARCH_RUNS", tmp_path / "search")
    row = "Decoder-only (text IDs)"
    assert bench.point_folder("config") == tmp_path / "search" / "config"
    assert bench.selected_point(row) is None
    for point, valid in [("config", 0.10), ("lr 0.004", 0.12), ("depth 3", 0.11)]:
        path = bench.run_file(row, 0, bench.point_folder(point))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"valid": {"ndcg@10": valid}, "test": {"ndcg@10": 1 - valid}}))
    assert bench.selected_point(row) == ("lr 0.004", 0.12)


def test_validation_curve_joins_the_version_folders_of_a_resumed_run(tmp_path, monkeypatch) -> None:
    import benchmarks.ml100k_generative as bench

    monkeypatch.setattr(bench, "RUN_LOGS", tmp_path)
    logs = {0: "epoch,step,val_ndcg,train_loss\n0,9,0.10,\n0,9,,1.5\n1,19,0.12,\n2,29,0.11,\n",
            1: "epoch,step,val_ndcg\n2,29,0.13\n3,39,0.14\n",  # the resume reran epoch 2
            10: "epoch,step,val_ndcg\n4,49,0.15\n"}  # version_10 sorts after version_1, not before
    for version, text in logs.items():
        (tmp_path / "run" / f"version_{version}").mkdir(parents=True)
        (tmp_path / "run" / f"version_{version}" / "metrics.csv").write_text(text)
    curve = bench.validation_curve("run")
    assert [p["epoch"] for p in curve] == [0, 1, 2, 3, 4]
    assert [p["val_ndcg"] for p in curve] == [0.10, 0.12, 0.13, 0.14, 0.15]
    assert bench.validation_curve("absent") == []


def test_promote_needs_the_config_at_the_point_and_moves_the_old_aside(tmp_path, monkeypatch) -> None:
    import json

    import pytest

    import benchmarks.ml100k_generative as bench

    for name, value in [("RUNS", tmp_path / "table"), ("SEARCH_RUNS", tmp_path / "search"),
                        ("SUPERSEDED", tmp_path / "old"), ("RUN_LOGS", tmp_path / "runs"),
                        ("CONFIGS", tmp_path / "configs")]:
        monkeypatch.setattr(bench, name, value)
    row, twin = "Decoder-only (collaborative IDs) + TrieRec", "Decoder-only (text IDs) + TrieRec"
    assert bench.TWINS[row] == twin
    (tmp_path / "configs").mkdir()
    for r in (row, twin):
        (tmp_path / "configs" / bench.ROWS[r].config).write_text("model:\n  init_args: {lr: 0.002}\n")
    for point, valid in [("config", 0.10), ("lr 0.004", 0.12)]:
        path = bench.run_file(row, 0, bench.point_folder(point))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"valid": {"ndcg@10": valid}}))
    with pytest.raises(SystemExit, match="lr 0.004.*lr is 0.002, set it to 0.004"):
        bench.promote(row)
    (tmp_path / "configs" / bench.ROWS[row].config).write_text("model:\n  init_args: {lr: 0.004}\n")
    with pytest.raises(SystemExit, match="decoder_trierec_ml100k.yaml: model.init_args.lr is 0.002"):
        bench.promote(row)  # the text-ID twin takes the same setting
    (tmp_path / "configs" / bench.ROWS[twin].config).write_text("model:\n  init_args: {lr: 4.0e-3}\n")
    stale = [bench.run_file(row, 0), bench.run_file(row, 1), bench.run_file(twin, 0)]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"valid": {"ndcg@10": 0.0}}))
    kept = bench.run_file("Decoder-only (collaborative IDs)", 1)  # another row: untouched
    kept.write_text("{}")
    (tmp_path / "runs" / bench.log_name(row, 2) / "version_0").mkdir(parents=True)
    print(bench.promote(row))
    promoted = json.loads(bench.run_file(row, 0).read_text())
    assert promoted == {"valid": {"ndcg@10": 0.12}, "search_point": "lr 0.004"}
    assert bench.run_file(row, 0).parent == tmp_path / "table"
    assert not bench.run_file(row, 1).exists() and not bench.run_file(twin, 0).exists() and kept.exists()
    assert sorted(p.name for p in (tmp_path / "old").iterdir()) == sorted(p.name for p in stale)
    assert (tmp_path / "runs" / "superseded" / bench.log_name(row, 2)).is_dir()
    assert "nothing" in bench.promote(row)  # promoting again changes nothing


def test_plot_writes_a_png_with_both_panels(tmp_path) -> None:
    from benchmarks.ml100k_generative import plot

    runs = {"SASRec": [_run("SASRec", s, 0.11, "0---") for s in (0, 1)],
            "TIGER (text IDs)": [_run("TIGER (text IDs)", 0, 0.09, "-0--")]}
    comparisons = {"TIGER (text IDs) vs SASRec": {"mean": -0.02, "ci95": [-0.04, 0.01], "significant": False}}
    path = plot(runs, comparisons, {"Popularity": 0.0432}, tmp_path / "fig.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5_000


def test_rgrec_weight_choice_compares_cut_runs_at_a_common_horizon(tmp_path, monkeypatch) -> None:
    """A run cut by a kill is compared up to the last epoch every cut run reached; a finished (early-stopped)
    run is complete; the chosen weight is the highest mean and the weight override reaches the add-on."""
    import json

    import torch

    import benchmarks.ml100k_generative as bench

    monkeypatch.setattr(bench, "RUN_LOGS", tmp_path / "runs")
    monkeypatch.setattr(bench, "RUNS", tmp_path / "table")
    # per row: (validation curve as {epoch: ndcg}, finished?) for seeds 0 and 1
    curves = {bench.RGREC_WEIGHT_ROWS[0]: ({1: 0.10, 3: 0.11, 5: 0.20}, True),  # improves after the horizon
              bench.RGREC_WEIGHT_ROWS[1]: ({1: 0.12, 3: 0.13}, True),  # stopped early at 3
              bench.RGREC_WEIGHT_ROWS[2]: ({1: 0.05, 3: 0.09}, False)}  # cut at 3: sets the horizon
    for row, (curve, finished) in curves.items():
        for seed in (0, 1):
            folder = tmp_path / "runs" / bench.log_name(row, seed) / "version_0"
            (folder / "checkpoints").mkdir(parents=True)
            (folder / "metrics.csv").write_text(
                "epoch,step,val_ndcg\n" + "".join(f"{e},{e},{v}\n" for e, v in curve.items()))
            stop = {"stopped_epoch": max(curve) if finished else 0}
            torch.save({"epoch": max(curve), "callbacks": {"EarlyStopping{'monitor': 'val_ndcg'}": stop}},
                       folder / "checkpoints" / "last.ckpt")
    row = bench.RGREC_WEIGHT_ROWS[3]  # finished: a stored result
    bench.RUNS.mkdir(parents=True)
    for seed in (0, 1):
        bench.run_file(row, seed).write_text(json.dumps({"seed": seed}))
        folder = tmp_path / "runs" / bench.log_name(row, seed) / "version_0"
        folder.mkdir(parents=True)
        (folder / "metrics.csv").write_text("epoch,step,val_ndcg\n1,1,0.01\n7,7,0.02\n")
    payload, md = bench.rgrec_weight_choice(seeds=(0, 1))
    assert payload["horizon_epoch"] == 3
    assert payload["weights"][bench.RGREC_WEIGHT_ROWS[0]]["mean_to_horizon"] == 0.11
    assert payload["weights"][bench.RGREC_WEIGHT_ROWS[0]]["best_whole_run"] == [0.20, 0.20]
    assert payload["chosen"] == bench.RGREC_WEIGHT_ROWS[1] and "**(chosen)**" in md
    weight = float(bench.RGREC_WEIGHT_ROWS[1].split()[-1].rstrip(")"))
    addon = json.loads(bench.ROWS[bench.RGREC_WEIGHT_ROWS[1]].extra[1])[0]["init_args"]
    assert addon == {f"{name}_weight": weight for name in ("neighbor", "contrast", "link")}


def test_rgrec_weight_choice_reads_stored_curves_on_a_fresh_checkout(tmp_path, monkeypatch) -> None:
    """With no ``runs/`` logs at all (a new checkout), the weight is chosen from the committed results'
    ``val_curve``; a row missing both gets one error naming the row and seed."""
    import json

    import pytest

    import benchmarks.ml100k_generative as bench

    monkeypatch.setattr(bench, "RUN_LOGS", tmp_path / "runs")
    monkeypatch.setattr(bench, "RUNS", tmp_path / "table")
    bench.RUNS.mkdir(parents=True)
    best = dict(zip(bench.RGREC_WEIGHT_ROWS, (0.10, 0.14, 0.12, 0.08)))
    for row, top in best.items():
        for seed in (0, 1):
            curve = [{"epoch": 1, "val_ndcg": top / 2}, {"epoch": 3, "val_ndcg": top + seed / 100}]
            bench.run_file(row, seed).write_text(json.dumps({"seed": seed, "val_curve": curve}))
    payload, _ = bench.rgrec_weight_choice(seeds=(0, 1))
    assert payload["chosen"] == bench.RGREC_WEIGHT_ROWS[1]
    assert payload["weights"][bench.RGREC_WEIGHT_ROWS[2]]["best_whole_run"] == [0.12, 0.13]
    bench.run_file(bench.RGREC_WEIGHT_ROWS[3], 1).unlink()
    with pytest.raises(SystemExit, match=r"\(weight 1\.0\) seed 1"):
        bench.rgrec_weight_choice(seeds=(0, 1))


def test_the_validation_chosen_weight_row_is_read_from_the_stored_choice(tmp_path, monkeypatch) -> None:
    """The render keeps the weight row that ``--rgrec-weight-choice`` chose (so the R-GRec verdict is also
    scored at it) and no other; with no stored choice there is none."""
    import json

    import benchmarks.ml100k_generative as bench

    monkeypatch.setattr(bench, "RUNS", tmp_path / "ml100k_generative")
    assert bench.chosen_rgrec_weight_row() is None
    (tmp_path / "ml100k_generative_rgrec_weight.json").write_text(
        json.dumps({"chosen": bench.RGREC_WEIGHT_ROWS[1]}))
    assert bench.chosen_rgrec_weight_row() == bench.RGREC_WEIGHT_ROWS[1]
