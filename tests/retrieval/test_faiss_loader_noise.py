"""FAISS's loader notes about optional builds this installation lacks are not shown (issue 33, item 6)."""

from __future__ import annotations

import logging
import subprocess
import sys

from recframe.retrieval.faiss_backend import _DropLoaderFallbacks

_IMPORT_WITH_INFO_LOGGING = (
    "import logging; logging.basicConfig(level=logging.INFO, format='%(name)s %(message)s'); "
    "import recframe.retrieval.faiss_backend as fb; print(fb.faiss.__version__)"
)


def _record(level: int, msg: str) -> logging.LogRecord:
    return logging.LogRecord("faiss.loader", level, __file__, 1, msg, None, None)


def test_loader_fallback_notes_are_dropped_and_problems_kept() -> None:
    keep = _DropLoaderFallbacks().filter
    assert not keep(_record(logging.INFO, "Could not load library with AVX512 support due to:\nNoModule"))
    assert not keep(_record(logging.INFO, "Loading faiss with AVX2 support."))
    assert keep(_record(logging.INFO, "Successfully loaded faiss."))
    assert keep(_record(logging.WARNING, "Could not load library with GPU support"))
    assert keep(_record(logging.ERROR, "FAISS_OPT_LEVEL is not valid"))


def test_importing_the_backend_under_info_logging_prints_no_loader_noise() -> None:
    done = subprocess.run([sys.executable, "-c", _IMPORT_WITH_INFO_LOGGING], capture_output=True, text=True,
                          timeout=300, check=True)
    assert "Could not load library" not in done.stderr, done.stderr
    assert "Loading faiss" not in done.stderr
    assert done.stdout.strip()  # faiss loaded
