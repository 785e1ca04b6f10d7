"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def ml100k_root() -> Path:
    """A prepared ML-100K root ($RECFRAME_DATA or datasets/), preparing it if needed.

    Only tests marked ``slow`` use it: preparing may download (`make test-slow`).
    """
    from recframe.data import catalog

    root = catalog.default_root().resolve()
    catalog.prepare("ml-100k", root)
    return root
