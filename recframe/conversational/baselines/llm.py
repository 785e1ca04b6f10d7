"""An LLM baseline through an adapter: point it at any local model; tested with a deterministic fake.

No LLM ships with recframe and none is called by the benchmark command. :class:`LLMSystem` writes a
prompt (the dialogue so far, then each candidate with its name, categories and ``snippets`` review
sentences, each tagged with its review id) and asks for one JSON object::

    {"ranking": ["poi_id", ...], "citations": [{"review_id": "...", "text": "verbatim quote"}, ...]}

An :class:`LLMAdapter` is anything with ``complete(prompt: str) -> str``: wrap a local model's Python API,
or use :class:`CommandAdapter` to pipe the prompt to a local program (a llama.cpp or ollama command
line) and read its stdout. Parsing: the first ``{...}`` block of the reply is read as JSON; ids that are
not candidates, and repeats, are dropped; unranked candidates follow in the order the prompt listed
them. A reply that cannot be parsed gives that order and no citations, and is counted in
``parse_failures_``.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from recframe.conversational.baselines.base import System
from recframe.conversational.schema import Citation
from recframe.conversational.textnorm import split_sentences
from recframe.conversational.view import Catalog, DialogueView, Prediction

__all__ = ["LLMAdapter", "CommandAdapter", "LLMSystem", "parse_reply"]


@runtime_checkable
class LLMAdapter(Protocol):
    """A text-completion model."""

    def complete(self, prompt: str) -> str:
        """The model's reply to ``prompt``."""
        ...


class CommandAdapter:
    """Runs ``command`` (an argument list) with the prompt on stdin; the reply is its stdout."""

    def __init__(self, command: Sequence[str], timeout_s: float = 120.0) -> None:
        if not command:
            raise ValueError(
                "CommandAdapter needs a command (an argument list, e.g. ['ollama', 'run', 'MODEL'])."
            )
        self.command, self.timeout_s = list(command), timeout_s

    def complete(self, prompt: str) -> str:
        done = subprocess.run(
            self.command, input=prompt, capture_output=True, text=True, timeout=self.timeout_s, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"LLM command {self.command[0]!r} exited with {done.returncode}: {done.stderr.strip()[:300]}"
            )
        return done.stdout


_OBJ = re.compile(r"\{.*\}", re.S)


def parse_reply(reply: str, candidates: Sequence[str]) -> tuple[tuple[str, ...], tuple[Citation, ...]] | None:
    """``(ranking, citations)`` from a reply, or None when it holds no usable JSON object."""
    m = _OBJ.search(reply)
    if not m:
        return None
    try:
        obj = json.loads(m.group(0))
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("ranking"), list):
        return None
    cands = set(candidates)
    ranking: list[str] = []
    for pid in obj["ranking"]:
        if isinstance(pid, str) and pid in cands and pid not in ranking:
            ranking.append(pid)
    ranking += [c for c in candidates if c not in ranking]
    cites = tuple(
        Citation(str(c["review_id"]), c["text"])
        for c in obj.get("citations", [])
        if isinstance(c, dict) and isinstance(c.get("text"), str) and "review_id" in c
    )
    return tuple(ranking), cites


class LLMSystem(System):
    """Prompt -> adapter -> parsed ranking and citations (module docstring)."""

    name = "LLM (adapter)"

    def __init__(self, adapter: LLMAdapter, snippets: int = 3) -> None:
        if not isinstance(adapter, LLMAdapter):
            raise TypeError(f"adapter {type(adapter).__name__} has no complete(prompt) -> str method.")
        self.adapter, self.snippets = adapter, snippets

    def fit(self, catalog: Catalog) -> LLMSystem:
        super().fit(catalog)
        self.parse_failures_ = 0
        return self

    def prompt(self, view: DialogueView) -> str:
        """The prompt for one evaluation point."""
        lines = ["You recommend restaurants to a traveller. Dialogue so far:"]
        for t in view.history:
            lines.append(f"{t.role.upper()} ({t.act}): {t.text}")
        lines.append("Candidates (id | name | categories | review sentences [review id]):")
        for pid in view.candidates:
            poi = self.catalog_.pois[pid]
            quotes = []
            for rid in self.catalog_.reviews_of.get(pid, ())[: self.snippets]:
                text = self.catalog_.reviews[rid].text
                start, end = split_sentences(text)[0]
                quotes.append(f'"{text[start:end]}" [{rid}]')
            lines.append(f"{pid} | {poi.name} | {', '.join(poi.categories)} | {' '.join(quotes)}")
        lines.append(
            'Reply with one JSON object: {"ranking": [candidate ids, best first], '
            '"citations": [{"review_id": id, "text": verbatim quote from that review}]}'
        )
        return "\n".join(lines)

    def predict_many(self, views: Sequence[DialogueView]) -> list[Prediction]:
        out = []
        for view in views:
            parsed = parse_reply(self.adapter.complete(self.prompt(view)), view.candidates)
            if parsed is None:
                self.parse_failures_ += 1
                parsed = (tuple(view.candidates), ())
            out.append(Prediction(*parsed))
        return out
