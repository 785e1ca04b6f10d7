"""Run these tests with single-threaded BLAS.

The matrices here are small (at most a few thousand by a few dozen), where
multi-threaded BLAS only adds synchronisation cost, and on a loaded machine its
spinning threads made this directory ~7x slower (30 s vs 4 s wall).
"""

import pytest
from threadpoolctl import threadpool_limits


@pytest.fixture(autouse=True, scope="package")
def _single_threaded_blas():
    with threadpool_limits(limits=1, user_api="blas"):
        yield
