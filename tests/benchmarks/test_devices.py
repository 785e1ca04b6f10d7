"""A paired comparison never crosses devices: the rule, and the check over the stored results."""

from __future__ import annotations

import json

from benchmarks.devices import cross_device_comparisons, refusal, run_device


def test_run_device_reads_device_then_machine():
    assert run_device({"device": "cpu"}) == "cpu"
    assert run_device({"device": "cuda:0 NVIDIA H200"}) == "NVIDIA H200"
    assert run_device({"machine": "one NVIDIA H200 GPU (lent device; torch 2.11.0+cu130)"}) == "NVIDIA H200"
    assert run_device({"machine": {"cpus": 2, "platform": "Linux-x86_64"}}) == "cpu"
    assert run_device({}) == "cpu"


def test_refusal_only_when_devices_differ():
    cpu, gpu = {"device": "cpu"}, {"device": "cuda:0 NVIDIA H100"}
    assert refusal([cpu, cpu], [cpu]) is None
    assert refusal([gpu], [gpu, gpu]) is None
    crossed = refusal([cpu], [gpu])
    assert crossed is not None and "different devices" in crossed["refused"]
    mixed = refusal([cpu, gpu], [cpu, cpu])  # one arm's seeds mix devices
    assert mixed is not None and mixed["devices"]["baseline"] == ["NVIDIA H100", "cpu"]


def _write(folder, name, row, seed, device):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}__seed{seed}.json").write_text(json.dumps({"row": row, "seed": seed, "device": device}))


def test_check_finds_a_crossing_comparison(tmp_path):
    runs = tmp_path / "ml100k_generative"
    for seed in (0, 1):
        _write(runs, "A", "A", seed, "cpu")
        _write(runs, "B", "B", seed, "cuda:0 NVIDIA H200" if seed else "cpu")
    (tmp_path / "ml100k_generative.json").write_text(json.dumps({"paired": {"B vs A": {"mean": 0.1}}}))
    found = cross_device_comparisons(tmp_path)
    assert len(found) == 1 and found[0].startswith("ml100k_generative: B vs A")
    # a refused comparison is what the benchmarks store instead of a number: it passes
    (tmp_path / "ml100k_generative.json").write_text(json.dumps({"paired": {"B vs A": refusal([{}], [{}, {}])
                                                                            or {"refused": "devices"}}}))
    assert cross_device_comparisons(tmp_path) == []


def test_stored_results_pair_no_gpu_run_with_a_cpu_run():
    """Every paired comparison in benchmarks/results stays on one device (refused ones say why instead)."""
    assert cross_device_comparisons() == []


def test_recmem_check_reads_each_model_at_its_chosen_grid_point(tmp_path):
    folder = tmp_path / "recmem_long"
    folder.mkdir()

    def run(model, point, seed, device):
        record = {"model": model, "point": point, "seed": seed, "device": device}
        (folder / f"acc_ml100k_{model}_{point}_seed{seed}.json").write_text(json.dumps(record))

    for seed in (0, 1):
        run("Full", "base", seed, "cuda:0 NVIDIA H200" if seed else "cpu")  # the base point mixes devices
        run("Full", "drop0", seed, "cpu")
        run("RecMem", "drop0", seed, "cpu")
    claims = {"claims": {"ml100k_recmem_minus_full@10": {"mean": 0.0}}}
    (tmp_path / "recmem_long.json").write_text(json.dumps({**claims, "chosen": {"ml100k": {
        "Full": "drop0", "RecMem": "drop0"}}}))
    assert cross_device_comparisons(tmp_path) == []
    run("RecMem", "drop0", 1, "cuda:0 NVIDIA H200")  # now the chosen arms cross devices
    found = cross_device_comparisons(tmp_path)
    assert len(found) == 1 and found[0].startswith("recmem_long: ml100k_recmem_minus_full@10")
