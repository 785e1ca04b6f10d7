"""A small reader and writer for the Bayesian Interchange Format (BIF) of the bnlearn repository.

Supported (everything the bnlearn ``.bif`` files use): ``network NAME { ... }`` (properties
ignored), ``variable NAME { type discrete [ N ] { s1, s2, ... }; property ...; }`` and
``probability ( V | P1, P2 ) { (p1, p2) q1, q2, ...; ...; default q1, ...; }`` or
``probability ( V ) { table q1, q2, ...; }``; ``//`` and ``/* */`` comments. A ``table`` entry for a
variable *with* parents is rejected (its value order is ambiguous between tools): write one row per
parent configuration instead. State names may contain any character other than white space and
``{}()[],;|`` (bnlearn uses names such as ``Asy/Patch``, ``<5`` and ``0-3_days``).

Rows are checked to sum to one; rows off by at most ``1e-3`` (rounding in the published files,
e.g. three values printed to 8-10 digits) are renormalised, anything worse is an error.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np

from causal_ext.unico.network import DiscreteBN

__all__ = ["parse_bif", "read_bif", "write_bif"]

_TOKEN = re.compile(r"[{}()\[\],;|]|[^\s{}()\[\],;|]+")
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
ROW_TOLERANCE = 1e-3
"""Largest deviation of a CPT row sum from one that :func:`parse_bif` silently renormalises."""


class _Tokens:
    def __init__(self, text: str) -> None:
        self.toks = _TOKEN.findall(_COMMENTS.sub(" ", text))
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def next(self) -> str:
        if self.i >= len(self.toks):
            raise ValueError("BIF text ended early (unbalanced braces or a missing ';').")
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def expect(self, want: str) -> None:
        got = self.next()
        if got != want:
            context = " ".join(self.toks[max(0, self.i - 6) : self.i + 3])
            raise ValueError(f"BIF syntax: expected {want!r} but found {got!r} near '{context}'.")

    def until(self, stop: str) -> list[str]:
        out = []
        while (tok := self.next()) != stop:
            out.append(tok)
        return out

    def skip_block(self) -> None:
        """Skip from the current '{' to its matching '}'."""
        self.expect("{")
        depth = 1
        while depth:
            tok = self.next()
            depth += tok == "{"
            depth -= tok == "}"


def _numbers(toks: list[str], where: str) -> list[float]:
    vals = [t for t in toks if t != ","]
    try:
        return [float(t) for t in vals]
    except ValueError:
        raise ValueError(f"BIF: non-numeric probability in {where}: {vals}.") from None


def parse_bif(text: str, name: str | None = None) -> DiscreteBN:
    """Parse BIF text into a :class:`DiscreteBN` (variables in file order).

    Raises:
        ValueError: a syntax error, an unknown variable or state, a missing or duplicated CPT row, or
            a row whose sum is off by more than :data:`ROW_TOLERANCE`.
    """
    tk = _Tokens(text)
    net_name = name
    states: dict[str, tuple[str, ...]] = {}
    blocks: list[tuple[str, tuple[str, ...], list[tuple[str, list[str]]]]] = []
    while (tok := tk.peek()) is not None:
        tk.next()
        if tok == "network":
            label = []
            while tk.peek() != "{":
                label.append(tk.next())
            net_name = net_name or " ".join(label).strip('"') or "network"
            tk.skip_block()
        elif tok == "variable":
            var = tk.next()
            tk.expect("{")
            while (t := tk.next()) != "}":
                if t == "type":
                    kind = tk.next()
                    if kind != "discrete":
                        raise ValueError(
                            f"BIF: variable {var!r} has type {kind!r}; only 'discrete' is supported."
                        )
                    tk.expect("[")
                    n = int(tk.next())
                    tk.expect("]")
                    tk.expect("{")
                    ss = tuple(s for s in tk.until("}") if s != ",")
                    tk.expect(";")
                    if len(ss) != n:
                        raise ValueError(
                            f"BIF: variable {var!r} declares {n} states but lists {len(ss)}: {ss}."
                        )
                    states[var] = ss
                else:  # property lines and anything else inside the block
                    tk.until(";")
            if var not in states:
                raise ValueError(f"BIF: variable {var!r} has no 'type discrete' line.")
        elif tok == "probability":
            tk.expect("(")
            head = [t for t in tk.until(")") if t != ","]
            if "|" in head:
                k = head.index("|")
                child, parents = head[:k], tuple(head[k + 1 :])
            else:
                child, parents = head, ()
            if len(child) != 1:
                raise ValueError(f"BIF: a probability block must name one variable before '|'; got {child}.")
            tk.expect("{")
            entries: list[tuple[str, list[str]]] = []
            while (t := tk.next()) != "}":
                if t == "(":
                    config = [s for s in tk.until(")") if s != ","]
                    entries.append(("(" + "\x1f".join(config), tk.until(";")))
                elif t in ("table", "default"):
                    entries.append((t, tk.until(";")))
                else:
                    tk.until(";")
            blocks.append((child[0], parents, entries))
        else:
            raise ValueError(
                f"BIF: unexpected {tok!r} at top level (expected network, variable or probability)."
            )
    parents_of: dict[str, tuple[str, ...]] = {}
    cpts: dict[str, np.ndarray] = {}
    for var, parents, entries in blocks:
        if var not in states:
            raise ValueError(f"BIF: probability for undeclared variable {var!r}.")
        if var in cpts:
            raise ValueError(f"BIF: two probability blocks for {var!r}.")
        unknown = [p for p in parents if p not in states]
        if unknown:
            raise ValueError(f"BIF: probability ( {var} | ... ) names undeclared parents {unknown}.")
        cards = tuple(len(states[p]) for p in parents)
        k = len(states[var])
        table = np.full(cards + (k,), np.nan)
        for key, toks in entries:
            vals = _numbers(toks, f"probability ( {var} ... )")
            if key == "table":
                if parents:
                    raise ValueError(
                        f"BIF: 'table' for {var!r}, which has parents {parents}, is not supported; "
                        "write one '(parent states) probabilities;' row per configuration."
                    )
                if len(vals) != k:
                    raise ValueError(f"BIF: table of {var!r} has {len(vals)} values; expected {k}.")
                table[...] = vals
            elif key == "default":
                if len(vals) != k:
                    raise ValueError(f"BIF: default row of {var!r} has {len(vals)} values; expected {k}.")
                mask = np.isnan(table[..., 0])
                table[mask] = vals
            else:
                config = key[1:].split("\x1f")
                if len(config) != len(parents):
                    raise ValueError(
                        f"BIF: row {tuple(config)} of {var!r} has {len(config)} parent states; "
                        f"expected {len(parents)} ({parents})."
                    )
                try:
                    idx = tuple(states[p].index(s) for p, s in zip(parents, config))
                except ValueError:
                    raise ValueError(
                        f"BIF: row {tuple(config)} of {var!r} names a state that its parents "
                        f"{parents} do not have."
                    ) from None
                if len(vals) != k:
                    raise ValueError(
                        f"BIF: row {tuple(config)} of {var!r} has {len(vals)} values; expected {k}."
                    )
                if not np.isnan(table[idx][0]):
                    raise ValueError(f"BIF: row {tuple(config)} of {var!r} is given twice.")
                table[idx] = vals
        if np.isnan(table).any():
            raise ValueError(f"BIF: the CPT of {var!r} misses rows (no default given).")
        sums = table.sum(axis=-1, keepdims=True)
        worst = float(np.abs(sums - 1).max())
        if worst > ROW_TOLERANCE:
            raise ValueError(
                f"BIF: a row of {var!r} sums to {1 + worst:.6f} (off by more than {ROW_TOLERANCE})."
            )
        parents_of[var] = parents
        cpts[var] = np.where(np.abs(sums - 1) > 1e-9, table / sums, table)  # exact rows stay exact
    missing = [v for v in states if v not in cpts]
    if missing:
        raise ValueError(f"BIF: no probability block for {missing}.")
    return DiscreteBN(states, parents_of, cpts, name=net_name or "network")


def read_bif(path: str | Path, name: str | None = None) -> DiscreteBN:
    """Read a ``.bif`` or ``.bif.gz`` file (gzip recognised by its magic bytes)."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return parse_bif(raw.decode("utf-8"), name or Path(path).name.split(".")[0])


def _fmt(x: float) -> str:
    return repr(float(x))


def write_bif(bn: DiscreteBN) -> str:
    """BIF text for ``bn`` (one row per parent configuration; round-trips through :func:`parse_bif`)."""
    lines = [f"network {bn.name} {{", "}"]
    for v in bn.variables:
        lines += [
            f"variable {v} {{",
            f"  type discrete [ {bn.card(v)} ] {{ {', '.join(bn.states[v])} }};",
            "}",
        ]
    for v in bn.variables:
        ps = bn.parents[v]
        t = bn.cpts[v]
        if not ps:
            lines += [f"probability ( {v} ) {{", f"  table {', '.join(_fmt(x) for x in t)};", "}"]
            continue
        lines.append(f"probability ( {v} | {', '.join(ps)} ) {{")
        for idx in np.ndindex(*t.shape[:-1]):
            config = ", ".join(bn.states[p][i] for p, i in zip(ps, idx))
            lines.append(f"  ({config}) {', '.join(_fmt(x) for x in t[idx])};")
        lines.append("}")
    return "\n".join(lines) + "\n"
