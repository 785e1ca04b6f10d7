"""The train-step benchmark's table: three arms per backbone, the speed-ups over the dense baseline."""

import pytest

from benchmarks.generative_train_step import markdown, parse


def _arm(row: str, compact: bool, packed: bool, seconds: float) -> dict:
    return {"row": row, "compact": compact, "packed": packed, "s_per_step": seconds * 1.5,
            "cpu_s_per_step": seconds, "real_target_share": 0.125, "steps": 7, "device": "cpu"}


def test_markdown_pairs_the_arms_of_each_backbone_against_the_dense_baseline() -> None:
    rows = [_arm("TIGER", False, False, 2.0), _arm("TIGER", True, True, 0.25),
            _arm("TIGER", True, False, 0.5),
            _arm("Decoder-only", True, False, 1.0), _arm("Decoder-only", False, False, 1.5),
            _arm("Decoder-only", True, True, 0.75)]
    lines = markdown(rows).splitlines()
    assert len(lines) == 4
    assert lines[2] == ("| TIGER | 3.000 (2.000 CPU) | 0.750 (0.500 CPU) | 0.375 (0.250 CPU) | x4.00 | "
                        "x8.00 | 12.5% | 7 | cpu |")
    assert lines[3] == ("| Decoder-only | 2.250 (1.500 CPU) | 1.500 (1.000 CPU) | 1.125 (0.750 CPU) | "
                        "x1.50 | x2.00 | 12.5% | 7 | cpu |")


def test_markdown_gives_a_sequential_model_its_dense_and_packed_arms() -> None:
    rows = [_arm("SASRec", None, False, 1.2), _arm("SASRec", None, True, 0.4)]
    lines = markdown(rows).splitlines()
    assert lines[2] == "| SASRec | 1.800 (1.200 CPU) | – | 0.600 (0.400 CPU) | – | x3.00 | 12.5% | 7 | cpu |"


def test_parse_refuses_a_step_budget_below_one(capsys) -> None:
    with pytest.raises(SystemExit):
        parse(["--steps", "0"])
    assert "--steps" in capsys.readouterr().err
