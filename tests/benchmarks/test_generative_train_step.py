"""The train-step benchmark's table: both arms per backbone, the speed-up as broadcast over compact."""

import pytest

from benchmarks.generative_train_step import markdown, parse


def _arm(row: str, compact: bool, seconds: float) -> dict:
    return {"row": row, "compact": compact, "s_per_step": seconds, "real_target_share": 0.125,
            "steps": 7, "device": "cpu"}


def test_markdown_pairs_the_arms_of_each_backbone() -> None:
    rows = [_arm("TIGER", False, 2.0), _arm("TIGER", True, 0.5),
            _arm("Decoder-only", True, 1.0), _arm("Decoder-only", False, 1.5)]
    lines = markdown(rows).splitlines()
    assert len(lines) == 4
    assert lines[2] == "| TIGER | 2.000 | 0.500 | x4.00 | 12.5% | 7 | cpu |"
    assert lines[3] == "| Decoder-only | 1.500 | 1.000 | x1.50 | 12.5% | 7 | cpu |"


def test_parse_refuses_a_step_budget_below_one(capsys) -> None:
    with pytest.raises(SystemExit):
        parse(["--steps", "0"])
    assert "--steps" in capsys.readouterr().err
