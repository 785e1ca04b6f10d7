"""Conversational papercuts (issue 33, item 6): one-candidate dialogues are warned about, the paired-test
verdict says which test decides, and a JSON error message reads once ("starting at column", not "at at")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recframe.conversational.benchmark import paired_verdict, render_markdown
from recframe.conversational.cli import main, single_candidate_warning
from recframe.conversational.validate import read_jsonl


def test_generate_with_three_pois_warns_about_single_candidate_dialogues(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["generate", "--out", str(tmp_path / "rel"), "--pois", "3", "--dialogues", "20"]) == 0
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err]
    assert "20 of 20 dialogues have a single candidate" in err and "--pois 3" in err and "--pois 160" in err
    dialogues = [json.loads(line) for line in (tmp_path / "rel" / "dialogues.jsonl").read_text().splitlines()]
    assert all(len(d["candidates"]) == 1 for d in dialogues)


def test_enough_pois_give_no_warning(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["generate", "--out", str(tmp_path / "rel"), "--pois", "400", "--dialogues", "20"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_single_candidate_warning_counts_only_single_candidate_dialogues() -> None:
    class D:
        def __init__(self, n: int) -> None:
            self.candidates = tuple(range(n))

    assert single_candidate_warning([D(2), D(20)], 2400) is None
    assert single_candidate_warning([D(1), D(2), D(1)], 10).startswith("2 of 3 dialogues")


@pytest.mark.parametrize(
    ("significant", "p", "expected"),
    [
        (True, 0.001, "significant"),
        (False, 0.4, "no significant difference"),
        (False, 0.01, "no significant difference (bootstrap CI decides; t-test p < 0.05 disagrees)"),
        (True, 0.2, "significant (bootstrap CI decides; t-test p ≥ 0.05 disagrees)"),
        (False, float("nan"), "no significant difference"),
    ],
)
def test_verdict_agrees_with_p_or_says_which_test_decides(significant: bool, p: float, expected: str) -> None:
    assert paired_verdict(significant, p) == expected


def test_rendered_table_states_which_test_decides() -> None:
    payload = {
        "benchmarks": [{"benchmark": "seed 0", "dialogues": 3, "evaluation_points": 5, "after_rejection": 1,
                        "pois": 10, "reviews": 30}],
        "systems": ["A", "B"],
        "families": {"Accuracy": ["recall@1"]},
        "table": {s: {"recall@1": {"mean": 0.5, "seed_min": 0.5, "seed_max": 0.5}} for s in ("A", "B")},
        "tests": [{"family": "Accuracy", "metric": "recall@1", "best": "A", "other": "B", "mean_diff": 0.1,
                   "ci95": [-0.01, 0.2], "t": 2.5, "p": 0.02, "n": 3, "significant": False}],
        "grounding_agreement": {},
        "seconds": {"A": 1.0, "B": 2.0},
    }
    text = render_markdown(payload)
    assert "The bootstrap interval decides the verdict" in text
    row = next(line for line in text.splitlines() if line.startswith("| Accuracy | recall@1 |"))
    assert "0.020" in row
    assert "no significant difference (bootstrap CI decides; t-test p < 0.05 disagrees)" in row


@pytest.mark.parametrize("line", ['{"poi_id": "unterminated', '{"poi_id": "a\tb"}'])
def test_json_error_says_at_column_once(tmp_path: Path, line: str) -> None:
    path = tmp_path / "pois.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    [(number, obj, error)] = list(read_jsonl(path))
    assert number == 1 and obj is None
    assert "at at" not in error and " at column " in error, error
