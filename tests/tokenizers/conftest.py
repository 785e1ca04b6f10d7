"""Fixtures of the tokenizer tests."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tokenizers.planted import planted


@pytest.fixture(scope="module")
def clusters() -> tuple[np.ndarray, np.ndarray]:
    return planted()
