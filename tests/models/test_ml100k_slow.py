"""Real-data checks on MovieLens-100K (``make test-slow``; prepares the data if needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from recframe.data import catalog
from recframe.runs import fit_and_test

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
pytestmark = pytest.mark.slow


def test_popularity_floor_on_ml100k(ml100k_root: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(catalog.ENV_ROOT, str(ml100k_root))
    monkeypatch.chdir(tmp_path)
    res = fit_and_test(CONFIGS / "popularity_ml100k.yaml")
    assert 0.035 < res["test"]["ndcg@10"] < 0.05  # about 0.043 with pessimistic ties


def test_sasrec_beats_the_floor_within_ten_minutes(ml100k_root: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(catalog.ENV_ROOT, str(ml100k_root))
    monkeypatch.chdir(tmp_path)
    res = fit_and_test(CONFIGS / "sasrec_ml100k.yaml", ["--trainer.max_time", "00:00:10:00"])
    assert res["train_seconds"] < 660
    assert res["test"]["ndcg@10"] >= 0.065
