"""Run the partial-identification tests single-threaded.

Their linear algebra and k-means calls are small; on shared CI cores BLAS and
OpenMP thread pools only add contention (k-means on 2,400 points measured
~4 s multi-threaded under load versus ~0.1 s on one thread).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True)
def _single_thread() -> Iterator[None]:
    with threadpool_limits(limits=1):
        yield
