"""``recframe continual --config``: config errors name the key; a tiny run writes its results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from recframe.continual.cli import load_config, main
from recframe.data.interactions import DataError

BASE = {"seeds": [0],
        "data": {"dataset": "continual-shift", "n_stages": 3,
                 "synthetic": {"n_users": 30, "n_items": 240, "per_stage": 8}},
        "backbone": {"hidden": 16, "n_layers": 1, "n_heads": 1, "inner": 32, "max_len": 20, "base_epochs": 1,
                     "stage_epochs": 1},
        "methods": {"fine-tune": {}, "replay": {"capacity": 20}, "ewc": {"lam": 10.0}}}


@pytest.mark.parametrize("patch, key", [
    ({"datum": {}}, "datum"),
    ({"data": {"n_stages": 3}}, "data.dataset"),
    ({"data": {"dataset": "x", "n_stage": 3}}, "data.n_stage"),
    ({"data": {"dataset": "x", "n_stages": "five"}}, "data.n_stages"),
    ({"backbone": {"hiden": 3}}, "backbone.hiden"),
    ({"methods": {"sgd": {}}}, "methods.sgd"),
    ({"methods": {"replay": {"size": 3}}}, "methods.replay.size"),
    ({"seeds": ["a"]}, "seeds"),
])
def test_config_errors_name_the_key(patch: dict, key: str) -> None:
    with pytest.raises(DataError, match=key.replace(".", r"\.")):
        load_config({**BASE, **patch})


def test_main_runs_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(BASE))
    out = tmp_path / "out.json"
    assert main(["--config", str(cfg), "--output", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["runs"]["0"]) == {"fine-tune", "replay", "EWC"}
    row = result["runs"]["0"]["replay"]["test"]
    assert len(row["ndcg@10 per stage"]) == 2 and 0 <= row["ndcg@10"] <= 1
    assert "mean ndcg@10" in capsys.readouterr().out
    with pytest.raises(DataError, match="no such file"):
        main(["--config", str(tmp_path / "missing.yaml")])
