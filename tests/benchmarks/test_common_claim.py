"""The run claim that keeps parallel benchmark streams from training the same run twice."""

from __future__ import annotations

import os
import subprocess
import sys

from benchmarks.common import claim


def test_a_held_claim_is_refused_and_released_on_exit(tmp_path):
    path = tmp_path / "run.claim"
    with claim(path) as mine:
        assert mine and path.read_text() == str(os.getpid())
        # another live process holds it: simulate with this test's parent process
        path.write_text(str(os.getppid()))
        with claim(path) as second:
            assert not second
        path.write_text(str(os.getpid()))
    assert not path.exists()


def test_a_claim_left_by_a_dead_process_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    path = tmp_path / "run.claim"
    path.write_text(dead.stdout.strip())
    with claim(path) as mine:
        assert mine
    assert not path.exists()
