"""benchmarks.continual_ml100k: seeds are stored as they finish and read back on a rerun."""

from __future__ import annotations

from types import SimpleNamespace

import benchmarks.continual_ml100k as bench
from recframe.continual.baselines import BackboneSettings


def test_a_rerun_reads_finished_seeds_back_and_redoes_changed_settings(tmp_path, monkeypatch) -> None:
    calls = []

    def fake(data, settings, methods, seeds, share, progress=False, per_user=False):
        calls.append(seeds[0])
        s = str(seeds[0])
        return {"runs": {s: {"VAMIRec": {"test": {"ndcg@10": 0.1 * seeds[0]}}}}, "seconds": {s: {}},
                "per_user_ndcg@10": {s: {"VAMIRec": [[0.5]]}}, "validation_share": share,
                "test users per stage": [[3]]}

    monkeypatch.setattr(bench, "run_comparison", fake)
    data = SimpleNamespace(inter=SimpleNamespace(fingerprint="abc"), n_stages=5)
    cfg = SimpleNamespace(backbone=BackboneSettings(), methods={"vamirec": {}})
    first = bench.seeds_resumably(data, cfg, [0, 1], 0.3, folder=tmp_path)
    again = bench.seeds_resumably(data, cfg, [0, 1, 2], 0.3, folder=tmp_path)
    assert calls == [0, 1, 2]  # seeds 0 and 1 were read back
    assert again["runs"]["1"] == first["runs"]["1"] and set(again["runs"]) == {"0", "1", "2"}
    cfg.methods = {"vamirec": {"lam": 2.0}}
    bench.seeds_resumably(data, cfg, [0], 0.3, folder=tmp_path)
    assert calls == [0, 1, 2, 0]  # other settings: the stored seed does not count
