"""Guard: no test compares floats loaded from a stored fixture file bit for bit.

A fixture written on one CPU holds that CPU's rounding; another CPU (another vector path, another thread
count) computes the same floats up to about an ulp. So a test that compares what it computes with a stored
fixture by ``torch.equal``, ``np.array_equal`` or ``==`` passes only on the machine that wrote the fixture
(issue 33). Such comparisons must use a stated tolerance (``torch.testing.assert_close(..., rtol=, atol=)``,
``np.testing.assert_allclose``, ``pytest.approx``). Exact comparison stays right when both sides come from
the same process (a file the test itself wrote under ``tmp_path``, two models run here).

The scan reads every ``tests/**/*.py`` with :mod:`ast`:

* **sources**: a call of ``torch.load``, ``np.load``/``np.loadtxt``/``np.genfromtxt``, ``json.load(s)`` or
  ``pickle.load(s)`` whose argument names a *stored* file: an expression that mentions ``__file__`` or a
  "fixture" (a string or a name), module-level names being followed to their definitions;
* **taint**: names assigned from a source, pytest fixtures and helper functions that return one (also from
  ``conftest.py`` files above the test), and every expression built from those (items, attributes, method
  calls, arithmetic; a file handle opened on a stored file), except values that are no floats:
  ``len``/``set``/``type``/``isinstance``/``str``/``int`` of them, ``.keys()``, ``.shape``, ``.dtype``,
  ``.ndim``, ``.device``, ``.numel()``, ``.size()``;
* **findings**: ``torch.equal``, ``np.array_equal``/``np.array_equiv``, ``np.testing.assert_array_equal``/
  ``assert_equal``, ``assert_close``/``assert_allclose`` with zero tolerances, and ``==``/``!=`` (unless one
  side is ``pytest.approx``), with a tainted operand.

A comparison that is exact on purpose (e.g. the digest of an all-zero tensor, the same bytes everywhere) is
allowed by a comment on its line: ``# float-fixture-ok: <why>`` (the reason is required).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PRAGMA = "# float-fixture-ok:"
#: prefix of a scope's names that hold a file handle opened on a stored file (no identifier has a colon)
HANDLE = "open:"

#: loader calls, by the last two parts of their dotted name (``np.load`` and ``numpy.load`` alike)
LOADERS = {("torch", "load"), ("np", "load"), ("numpy", "load"), ("np", "loadtxt"), ("numpy", "loadtxt"),
           ("np", "genfromtxt"), ("numpy", "genfromtxt"), ("json", "load"), ("json", "loads"),
           ("pickle", "load"), ("pickle", "loads")}
#: calls and attributes whose value is no float even when their argument is (names, sizes, types)
BREAK_CALLS = {"len", "set", "frozenset", "type", "isinstance", "str", "repr", "int", "bool", "hash", "id",
               "callable", "hasattr"}
BREAK_METHODS = {"keys", "numel", "size", "dim", "is_floating_point", "startswith", "endswith"}
BREAK_ATTRS = {"shape", "dtype", "ndim", "device", "names", "is_cuda", "requires_grad"}
#: exact comparisons, by the last part of the dotted name
EXACT_CALLS = {"equal", "array_equal", "array_equiv", "assert_array_equal", "assert_equal"}
TOLERANCE_CALLS = {"assert_close", "assert_allclose", "allclose", "isclose"}


@dataclass(frozen=True)
class Finding:
    """One exact comparison of a stored float fixture: where, and what."""

    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return (f"{self.path}:{self.line}: {self.text} compares a stored fixture file's floats exactly; use "
                f"torch.testing.assert_close(..., rtol=, atol=) at a stated tolerance, or mark an exact "
                f"comparison that is CPU-independent with '{PRAGMA} <why>'")


def _dotted(node: ast.AST) -> tuple[str, ...]:
    """``np.testing.assert_equal`` -> ``("np", "testing", "assert_equal")``; () if not a plain dotted name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return (node.id, *reversed(parts))
    return ()


def _is_approx(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _dotted(node.func)[-1:] == ("approx",)


def _zero_tolerance(call: ast.Call) -> bool:
    """``assert_close(a, b, rtol=0, atol=0)``: a tolerance call that is exact after all."""
    given = {k.arg: k.value for k in call.keywords if k.arg in ("rtol", "atol")}
    return len(given) == 2 and all(isinstance(v, ast.Constant) and v.value == 0 for v in given.values())


@dataclass
class _Module:
    """Taint facts of one module (plus the fixtures its conftest files provide)."""

    assigns: dict[str, list[ast.expr]] = field(default_factory=dict)  # module-level name -> its values
    tainted_names: set[str] = field(default_factory=set)  # module-level names holding fixture data
    tainted_funcs: set[str] = field(default_factory=set)  # helpers and pytest fixtures returning it


class _Scanner:
    """Finds exact comparisons with stored float fixtures in one module's source."""

    def __init__(self, source: str, path: str, inherited_fixtures: Iterable[str] = ()) -> None:
        self.path = path
        self.lines = source.splitlines()
        self.tree = ast.parse(source)
        self.mod = _Module()
        self.mod.tainted_funcs.update(inherited_fixtures)
        for node in self.tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for name in _target_names(targets):
                    self.mod.assigns.setdefault(name, []).append(node.value)
        self._propagate()

    # ------------------------------------------------------------------ sources
    def _stored_path(self, node: ast.AST, local: set[str], seen: frozenset[str] = frozenset()) -> bool:
        """Whether an expression names a stored file: mentions ``__file__`` or a fixture, or is a handle
        opened on one (``local`` holds the scope's handles as ``HANDLE + name``)."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                if sub.id == "__file__" or "fixture" in sub.id.lower() or HANDLE + sub.id in local:
                    return True
                if sub.id in self.mod.assigns and sub.id not in seen:
                    if any(self._stored_path(v, set(), seen | {sub.id}) for v in self.mod.assigns[sub.id]):
                        return True
            elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                if "fixture" in sub.value.lower():
                    return True
        return False

    def _is_source(self, call: ast.Call, local: set[str]) -> bool:
        if _dotted(call.func)[-2:] not in LOADERS:
            return False
        return any(self._stored_path(a, local) for a in [*call.args, *(k.value for k in call.keywords)])

    def _opens_stored_file(self, node: ast.AST, local: set[str]) -> bool:
        """``open(<stored path>)`` or ``<stored path>.open()``."""
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name == "open" and self._stored_path(node, local)

    # ------------------------------------------------------------------ taint
    def tainted(self, node: ast.AST | None, local: set[str]) -> bool:
        """Whether an expression carries fixture data (``local``: the tainted names of the scope)."""
        if node is None:
            return False
        if isinstance(node, ast.Call):
            if self._is_source(node, local):
                return True
            name = _dotted(node.func)
            if isinstance(node.func, ast.Name) and node.func.id in BREAK_CALLS:
                return False
            if isinstance(node.func, ast.Attribute) and node.func.attr in BREAK_METHODS:
                return False
            if len(name) == 1 and name[0] in self.mod.tainted_funcs and name[0] not in local:
                return True
            receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
            return self.tainted(receiver, local) or any(
                self.tainted(a, local) for a in [*node.args, *(k.value for k in node.keywords)])
        if isinstance(node, ast.Attribute):
            return node.attr not in BREAK_ATTRS and self.tainted(node.value, local)
        if isinstance(node, ast.Name):
            return node.id in local or node.id in self.mod.tainted_names
        if isinstance(node, (ast.Lambda, ast.Constant)):
            return False
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner = set(local)
            for gen in node.generators:
                if self.tainted(gen.iter, inner):
                    inner.update(_target_names([gen.target]))
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            return any(self.tainted(p, inner) for p in parts)
        return any(self.tainted(child, local) for child in ast.iter_child_nodes(node)
                   if isinstance(child, ast.expr))

    def _scope_taint(self, func: ast.FunctionDef | ast.AsyncFunctionDef, outer: set[str] | None = None,
                     ) -> set[str]:
        """Tainted local names of a function: fixture parameters, tainted names of the enclosing function
        (``outer``, unless a parameter shadows them) and names assigned from tainted values."""
        params = {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}
        local = {a for a in params if a in self.mod.tainted_funcs} | (set(outer or ()) - params)
        changed = True
        while changed:  # assignments may come in any order (loops); iterate to a fixed point
            changed = False
            for node in _own_nodes(func):
                names: list[str] = []
                if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if self._opens_stored_file(node.value, local):
                        names = [HANDLE + n for n in _target_names(targets)]
                    elif self.tainted(node.value, local):
                        names = _target_names(targets)
                elif isinstance(node, (ast.For, ast.AsyncFor)) and self.tainted(node.iter, local):
                    names = _target_names([node.target])
                elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                    if self._opens_stored_file(node.context_expr, local):
                        names = [HANDLE + n for n in _target_names([node.optional_vars])]
                    elif self.tainted(node.context_expr, local):
                        names = _target_names([node.optional_vars])
                elif isinstance(node, ast.NamedExpr) and self.tainted(node.value, local):
                    names = [node.target.id]
                new = set(names) - local
                if new:
                    local |= new
                    changed = True
        return local

    def _returns_taint(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        local = self._scope_taint(func)
        return any(isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom)) and self.tainted(n.value, local)
                   for n in _own_nodes(func))

    def _propagate(self) -> None:
        funcs = [n for n in ast.walk(self.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        changed = True
        while changed:
            changed = False
            for name, values in self.mod.assigns.items():
                if name not in self.mod.tainted_names and any(self.tainted(v, set()) for v in values):
                    self.mod.tainted_names.add(name)
                    changed = True
            for func in funcs:
                if func.name not in self.mod.tainted_funcs and self._returns_taint(func):
                    self.mod.tainted_funcs.add(func.name)
                    changed = True

    # ------------------------------------------------------------------ findings
    def findings(self) -> list[Finding]:
        """Every exact comparison with a tainted operand that no pragma allows."""
        out: list[Finding] = []
        source = "\n".join(self.lines)
        scopes: list[tuple[ast.AST, set[str]]] = [(self.tree, set())]
        while scopes:
            scope, local = scopes.pop()
            for node in _own_nodes(scope):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    scopes.append((node, self._scope_taint(node, local)))
                elif isinstance(node, ast.ClassDef):
                    scopes.append((node, set()))
                elif self._exact_comparison(node, local) and not self._allowed(node):
                    text = ast.get_source_segment(source, node) or type(node).__name__
                    out.append(Finding(self.path, node.lineno, text))
        return sorted(set(out), key=lambda f: (f.path, f.line))

    def _exact_comparison(self, node: ast.AST, local: set[str]) -> bool:
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, operands, operands[1:]):
                if isinstance(op, (ast.Eq, ast.NotEq)) and not (_is_approx(left) or _is_approx(right)):
                    if self.tainted(left, local) or self.tainted(right, local):
                        return True
            return False
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if not (name in EXACT_CALLS or (name in TOLERANCE_CALLS and _zero_tolerance(node))):
                return False
            receiver = [func.value] if isinstance(func, ast.Attribute) else []  # tensor.equal(other)
            return any(self.tainted(a, local) for a in [*receiver, *node.args[:2]])
        return False

    def _allowed(self, node: ast.AST) -> bool:
        last = getattr(node, "end_lineno", None) or node.lineno
        for line in self.lines[node.lineno - 1 : last]:
            if PRAGMA in line and line.split(PRAGMA, 1)[1].strip():
                return True
        return False


def _target_names(targets: Iterable[ast.AST]) -> list[str]:
    names: list[str] = []
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                names.append(sub.id)
    return names


def _own_nodes(root: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a scope, without those of the functions and classes nested in it."""
    stack = list(ast.iter_child_nodes(root))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def scan_source(source: str, path: str = "<snippet>", inherited_fixtures: Iterable[str] = (),
                ) -> list[Finding]:
    """Exact comparisons of stored float fixtures in one module's source."""
    return _Scanner(source, path, inherited_fixtures).findings()


def _conftest_fixtures(path: Path, root: Path) -> set[str]:
    """Fixtures returning stored-file data in the ``conftest.py`` files from ``root`` down to ``path``."""
    names: set[str] = set()
    for folder in [path.parent, *path.parent.parents]:
        conftest = folder / "conftest.py"
        if conftest.is_file() and conftest != path:
            names |= _Scanner(conftest.read_text(encoding="utf-8"), str(conftest)).mod.tainted_funcs
        if folder == root:
            break
    return names


def scan_tree(root: Path = TESTS) -> list[Finding]:
    """Exact comparisons of stored float fixtures in every test module under ``root``."""
    found: list[Finding] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        found += scan_source(path.read_text(encoding="utf-8"), rel, _conftest_fixtures(path, root))
    return found


# ---------------------------------------------------------------------- the guard itself
def test_no_test_compares_a_stored_float_fixture_exactly() -> None:
    found = scan_tree()
    assert not found, "\n".join(map(str, found))


# ---------------------------------------------------------------------- the guard can fail
BAD = {
    "pytest fixture, torch.equal": '''
from pathlib import Path
import pytest, torch
FIXTURE = Path(__file__).parent / "fixtures" / "ref.pt"

@pytest.fixture
def ref():
    return torch.load(FIXTURE, weights_only=True)

def test_scores(ref):
    case = ref["model"]
    assert torch.equal(compute(), case["scores"])
''',
    "module constant, == on a loaded array": '''
import numpy as np
from pathlib import Path
REF = np.load(Path(__file__).with_name("expected.npy"))

def test_it():
    assert (run() == REF).all()
''',
    "helper returning json floats, == on a value": '''
import json
from pathlib import Path
HERE = Path(__file__).parent

def _expected():
    with open(HERE / "fixtures" / "metrics.json") as fh:
        return json.load(fh)

def test_metrics():
    expected = _expected()
    for key, value in expected.items():
        assert metrics()[key] == value
''',
    "np.array_equal on a loaded file in the test": '''
import numpy as np
def test_it():
    stored = np.load("tests/fixtures/weights.npy")
    assert np.array_equal(stored, train())
''',
    "digest equality (bit-exact by hashing)": '''
import torch
from pathlib import Path
def test_digests():
    legacy = torch.load(Path(__file__).parent / "fixtures" / "legacy.pt")
    assert {k: digest(v) for k, v in model().state_dict().items()} == legacy["init"]
''',
    "assert_close with zero tolerance": '''
import torch
FIXTURE_PATH = "fixtures/out.pt"
def test_it():
    torch.testing.assert_close(run(), torch.load(FIXTURE_PATH), rtol=0, atol=0)
''',
    "a tensor's own .equal, inside a nested helper": '''
import torch
from pathlib import Path
STORED = Path(__file__).parent / "data" / "ref.pt"
def test_nested():
    ref = torch.load(STORED)
    def check(out):
        assert ref["w"].equal(out)
    check(run())
''',
}

GOOD = {
    "a tolerance": '''
import torch, pytest
from pathlib import Path
FIXTURE = Path(__file__).parent / "fixtures" / "ref.pt"

@pytest.fixture
def ref():
    return torch.load(FIXTURE, weights_only=True)

def test_scores(ref):
    torch.testing.assert_close(compute(), ref["scores"], rtol=1e-5, atol=1e-5)
    assert ref["loss"] == pytest.approx(loss(), abs=1e-6)
    assert set(ref) == {"scores", "loss"} and ref["scores"].shape == (3, 41) and len(ref) == 2
''',
    "a file written by the same process": '''
import json, torch
def test_round_trip(tmp_path):
    torch.save(model.state_dict(), tmp_path / "m.pt")
    assert torch.equal(torch.load(tmp_path / "m.pt")["w"], model.w)
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": 0.5}
''',
    "an exact comparison marked with its reason": '''
import torch
from pathlib import Path
def test_zeros():
    legacy = torch.load(Path(__file__).parent / "fixtures" / "legacy.pt")
    assert legacy["init"]["t"] == digest(torch.zeros(3))  # float-fixture-ok: zeros: the same bytes anywhere
''',
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_the_guard_flags_a_known_bad_comparison(case: str) -> None:
    found = scan_source(BAD[case], f"bad_{case}.py")
    assert found, f"the guard missed: {case}"
    assert "use torch.testing.assert_close" in str(found[0]) and str(found[0]).startswith(f"bad_{case}.py:")


@pytest.mark.parametrize("case", sorted(GOOD))
def test_the_guard_passes_tolerant_and_same_process_comparisons(case: str) -> None:
    assert scan_source(GOOD[case]) == []


def test_a_pragma_needs_a_reason() -> None:
    bare = GOOD["an exact comparison marked with its reason"].split("# float-fixture-ok:")[0] + PRAGMA + "\n"
    assert len(scan_source(bare)) == 1


def test_a_conftest_fixture_taints_the_tests_that_use_it(tmp_path: Path) -> None:
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "conftest.py").write_text(
        "import pytest, torch\nfrom pathlib import Path\n\n@pytest.fixture\ndef stored():\n"
        "    return torch.load(Path(__file__).parent / 'fixtures' / 'x.pt')\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "test_x.py").write_text(
        "import torch\n\ndef test_x(stored):\n    assert torch.equal(stored['w'], run())\n")
    found = scan_tree(tmp_path)
    assert [(Path(f.path).name, f.line) for f in found] == [("test_x.py", 4)]
