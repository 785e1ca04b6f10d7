"""The cold-start benchmark's ``--dataset`` option: ML-100K unchanged, the same protocol on Amazon."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import cold_start
from benchmarks.cold_start import COLD, PROTOCOLS, Protocol, content_knn, run_args, run_file
from benchmarks.common import RESULTS

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def test_ml100k_keeps_its_rows_paths_and_run_arguments() -> None:
    ml = PROTOCOLS["ml100k"]
    assert ml.dataset == "ml-100k" and ml.rows is cold_start.ROWS and ml.pairs is cold_start.PAIRS
    assert ml.runs == cold_start.RUNS == RESULTS / "cold_start" and ml.name == "cold_start"
    assert run_file("FLASH (no alignment)", 2) == RESULTS / "cold_start" / "FLASH__no_alignment__seed2.json"
    # the arguments the ML-100K runs were trained with before the option existed
    assert run_args("FLASH (no alignment)", 1) == [
        "--seed_everything", "1", "--data.cold_items", json.dumps(COLD),
        "--trainer.logger.init_args.name", "cold_FLASH__no_alignment__seed1", "--trainer.max_time", "null",
        "--model.init_args.align_weight", "0.0", "--model.init_args.tokenizer.init_args.seed", "1"]
    assert run_args("SASRec", 0)[-2:] == ["--trainer.max_time", "null"]  # no tokenizer seed for SASRec


@pytest.mark.parametrize("dataset", ["beauty", "sports", "toys"])
def test_amazon_protocol_uses_the_dataset_configs_and_attribute_content(dataset: str) -> None:
    p = PROTOCOLS[dataset]
    assert p.dataset == f"amazon-{dataset}" and p.encoder == "none"
    assert p.runs == RESULTS / f"cold_start_amazon_{dataset}"
    for row, config in p.rows.items():
        assert config is None if row == "Content kNN" else (CONFIGS / config).is_file()
        if config is not None:
            assert config.startswith("amazon/") and config.endswith(f"_{dataset}.yaml")
    assert {row for pair in p.pairs for row in pair} <= set(p.rows)
    name = "cold_start_amazon_" + dataset + "__FLASH__no_alignment__seed0"
    args = run_args("FLASH (no alignment)", 0, p)
    assert args[args.index("--trainer.logger.init_args.name") + 1] == name
    assert "--model.init_args.align_weight" in args
    assert run_file("FLASH", 0, p).parent == p.runs


def test_a_row_of_another_dataset_is_refused_in_one_line(capsys) -> None:
    with pytest.raises(SystemExit):
        cold_start.main(["--dataset", "beauty", "--rows", "TIGER (text IDs)", "--render-only"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "'TIGER (text IDs)' is not a row of --dataset beauty" in err and "TIGER (attribute IDs)" in err


def test_content_knn_runs_on_s3rec_data_with_attribute_content(tmp_path: Path) -> None:
    from recframe.data.s3rec_format import convert_s3rec

    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 9, size=60)
    lines = [" ".join(map(str, [u + 1, *rng.choice(np.arange(1, 41), size=int(n), replace=False)]))
             for u, n in enumerate(lengths)]
    attributes = {str(i): [int(i % 5), 10 + int(i % 3)] for i in range(1, 41)}
    folder = tmp_path / "tiny"
    folder.mkdir()
    files = convert_s3rec("\n".join(lines).encode(), json.dumps(attributes).encode(), name="tiny",
                          labels=("Tiny.txt", "Tiny_item2attributes.json"))
    for name, blob in files.items():
        (folder / name).write_bytes(blob)
    protocol = Protocol(dataset=str(folder), title="tiny", name="cold_start_tiny",
                        rows={"Content kNN": None}, pairs=[], encoder="none")
    result = content_knn(0, protocol)
    assert result["n_cold_items"] == 4  # 10 % of 40 items
    assert len(result["cold_ranks"]) == len(result["cold_users"]) > 0
    assert all(0 <= r < 4 for r in result["cold_ranks"])
    assert 0.0 <= result["cold"]["ndcg@10"] <= 1.0
