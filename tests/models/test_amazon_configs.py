"""The Amazon (S3-Rec) configs: each validates against the schema and uses the published tables' protocol."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from recframe.cli import main

AMAZON = Path(__file__).resolve().parents[2] / "configs" / "amazon"
CONFIGS = sorted(p.name for p in AMAZON.glob("*.yaml"))


def test_every_model_has_a_config_per_dataset() -> None:
    for model in ("popularity", "bprmf", "lightgcn", "gru4rec", "bert4rec"):
        for dataset in ("beauty", "sports", "toys"):
            assert f"{model}_{dataset}.yaml" in CONFIGS


@pytest.mark.parametrize("config", CONFIGS)
def test_config_uses_the_published_protocol_on_its_dataset(config: str) -> None:
    data = yaml.safe_load((AMAZON / config).read_text())["data"]
    dataset = config.removesuffix(".yaml").rsplit("_", 1)[1]
    assert data["dataset"] == f"amazon-{dataset}"
    assert data["split"] == "loo" and data["max_len"] == 50  # leave-one-out, the tables' 50 items of history
    assert {5, 10, 20} <= set(data["eval_ks"])  # HR/NDCG@5/10/20


@pytest.mark.parametrize("config", CONFIGS)
def test_config_validates_against_the_schema(config: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:  # --print_config validates and exits before touching data
        main(["fit", "--config", str(AMAZON / config), "--print_config"])
    assert exc.value.code in (0, None)
    assert "class_path: recframe.models." in capsys.readouterr().out
