"""Part (a) of the GPU check: find the tests that skip without CUDA (by reading ``tests/``) and run them."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from benchmarks.gpu.support import ROOT, Emit, left

SKIP_MARKERS = ("cuda", "get_num_gpus", "gpu")


def _skip_condition_text(node: ast.expr, source: str) -> str | None:
    """The condition source of a ``pytest.mark.skipif(...)`` decorator or mark, else ``None``."""
    if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("mark.skipif"):
        return ast.get_source_segment(source, node) or ast.unparse(node)
    return None


def _mentions_gpu(text: str) -> bool:
    low = text.lower()
    return any(marker in low for marker in SKIP_MARKERS)


def cuda_only_tests(tests: Path) -> list[str]:
    """Node ids (``tests/x.py::test_y``) of tests marked to skip without CUDA or FAISS GPUs.

    A function or class decorated with ``pytest.mark.skipif(...)`` whose condition names CUDA/GPUs, or a
    whole module whose ``pytestmark`` is such a mark."""
    found: list[str] = []
    for path in sorted(tests.rglob("test_*.py")):
        source = path.read_text(encoding="utf-8")
        if "skipif" not in source:
            continue
        rel = path.relative_to(tests.parent).as_posix()
        tree = ast.parse(source)
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark"
                                                    for t in node.targets):
                marks = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
                if any(_mentions_gpu(_skip_condition_text(m, source) or "") for m in marks):
                    found.append(rel)
                    break
        else:
            for node in tree.body:
                candidates = [(node, node.name)] if isinstance(
                    node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else []
                if isinstance(node, ast.ClassDef):
                    candidates += [(m, f"{node.name}::{m.name}") for m in node.body
                                   if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
                for item, name in candidates:
                    if any(_mentions_gpu(_skip_condition_text(d, source) or "") for d in item.decorator_list):
                        found.append(f"{rel}::{name}")
    return found


def part_cuda_tests(args: argparse.Namespace, deadline: float, emit: Emit) -> None:
    nodes = cuda_only_tests(ROOT / "tests")
    emit({"kind": "discovered", "tests": nodes})
    if not nodes:
        emit({"kind": "note", "note": "no CUDA-only test found under tests/"})
        return
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-rA",
               f"--junitxml={junit}", *nodes]
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                              timeout=max(1.0, left(deadline) - 2.0))
        seconds = time.perf_counter() - start
        if not junit.is_file():
            tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
            raise RuntimeError(f"pytest wrote no report (exit {done.returncode}): {' | '.join(tail)}")
        for case in ET.parse(junit).getroot().iter("testcase"):
            outcome, message = "passed", ""
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                    message = (child.get("message") or child.text or "").strip().splitlines()[0][:300] \
                        if (child.get("message") or child.text) else ""
            emit({"kind": "test", "test": f"{case.get('classname')}::{case.get('name')}", "outcome": outcome,
                  "message": message, "seconds": float(case.get("time") or 0.0)})
    emit({"kind": "pytest", "exit_code": done.returncode, "seconds": seconds})
