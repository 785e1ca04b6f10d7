"""UniCo data generation: sample queries, answer them exactly, filter shortcuts, render, write JSONL.

:class:`UniCoGenerator` is estimator-style: the constructor stores the settings, :meth:`~UniCoGenerator.fit`
takes the networks (random ones, bnlearn ones, textbook examples) and produces ``items_`` (kept
solutions), ``records_`` (one JSON-ready record per item and rendering, see
:mod:`causal_ext.unico.schema`), ``drops_`` (every dropped candidate and the rules that fired) and
``stats_`` (counts per type, rung, rendering and source, drop rates per type and rule).

Per network and query type the generator draws up to ``candidates_per_type`` distinct candidates
(retrying duplicates a bounded number of times). A candidate whose relevant sub-network (the
ancestral closure of the variables it mentions) has more than ``max_context_rows`` CPT rows is
skipped as too large to render (if a type keeps nothing on a network, a fallback solves more
candidates, smallest first, up to ``fallback_context_rows``); a candidate whose answer is undefined
(e.g. a positivity failure after rounding) is counted as ``undefined``; every other candidate is
solved exactly and dropped if any shortcut rule fires (:data:`causal_ext.unico.queries.RULES`); the
drop rate of a type is dropped / solved.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from causal_ext.unico.names import Glossary, glossary_for
from causal_ext.unico.network import DiscreteBN
from causal_ext.unico.queries import QUERY_TYPES, RULES, NetInfo, Solution, sample_query, solve
from causal_ext.unico.render import RENDERINGS, Renderer
from causal_ext.unico.schema import SCHEMA_VERSION

__all__ = ["Source", "UniCoGenerator", "read_jsonl", "write_jsonl"]


@dataclass(frozen=True)
class Source:
    """A network to generate from.

    Attributes:
        network: the causal network.
        kind: ``"random"``, ``"bnlearn"`` or ``"example"``.
        seed: the seed that produced a random network (``None`` otherwise).
        glossary: narrative names; default :func:`causal_ext.unico.names.glossary_for` of the network name.
    """

    network: DiscreteBN
    kind: str = "random"
    seed: int | None = None
    glossary: Glossary | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("random", "bnlearn", "example"):
            raise ValueError(f"Source.kind must be 'random', 'bnlearn' or 'example'; got {self.kind!r}.")
        if not isinstance(self.network, DiscreteBN):
            raise TypeError(f"Source.network must be a DiscreteBN; got {type(self.network).__name__}.")


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x)
    return x


def _rows(bn: DiscreteBN) -> int:
    return int(sum(int(np.prod(t.shape[:-1], dtype=np.int64)) for t in bn.cpts.values()))


class UniCoGenerator:
    """Generate UniCo items with exact answers in three renderings.

    Args:
        query_types: which of the 18 types (default: all, in rung order).
        renderings: which renderings to emit (default: symbolic, narrative, code).
        candidates_per_type: candidates drawn per network and type.
        tolerance: absolute tolerance of the shortcut checks.
        decimals: round every CPT to this many decimals before generating (what is shown is what is
            answered); ``None`` keeps the network's numbers as they are.
        max_context_rows: skip candidates whose relevant sub-network has more CPT rows than this.
        fallback_context_rows: when a type keeps no item on a named (bnlearn or example) network,
            because every candidate exceeded ``max_context_rows`` (as controlled direct effects on alarm
            often do: their relevant sub-networks mostly have over 100 CPT rows) or every solved one was
            dropped by a shortcut rule, draw a larger pool and solve its candidates up to this many rows,
            smallest first, until one is kept, so that every type such a network admits can yield items.
            Random networks get no fallback: they are many and interchangeable, so a type one of them
            misses is covered by the others (and solving large pools on all of them is slow). ``None`` or
            0 turns the fallback off. Fallback candidates solved are counted in ``stats_`` as
            ``fallback``. Default 400 CPT rows: about the most a reader (or a model's context) should be
            asked to read in one item; on alarm and insurance the median context of several types is
            110-290 rows.
        seed: seed of the query sampler.
    """

    def __init__(
        self,
        query_types: Sequence[str] | None = None,
        renderings: Sequence[str] = RENDERINGS,
        candidates_per_type: int = 4,
        tolerance: float = 0.01,
        decimals: int | None = 2,
        max_context_rows: int = 80,
        fallback_context_rows: int | None = 400,
        seed: int = 0,
    ):
        self.query_types = query_types
        self.renderings = renderings
        self.candidates_per_type = candidates_per_type
        self.tolerance = tolerance
        self.decimals = decimals
        self.max_context_rows = max_context_rows
        self.fallback_context_rows = fallback_context_rows
        self.seed = seed

    def _check_settings(self) -> list[str]:
        types = list(QUERY_TYPES) if self.query_types is None else list(self.query_types)
        bad = [t for t in types if t not in QUERY_TYPES]
        if bad:
            raise ValueError(f"query_types: unknown {bad}; known: {list(QUERY_TYPES)}.")
        bad = [r for r in self.renderings if r not in RENDERINGS]
        if bad or not self.renderings:
            raise ValueError(
                f"renderings: must be a non-empty subset of {RENDERINGS}; got {list(self.renderings)}."
            )
        if not isinstance(self.candidates_per_type, int) or self.candidates_per_type < 1:
            raise ValueError(
                f"candidates_per_type must be a positive integer; got {self.candidates_per_type!r}."
            )
        if not 0 <= self.tolerance < 1:
            raise ValueError(f"tolerance must be in [0, 1); got {self.tolerance!r}.")
        if self.decimals is not None and (not isinstance(self.decimals, int) or self.decimals < 1):
            raise ValueError(f"decimals must be a positive integer or None; got {self.decimals!r}.")
        return types

    def fit(self, sources: Iterable[Source | DiscreteBN]) -> UniCoGenerator:
        """Generate from every source (a bare :class:`DiscreteBN` counts as a random-kind source)."""
        types = self._check_settings()
        rng = np.random.default_rng(self.seed)
        self.items_: list[tuple[Source, DiscreteBN, Solution]] = []
        self.records_: list[dict[str, Any]] = []
        self.drops_: list[dict[str, Any]] = []
        per_type = {
            t: {
                "rung": QUERY_TYPES[t].rung,
                "candidates": 0,
                "kept": 0,
                "dropped": 0,
                "undefined": 0,
                "too_large": 0,
                "fallback": 0,
                "networks_without_instance": 0,
                "by_rule": {},
            }
            for t in types
        }
        per_source: dict[str, dict[str, int]] = {}
        n_sources = 0
        for src in sources:
            src = src if isinstance(src, Source) else Source(src)
            n_sources += 1
            bn = src.network.quantized(self.decimals) if self.decimals else src.network
            info = NetInfo(bn)
            renderer = Renderer(bn, src.glossary or glossary_for(bn.name))
            ps = per_source.setdefault(src.kind, {"networks": 0, "candidates": 0, "kept": 0})
            ps["networks"] += 1
            for qtype in types:
                stats = per_type[qtype]
                seen: set[tuple] = set()
                too_large: list[tuple[int, Any]] = []
                solved = kept = 0
                for _attempt in range(5 * self.candidates_per_type):
                    if solved >= self.candidates_per_type:
                        break
                    q = sample_query(bn, qtype, rng, info)
                    if q is None:
                        stats["networks_without_instance"] += 1
                        break
                    if q.key in seen:
                        continue
                    seen.add(q.key)
                    rows = _rows(bn.subnetwork(q.variables()))
                    if rows > self.max_context_rows:
                        stats["too_large"] += 1
                        too_large.append((rows, q))
                        continue
                    outcome = self._keep(src, bn, q, qtype, info, renderer, stats, ps)
                    solved += outcome != "undefined"
                    kept += outcome == "kept"
                named = src.kind != "random"
                if kept == 0 and (solved or too_large) and self.fallback_context_rows and named:
                    for q in self._fallback(bn, qtype, rng, info, seen, too_large):
                        stats["fallback"] += 1
                        if self._keep(src, bn, q, qtype, info, renderer, stats, ps) == "kept":
                            break
        for s in per_type.values():
            s["drop_rate"] = s["dropped"] / s["candidates"] if s["candidates"] else None
        per_rung: dict[int, dict[str, Any]] = {}
        for s in per_type.values():
            pr = per_rung.setdefault(s["rung"], {"candidates": 0, "kept": 0, "dropped": 0})
            for k in ("candidates", "kept", "dropped"):
                pr[k] += s[k]
        for pr in per_rung.values():
            pr["drop_rate"] = pr["dropped"] / pr["candidates"] if pr["candidates"] else None
        per_rendering = {r: sum(1 for rec in self.records_ if rec["rendering"] == r) for r in self.renderings}
        self.stats_ = {
            "sources": n_sources,
            "items": len(self.items_),
            "records": len(self.records_),
            "per_type": per_type,
            "per_rung": dict(sorted(per_rung.items())),
            "per_rendering": per_rendering,
            "per_source": per_source,
            "rules": {r: RULES[r] for r in RULES},
        }
        return self

    def _keep(self, src: Source, bn: DiscreteBN, q: Any, qtype: str, info: NetInfo, renderer: Renderer,
              stats: dict[str, Any], ps: dict[str, int]) -> str:
        """Solve a candidate, apply the shortcut rules, record it: ``undefined``, ``dropped`` or ``kept``."""
        try:
            sol = solve(bn, q, self.tolerance, info)
        except ValueError:
            stats["undefined"] += 1
            return "undefined"
        stats["candidates"] += 1
        ps["candidates"] += 1
        fired = sol.dropped_by
        if fired:
            stats["dropped"] += 1
            for rule in fired:
                stats["by_rule"][rule] = stats["by_rule"].get(rule, 0) + 1
            self.drops_.append(
                {"network": bn.name, "query_type": qtype, "rules": fired, "query": q.to_dict()}
            )
            return "dropped"
        stats["kept"] += 1
        ps["kept"] += 1
        self.items_.append((src, bn, sol))
        item_id = f"unico-{len(self.items_) - 1:06d}"
        for rendering in self.renderings:
            self.records_.append(self._record(item_id, src, bn, sol, renderer, rendering))
        return "kept"

    def _fallback(self, bn: DiscreteBN, qtype: str, rng: np.random.Generator, info: NetInfo,
                  seen: set[tuple], too_large: list[tuple[int, Any]]) -> list[Any]:
        """More candidates for a type that kept nothing on a network, smallest context first.

        Draws up to ``10 * candidates_per_type`` more distinct candidates, pools them with the too-large
        ones already drawn, and returns those within ``fallback_context_rows`` in increasing context size;
        the caller solves them in that order until one is kept.
        """
        pool = list(too_large)
        for _attempt in range(10 * self.candidates_per_type):
            q = sample_query(bn, qtype, rng, info)
            if q is None:
                break
            if q.key in seen:
                continue
            seen.add(q.key)
            pool.append((_rows(bn.subnetwork(q.variables())), q))
        pool.sort(key=lambda pair: pair[0])
        return [q for rows, q in pool if rows <= self.fallback_context_rows]

    def _record(
        self, item_id: str, src: Source, bn: DiscreteBN, sol: Solution, renderer: Renderer, rendering: str
    ) -> dict[str, Any]:
        q = sol.query
        qt = QUERY_TYPES[q.type]
        text = renderer.render(sol, rendering)
        mention = set(q.variables()) | {v for a in sol.accepted if isinstance(a, list) for v in a}
        sub = bn.subnetwork(mention)
        answer = sol.answer
        if qt.answer_type in ("probability", "difference"):
            answer = float(answer)
        return _jsonable(
            {
                "id": f"{item_id}-{rendering}",
                "item_id": item_id,
                "query_type": q.type,
                "rung": qt.rung,
                "rendering": rendering,
                "source": {"kind": src.kind, "network": bn.name, "seed": src.seed},
                "context": text["context"],
                "question": text["question"],
                "answer": answer,
                "answer_type": qt.answer_type,
                "answer_text": text["answer_text"],
                "accepted_answers": sol.accepted,
                "rationale": text["rationale"],
                "messages": [
                    {"role": "user", "content": text["context"] + "\n\n" + text["question"]},
                    {"role": "assistant", "content": text["rationale"]},
                ],
                "query": {"formula": qt.formula, **q.to_dict()},
                "terms": sol.terms,
                "graph": {
                    "nodes": sub.topological_order(),
                    "edges": [list(e) for e in sub.edges],
                    "latent": sorted(sub.latent),
                    "states": {v: list(sub.states[v]) for v in sub.variables},
                },
                "shortcut_checks": sol.checks,
                "extra": sol.extra,
                "generator": {
                    "version": SCHEMA_VERSION,
                    "tolerance": self.tolerance,
                    "decimals": self.decimals,
                    "seed": self.seed,
                },
            }
        )

    def write_jsonl(self, path: str | Path) -> Path:
        """Write ``records_`` as JSONL (atomically); returns the path."""
        if not hasattr(self, "records_"):
            raise ValueError("call fit(...) before write_jsonl(...).")
        return write_jsonl(self.records_, path)


def write_jsonl(records: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """One JSON object per line, UTF-8, written atomically."""
    from recframe.checkpoint_io import atomic_write  # torch-free import of the package

    path = Path(path)
    blob = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8")
    atomic_write(path, lambda fh: fh.write(blob))
    return path


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL file written by :func:`write_jsonl`."""
    out = []
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path} line {lineno}: not JSON ({exc}).") from None
    return out
