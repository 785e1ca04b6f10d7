"""benchmarks.calibration_cochi: a checkpoint's finished run is read back instead of recomputed."""

from __future__ import annotations

import json

from benchmarks.calibration_cochi import lists, recommender_runs, stored_run


def test_a_stored_checkpoint_run_is_read_back_and_keyed_by_its_settings(tmp_path) -> None:
    ckpt = str(tmp_path / "best-epoch=3.ckpt")  # never opened: the stored run answers
    assert stored_run(ckpt, 8, tmp_path) != stored_run(ckpt, 4, tmp_path)
    run = lists({"seed": 1, "test": {}, "per_example": {"before": {"nll": [0.5, 1.5]}}})
    stored_run(ckpt, 8, tmp_path).write_text(json.dumps(run))
    assert recommender_runs([ckpt], 8, "SASRec", folder=tmp_path) == [run]
