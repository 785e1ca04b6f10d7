"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True)
def _one_thread_per_worker() -> Iterator[None]:
    """Every test runs on one thread (torch, BLAS, OpenMP, hence FAISS too).

    The suite runs as ``pytest -n 2`` on 2 cores, and the tests' tensors are small. Extra threads only
    spin at OpenMP barriers against the other worker: measured 7x slower for BLAS-heavy causal tests,
    an IVF-PQ build at 0.3 s on one thread and 7-20 s on two. Subprocess tests (DDP, kill/resume) are
    unaffected.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield
    torch.set_num_threads(before)


@pytest.fixture()
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in an empty folder, without a traceback override from the caller's environment."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RECFRAME_TRACEBACK", raising=False)
    return tmp_path


@pytest.fixture(scope="session")
def ml100k_root() -> Path:
    """A prepared ML-100K root ($RECFRAME_DATA or datasets/), preparing it if needed.

    Only tests marked ``slow`` use it: preparing may download (`make test-slow`).
    """
    from recframe.data import catalog

    root = catalog.default_root().resolve()
    catalog.prepare("ml-100k", root)
    return root
