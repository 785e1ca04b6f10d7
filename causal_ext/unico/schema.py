"""The JSONL record schema of UniCo items and a validator for it.

:data:`RECORD_SCHEMA` is a JSON Schema (the draft 2020-12 keywords ``type``, ``enum``,
``required``, ``properties``, ``additionalProperties``, ``items``) describing one line of the
output; :func:`validate_record` checks a record against it with no third-party dependency (only
those keywords are implemented) and raises one :class:`ValueError` naming the offending path.
Each item appears once per rendering; ``item_id`` ties the renderings of one item together and
``messages`` is the ready-to-train chat pair (user: context + question; assistant: rationale ending in
``Answer: ...``).
"""

from __future__ import annotations

from typing import Any

from causal_ext.unico.queries import QUERY_TYPES, RULES
from causal_ext.unico.render import RENDERINGS

__all__ = ["FIELD_DOCS", "RECORD_SCHEMA", "SCHEMA_VERSION", "validate_record"]

SCHEMA_VERSION = "1.0"

_STR = {"type": "string"}
_STR_MAP = {"type": "object", "additionalProperties": _STR}
_CHECK = {
    "type": "object",
    "required": ["value", "fired"],
    "additionalProperties": False,
    "properties": {"value": {}, "fired": {"type": "boolean"}},
}

RECORD_SCHEMA: dict[str, Any] = {
    "title": "UniCo item (one rendering)",
    "type": "object",
    "additionalProperties": False,
    "required": [
        "id",
        "item_id",
        "query_type",
        "rung",
        "rendering",
        "source",
        "context",
        "question",
        "answer",
        "answer_type",
        "answer_text",
        "accepted_answers",
        "rationale",
        "messages",
        "query",
        "terms",
        "graph",
        "shortcut_checks",
        "extra",
        "generator",
    ],
    "properties": {
        "id": _STR,
        "item_id": _STR,
        "query_type": {"enum": list(QUERY_TYPES)},
        "rung": {"enum": [1, 2, 3]},
        "rendering": {"enum": list(RENDERINGS)},
        "source": {
            "type": "object",
            "required": ["kind", "network"],
            "additionalProperties": False,
            "properties": {
                "kind": {"enum": ["random", "bnlearn", "example"]},
                "network": _STR,
                "seed": {"type": ["integer", "null"]},
            },
        },
        "context": _STR,
        "question": _STR,
        "answer": {"type": ["number", "boolean", "string", "array"]},
        "answer_type": {"enum": ["probability", "difference", "boolean", "state", "set"]},
        "answer_text": _STR,
        "accepted_answers": {"type": "array"},
        "rationale": _STR,
        "messages": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["role", "content"],
                "additionalProperties": False,
                "properties": {"role": {"enum": ["user", "assistant"]}, "content": _STR},
            },
        },
        "query": {
            "type": "object",
            "required": ["formula", "roles", "states", "evidence", "given"],
            "additionalProperties": False,
            "properties": {
                "formula": _STR,
                "roles": _STR_MAP,
                "states": _STR_MAP,
                "evidence": _STR_MAP,
                "given": {"type": "array", "items": _STR},
            },
        },
        "terms": {
            "type": ["array", "null"],
            "items": {
                "type": "object",
                "required": ["coef", "event", "evidence", "do"],
                "additionalProperties": False,
                "properties": {
                    "coef": {"type": "number"},
                    "event": _STR_MAP,
                    "evidence": _STR_MAP,
                    "do": _STR_MAP,
                },
            },
        },
        "graph": {
            "type": "object",
            "required": ["nodes", "edges", "latent", "states"],
            "additionalProperties": False,
            "properties": {
                "nodes": {"type": "array", "items": _STR},
                "edges": {"type": "array", "items": {"type": "array", "items": _STR}},
                "latent": {"type": "array", "items": _STR},
                "states": {"type": "object", "additionalProperties": {"type": "array", "items": _STR}},
            },
        },
        "shortcut_checks": {"type": "object", "additionalProperties": _CHECK},
        "extra": {"type": "object"},
        "generator": {
            "type": "object",
            "required": ["version", "tolerance", "decimals", "seed"],
            "properties": {
                "version": _STR,
                "tolerance": {"type": "number"},
                "decimals": {"type": ["integer", "null"]},
                "seed": {"type": "integer"},
            },
        },
    },
}
"""JSON Schema of one JSONL line."""

FIELD_DOCS: dict[str, str] = {
    "id": "unique per line: `<item_id>-<rendering>`",
    "item_id": "shared by the renderings of one item (`unico-000123`)",
    "query_type": "one of the 18 types (`causal_ext.unico.QUERY_TYPES`)",
    "rung": "1 association, 2 intervention, 3 counterfactual",
    "rendering": "`symbolic`, `narrative` or `code`",
    "source": "`kind` (random / bnlearn / example), `network` name, `seed` of a random network",
    "context": "the model in this rendering: edges and CPTs, a story, or a Python program",
    "question": "the question in this rendering",
    "answer": "canonical answer: float, bool, state name or sorted list of variable names",
    "answer_type": "`probability`, `difference`, `boolean`, `state` or `set`",
    "answer_text": "the answer as this rendering states it (4 decimals for numbers)",
    "accepted_answers": "every correct answer (several minimum backdoor sets), in canonical form",
    "rationale": "derivation: the quantities computed with their values, ending in `Answer: ...`",
    "messages": "chat pair for fine-tuning: user = context + question, assistant = rationale",
    "query": "`formula` of the type; `roles` (role -> variable), `states`, `evidence`, `given`",
    "terms": "rung-1/2 numbers as sum of coef * P(event | evidence, do) (null for the others)",
    "graph": "the relevant sub-network: nodes (topological), edges, latent nodes, states",
    "shortcut_checks": "rule -> {value: the heuristic answer, fired: false} (kept items fire none)",
    "extra": "type-specific facts: Tian-Pearl bounds (pn, ps), mediation formula (nde, nie), ...",
    "generator": "`version` of the schema, `tolerance`, `decimals`, sampler `seed`",
}
"""One line of documentation per top-level field (rendered in docs/results.md)."""

_TYPES = {
    "string": lambda x: isinstance(x, str),
    "integer": lambda x: isinstance(x, int) and not isinstance(x, bool),
    "number": lambda x: isinstance(x, (int, float)) and not isinstance(x, bool),
    "boolean": lambda x: isinstance(x, bool),
    "array": lambda x: isinstance(x, list),
    "object": lambda x: isinstance(x, dict),
    "null": lambda x: x is None,
}


def _validate(x: Any, schema: dict[str, Any], path: str) -> None:
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[k](x) for k in kinds):
            raise ValueError(f"{path}: expected {' or '.join(kinds)}, got {type(x).__name__} ({x!r:.60}).")
    if "enum" in schema and x not in schema["enum"]:
        raise ValueError(f"{path}: {x!r} is not one of {schema['enum']}.")
    if isinstance(x, dict):
        for key in schema.get("required", []):
            if key not in x:
                raise ValueError(f"{path}: missing required key {key!r}.")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, val in x.items():
            if key in props:
                _validate(val, props[key], f"{path}.{key}")
            elif extra is False:
                raise ValueError(f"{path}: unexpected key {key!r} (allowed: {sorted(props)}).")
            elif isinstance(extra, dict):
                _validate(val, extra, f"{path}.{key}")
    if isinstance(x, list) and "items" in schema:
        for i, val in enumerate(x):
            _validate(val, schema["items"], f"{path}[{i}]")


def validate_record(record: dict[str, Any]) -> None:
    """Check one record against :data:`RECORD_SCHEMA` and the cross-field rules.

    Cross-field rules: ``rung`` matches the query type, ``id`` ends with the rendering, every
    shortcut-check name is a known rule, and a kept record has no fired check.

    Raises:
        ValueError: naming the first offending field.
    """
    _validate(record, RECORD_SCHEMA, "record")
    qt = QUERY_TYPES[record["query_type"]]
    if record["rung"] != qt.rung:
        raise ValueError(f"record.rung: {record['rung']} but {qt.name!r} is a rung-{qt.rung} type.")
    if record["answer_type"] != qt.answer_type:
        raise ValueError(
            f"record.answer_type: {record['answer_type']!r} but {qt.name!r} answers with {qt.answer_type!r}."
        )
    if not record["id"].endswith(record["rendering"]):
        raise ValueError(
            f"record.id: {record['id']!r} should end with the rendering {record['rendering']!r}."
        )
    unknown = sorted(set(record["shortcut_checks"]) - set(RULES))
    if unknown:
        raise ValueError(f"record.shortcut_checks: unknown rules {unknown}; known: {sorted(RULES)}.")
    fired = [k for k, c in record["shortcut_checks"].items() if c["fired"]]
    if fired:
        raise ValueError(f"record.shortcut_checks: {fired} fired, so this item should have been dropped.")
