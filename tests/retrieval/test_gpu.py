"""The GPU branch, exercised on a CPU-only machine by faking FAISS's GPU entry points.

The fakes stand in for ``faiss.get_num_gpus``, ``StandardGpuResources``, ``index_cpu_to_gpu``,
``index_gpu_to_cpu`` and ``GpuParameterSpace``; the fake GPU index answers searches with the CPU
index it wraps but, like a real one, refuses k above FAISS's GPU limit.
"""

from __future__ import annotations

import logging
from pathlib import Path

import faiss
import numpy as np
import pytest

from recframe.retrieval import ItemIndex
from recframe.retrieval import faiss_backend as fb
from tests.retrieval.synthetic import random_items, reference_top_k


class FakeGpuIndex:
    def __init__(self, cpu: faiss.Index) -> None:
        self.cpu, self.d, self.ntotal = cpu, cpu.d, cpu.ntotal
        self.ks: list[int] = []

    def search(self, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        assert k <= fb.GPU_MAX_K, "a FAISS GPU index refuses k > 2048"
        self.ks.append(k)
        return self.cpu.search(x, k)


class FakeGpu:
    """Records what the code asked the fake GPU FAISS to do."""

    def __init__(self) -> None:
        self.moved: list[FakeGpuIndex] = []
        self.params: list[tuple[str, int]] = []
        self.to_cpu = 0

    def install(self, mp: pytest.MonkeyPatch, n_gpus: int = 1, refuse_hnsw: bool = True) -> FakeGpu:
        fake = self

        class Resources:
            pass

        class ParamSpace:
            def set_index_parameter(self, index: FakeGpuIndex, name: str, value: int) -> None:
                assert isinstance(index, FakeGpuIndex), "GPU knobs must be set on the GPU index"
                faiss.ParameterSpace().set_index_parameter(index.cpu, name, value)
                fake.params.append((name, value))

        def cpu_to_gpu(res: Resources, device: int, index: faiss.Index) -> FakeGpuIndex:
            assert isinstance(res, Resources) and device == 0
            if refuse_hnsw and isinstance(faiss.downcast_index(index), faiss.IndexHNSW):
                raise RuntimeError("Error in index_cpu_to_gpu at gpu/GpuCloner.cpp:1: could not clone index")
            fake.moved.append(FakeGpuIndex(faiss.clone_index(index)))
            return fake.moved[-1]

        def gpu_to_cpu(index: FakeGpuIndex) -> faiss.Index:
            fake.to_cpu += 1
            return faiss.clone_index(index.cpu)

        mp.setattr(faiss, "get_num_gpus", lambda: n_gpus)
        mp.setattr(faiss, "StandardGpuResources", Resources, raising=False)
        mp.setattr(faiss, "index_cpu_to_gpu", cpu_to_gpu, raising=False)
        mp.setattr(faiss, "index_gpu_to_cpu", gpu_to_cpu, raising=False)
        mp.setattr(faiss, "GpuParameterSpace", ParamSpace, raising=False)
        return self


def test_gpu_index_is_used_when_faiss_sees_a_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    gpu = FakeGpu().install(monkeypatch)
    items = random_items(300, 8, seed=1)
    index = ItemIndex.from_embeddings(items, factory="IVF8,Flat", nprobe=8)
    assert index.on_gpu and len(gpu.moved) == 1 and "device=gpu" in repr(index)
    assert ("nprobe", 8) in gpu.params  # knob re-applied on the GPU index
    q = np.random.default_rng(2).standard_normal((6, 8)).astype(np.float32)
    res = index.search(q, 5, exclude=[[1, 2]] * 6)
    assert gpu.moved[0].ks  # the search went through the GPU index
    np.testing.assert_array_equal(res.items, reference_top_k(q, items, 5, [np.array([1, 2])] * 6)[0])
    index.set_search_params(nprobe=4)
    assert gpu.params[-1] == ("nprobe", 4)

    index.save(tmp_path / "best.ckpt")  # moved to CPU before serialising
    assert gpu.to_cpu == 1
    monkeypatch.undo()
    loaded = ItemIndex.load(tmp_path / "best.ckpt")
    assert not loaded.on_gpu and loaded.nprobe == 4


def test_gpu_over_fetch_stops_at_the_gpu_k_limit(monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    FakeGpu().install(monkeypatch)
    items = random_items(3000, 4, seed=3)
    index = ItemIndex.from_embeddings(items)
    assert index.on_gpu and not index._exact
    q = np.ones((2, 4), np.float32)
    order = reference_top_k(q, items, 3000)[0][0]
    seen = [order[:2100], np.empty(0, np.int64)]  # row 0 needs more than 2048 candidates
    with caplog.at_level(logging.WARNING, logger="recframe.retrieval"):
        res = index.search(q, 10, exclude=seen)
    assert res.counts[0] == 0 and res.counts[1] == 10  # short, and said so, rather than wrong
    assert "1 of 2 query rows have fewer than k=10" in caplog.text


def test_no_gpu_falls_back_to_cpu_with_an_info_note(monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    FakeGpu().install(monkeypatch, n_gpus=0)
    with caplog.at_level(logging.INFO, logger="recframe.retrieval"):
        index = ItemIndex.from_embeddings(random_items(50, 8))
    assert not index.on_gpu
    assert any(r.levelno == logging.INFO and "FAISS sees no GPU; using the CPU index" in r.getMessage()
               for r in caplog.records)
    with pytest.raises(ValueError, match="use_gpu=True but FAISS sees no GPU"):
        ItemIndex.from_embeddings(random_items(50, 8), use_gpu=True)


def test_cpu_only_faiss_build_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    if hasattr(faiss, "index_cpu_to_gpu"):
        pytest.skip("this FAISS build has GPU support")
    with caplog.at_level(logging.INFO, logger="recframe.retrieval"):
        assert not ItemIndex.from_embeddings(random_items(20, 4)).on_gpu
    assert "this FAISS build has no GPU support" in caplog.text


def test_index_without_gpu_version_stays_on_cpu(monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    gpu = FakeGpu().install(monkeypatch)
    with caplog.at_level(logging.INFO, logger="recframe.retrieval"):
        index = ItemIndex.from_embeddings(random_items(200, 8), factory="HNSW8", ef_search=20)
    assert not index.on_gpu and not gpu.moved and index.ef_search == 20
    assert "no GPU version of this index (could not clone index)" in caplog.text
    with pytest.raises(ValueError, match="cannot put factory='HNSW8' on the GPU"):
        ItemIndex.from_embeddings(random_items(200, 8), factory="HNSW8", use_gpu=True)
    assert not ItemIndex.from_embeddings(random_items(200, 8), use_gpu=False).on_gpu
