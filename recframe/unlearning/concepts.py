"""Concepts: predicates over item features that define the items to forget.

A concept is written in a small predicate language (a YAML string in the unlearning config)::

    genre == "Horror"
    year < 1970
    genre in ["Horror", "Thriller"]
    genre == "Horror" and not (year >= 1990 or title == "Scream")

Grammar (keywords are lower case; ``and`` binds tighter than ``or``; parentheses group)::

    expr    := and_expr ("or" and_expr)*
    and_expr:= not_expr ("and" not_expr)*
    not_expr:= "not" not_expr | "(" expr ")" | FIELD OP VALUE
    OP      := == | != | < | <= | > | >= | in
    VALUE   := "string" | 'string' | number | [VALUE, ...]

Fields (read from :class:`~recframe.data.interactions.ItemFeatures`, row ``i`` = dense item ``i``):

* ``genre``: the item's ``categories`` list. ``genre == "X"`` holds when ``X`` is one of its genres,
  ``genre != "X"`` when it is not, ``genre in [..]`` when any genre is listed; ``<``/``>`` are refused.
* ``year``: the release year (``0`` = unknown). A comparison on an unknown year is **false** (an item of
  unknown year is neither before nor after 1970), so ``year < 1970`` never catches undated items; ``!=`` is
  the negation of ``==`` and therefore true for them.
* ``title``: the title string, compared exactly (``==``, ``!=``, ``in``).

Genre strings are compared case-sensitively, as the data stores them. An unknown field, a bad operator for a
field or a syntax error raises :class:`ConceptError` (a :class:`~recframe.data.interactions.DataError`, so the
CLI prints one line) naming the field or position, the known fields and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from recframe.data.interactions import DataError, ItemFeatures

__all__ = ["FIELDS", "Concept", "ConceptError", "parse_concept"]

#: the fields a concept may name, and what each reads
FIELDS: dict[str, str] = {
    "genre": "the item's genres (ItemFeatures.categories): == / != / in test membership",
    "title": "the item's title (exact string)",
    "year": "the release year (0 = unknown; any comparison on an unknown year is false, except !=)",
}
_OPS = ("==", "!=", "<=", ">=", "<", ">", "in")
_TOKEN = re.compile(
    r"""\s*(?:(?P<str>"[^"]*"|'[^']*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|<=|>=|<|>)"""
    r"""|(?P<punct>[()\[\],])|(?P<word>[A-Za-z_][A-Za-z0-9_]*))"""
)


class ConceptError(DataError):
    """A concept string that cannot be parsed or names an unknown field (one-line user error)."""


@dataclass(frozen=True)
class _Cmp:
    field: str
    op: str
    value: Any


@dataclass(frozen=True)
class _Node:
    kind: str  # "and", "or", "not"
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Concept:
    """A parsed concept (:func:`parse_concept`); :meth:`mask` evaluates it on item features."""

    text: str
    tree: Any

    def mask(self, features: ItemFeatures | None, n_items: int | None = None) -> np.ndarray:
        """Boolean ``[n_items + 1]``: the items the concept holds for (the forget items); row 0 is False.

        Raises:
            ConceptError: the features lack a field the concept reads (e.g. no years in this dataset).
        """
        if features is None:
            raise ConceptError(
                f"concept {self.text!r}: the dataset has no item features (titles, genres, "
                "years); concepts need a dataset with item features."
            )
        n = features._length() if n_items is None else n_items + 1
        out = np.asarray(_evaluate(self.tree, features, n, self.text), dtype=bool).copy()
        out[0] = False
        return out

    def fields(self) -> set[str]:
        """The fields the concept reads."""
        found: set[str] = set()

        def walk(node: Any) -> None:
            if isinstance(node, _Cmp):
                found.add(node.field)
            else:
                for arg in node.args:
                    walk(arg)

        walk(self.tree)
        return found

    def __str__(self) -> str:
        return self.text


def parse_concept(text: str, where: str = "concept") -> Concept:
    """Parse ``text`` (grammar: module docstring) into a :class:`Concept`.

    ``where`` names the config key in error messages (e.g. ``"concept"``).

    Raises:
        ConceptError: a syntax error (with the position), an unknown field (naming the field, the known
            fields and the fix) or an operator the field does not take.
    """
    if not isinstance(text, str) or not text.strip():
        raise ConceptError(
            f'{where}: give a predicate over item features, e.g. genre == "Horror" or '
            f"year < 1970; got {text!r}."
        )
    tokens = _tokenize(text, where)
    parser = _Parser(tokens, text, where)
    tree = parser.expr()
    if parser.pos != len(tokens):
        parser.fail(f"unexpected {tokens[parser.pos][1]!r}")
    return Concept(text=text.strip(), tree=tree)


# --------------------------------------------------------------------------- parsing
def _tokenize(text: str, where: str) -> list[tuple[str, Any, int]]:
    out: list[tuple[str, Any, int]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            col = pos + len(text[pos:]) - len(text[pos:].lstrip())
            raise ConceptError(
                f"{where}: cannot read {text[col : col + 12]!r} at character {col + 1} of "
                f'{text!r}; write e.g. genre == "Horror" and year < 1970.'
            )
        kind = m.lastgroup
        raw = m.group(kind)
        start = m.start(kind)
        if kind == "str":
            out.append(("value", raw[1:-1], start))
        elif kind == "num":
            out.append(("value", float(raw) if "." in raw else int(raw), start))
        elif kind == "word" and raw in ("and", "or", "not", "in"):
            out.append((raw, raw, start))
        else:
            out.append((kind, raw, start))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, tokens: list[tuple[str, Any, int]], text: str, where: str) -> None:
        self.tokens, self.text, self.where, self.pos = tokens, text, where, 0

    def fail(self, what: str) -> None:
        at = self.tokens[self.pos][2] + 1 if self.pos < len(self.tokens) else len(self.text) + 1
        raise ConceptError(
            f"{self.where}: {what} at character {at} of {self.text!r}; write comparisons "
            'FIELD OP VALUE joined by and/or/not, e.g. genre == "Horror" or year < 1970.'
        )

    def peek(self) -> tuple[str, Any, int] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, kind: str, value: Any = None) -> Any:
        tok = self.peek()
        if tok is None or tok[0] != kind or (value is not None and tok[1] != value):
            self.fail(f"expected {value or kind}" + (f", got {tok[1]!r}" if tok else ", got the end"))
        self.pos += 1
        return tok[1]

    def expr(self) -> Any:
        args = [self.and_expr()]
        while (tok := self.peek()) is not None and tok[0] == "or":
            self.pos += 1
            args.append(self.and_expr())
        return args[0] if len(args) == 1 else _Node("or", tuple(args))

    def and_expr(self) -> Any:
        args = [self.not_expr()]
        while (tok := self.peek()) is not None and tok[0] == "and":
            self.pos += 1
            args.append(self.not_expr())
        return args[0] if len(args) == 1 else _Node("and", tuple(args))

    def not_expr(self) -> Any:
        tok = self.peek()
        if tok is None:
            self.fail("expected a comparison")
        if tok[0] == "not":
            self.pos += 1
            return _Node("not", (self.not_expr(),))
        if tok[0] == "punct" and tok[1] == "(":
            self.pos += 1
            inner = self.expr()
            self.take("punct", ")")
            return inner
        return self.comparison()

    def comparison(self) -> _Cmp:
        tok = self.peek()
        if tok[0] != "word":
            self.fail(f"expected a field name ({', '.join(FIELDS)}), got {tok[1]!r}")
        field = tok[1]
        if field not in FIELDS:
            raise ConceptError(
                f"{self.where}: unknown field {field!r} in {self.text!r}; known fields: "
                f'{", ".join(sorted(FIELDS))}. Fix: name one of them, e.g. genre == "Horror" or year < 1970.'
            )
        self.pos += 1
        tok = self.peek()
        if tok is None or tok[0] not in ("op", "in"):
            self.fail(f"expected an operator ({' '.join(_OPS)}) after {field!r}")
        op = tok[1]
        self.pos += 1
        value = self.value_list() if op == "in" else self.value()
        _check_types(field, op, value, self.text, self.where)
        return _Cmp(field, op, value)

    def value(self) -> Any:
        tok = self.peek()
        if tok is None or tok[0] != "value":
            self.fail("expected a value (a quoted string or a number)")
        self.pos += 1
        return tok[1]

    def value_list(self) -> tuple[Any, ...]:
        self.take("punct", "[")
        values = [self.value()]
        while (tok := self.peek()) is not None and tok[0] == "punct" and tok[1] == ",":
            self.pos += 1
            values.append(self.value())
        self.take("punct", "]")
        return tuple(values)


def _check_types(field: str, op: str, value: Any, text: str, where: str) -> None:
    values = value if isinstance(value, tuple) else (value,)
    if field in ("genre", "title"):
        if op in ("<", "<=", ">", ">="):
            raise ConceptError(
                f"{where}: {field} {op} ... in {text!r}: {field} takes ==, != or in, not {op}."
            )
        if not all(isinstance(v, str) for v in values):
            raise ConceptError(
                f'{where}: {field} compares with quoted strings in {text!r}, e.g. {field} == "Horror".'
            )
    elif not all(isinstance(v, int | float) for v in values):
        raise ConceptError(f"{where}: year compares with numbers in {text!r}, e.g. year < 1970.")


# --------------------------------------------------------------------------- evaluation
def _compare(op: str) -> Callable[[np.ndarray, Any], np.ndarray]:
    return {
        "==": np.equal,
        "!=": np.not_equal,
        "<": np.less,
        "<=": np.less_equal,
        ">": np.greater,
        ">=": np.greater_equal,
    }[op]


def _evaluate(node: Any, features: ItemFeatures, n: int, text: str) -> np.ndarray:
    if isinstance(node, _Node):
        parts = [_evaluate(a, features, n, text) for a in node.args]
        if node.kind == "not":
            return ~parts[0]
        out = parts[0].copy()
        for p in parts[1:]:
            out = (out & p) if node.kind == "and" else (out | p)
        return out
    field, op, value = node.field, node.op, node.value
    if field == "genre":
        if features.categories is None:
            raise ConceptError(f"concept {text!r} reads genre, but the dataset has no item genres.")
        wanted = set(value) if op == "in" else {value}
        has = np.array([bool(wanted & set(c or ())) for c in features.categories[:n]], dtype=bool)
        return ~has if op == "!=" else has
    if field == "title":
        if features.title is None:
            raise ConceptError(f"concept {text!r} reads title, but the dataset has no item titles.")
        titles = [str(t) for t in features.title[:n]]
        wanted = set(value) if op == "in" else {value}
        has = np.array([t in wanted for t in titles], dtype=bool)
        return ~has if op == "!=" else has
    if features.year is None:
        raise ConceptError(f"concept {text!r} reads year, but the dataset has no item years.")
    year = np.asarray(features.year[:n], dtype=np.int64)
    known = year != 0
    if op == "in":
        return known & np.isin(year, np.asarray(value))
    if op == "!=":
        return ~(known & (year == value))
    return known & _compare(op)(year, value)
