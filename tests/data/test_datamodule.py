"""RecDataModule resolves every kind of source named in a config."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from recframe.data.datamodule import RecDataModule


def _atomic_dir(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    rows = ["user_id:token\titem_id:token\trating:float\ttimestamp:float"]
    for u in range(20):
        for t, i in enumerate(rng.choice(30, size=6, replace=False)):
            rows.append(f"u{u}\ti{i}\t{rng.integers(1, 6)}\t{1000 + t}")
    d = tmp_path / "mydata"
    d.mkdir()
    (d / "mydata.inter").write_text("\n".join(rows) + "\n")
    return d


def test_a_directory_of_atomic_files_is_a_dataset(tmp_path: Path) -> None:
    dm = RecDataModule(dataset=str(_atomic_dir(tmp_path)), split="loo")
    assert dm.n_users == 20 and len(dm.split.test) == 20 and len(dm.split.train) == 80
    batch = next(iter(dm.test_dataloader()))
    assert batch["targets"].shape == (20, 1)
    # the model input at test time is train + validation, and all of it is masked
    assert (batch["history"] > 0).sum(1).tolist() == [5] * 20
    labels = dm.split.train.label
    assert set(np.unique(labels).tolist()) <= {-1, 0, 1} and (labels != 0).any()


def test_a_csv_with_a_column_map_is_a_dataset(tmp_path: Path) -> None:
    d = _atomic_dir(tmp_path)
    text = (d / "mydata.inter").read_text().replace(":token", "").replace(":float", "").replace("\t", ",")
    csv = tmp_path / "data.csv"
    csv.write_text(text)
    dm = RecDataModule(dataset=str(csv), columns={"user": "user_id", "item": "item_id", "rating": "rating",
                                                  "timestamp": "timestamp"}, split="ratio")
    atomic = RecDataModule(dataset=str(d), split="ratio")
    assert dm.split.train.fingerprint == atomic.split.train.fingerprint
    assert dm.protocol == {"ks": [10, 20], "signed": True, "signed_lambda": 1.0, "relevance": "liked",
                           "families": []}
