"""Compact JSON schemas for tools: the same constraints, cheaper for clients to read and validate.

pydantic nests models through `$ref` into `$defs`. A definition used once is inlined (one
lookup less for validators such as `jsonschema`); one used more than once, or recursively
(a topic tree), stays in `$defs` so `tools/list` does not repeat it. `title`s and
`additionalProperties: true` (the default) are dropped.
Nullable values keep pydantic's `anyOf: [{type: X}, {type: null}]`: a `type` array is legal
JSON Schema but clients that map schemas onto a single-`type` dialect reject or mangle it.
"""

from __future__ import annotations

from typing import Any


def _recursive_defs(defs: dict[str, Any]) -> set[str]:
    """Names of definitions that (directly or indirectly) refer to themselves."""

    def refs(node: Any) -> set[str]:
        found: set[str] = set()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                found.add(ref.removeprefix("#/$defs/"))
            for value in node.values():
                found |= refs(value)
        elif isinstance(node, list):
            for value in node:
                found |= refs(value)
        return found

    direct = {name: refs(body) for name, body in defs.items()}
    recursive = set()
    for name in defs:
        seen: set[str] = set()
        stack = list(direct[name])
        while stack:
            current = stack.pop()
            if current == name:
                recursive.add(name)
                break
            if current not in seen and current in direct:
                seen.add(current)
                stack.extend(direct[current])
    return recursive


def _ref_counts(node: Any, counts: dict[str, int]) -> dict[str, int]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            counts[name] = counts.get(name, 0) + 1
        for value in node.values():
            _ref_counts(value, counts)
    elif isinstance(node, list):
        for value in node:
            _ref_counts(value, counts)
    return counts


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    defs: dict[str, Any] = dict(schema.get("$defs", {}))
    shared = {name for name, n in _ref_counts(schema, {}).items() if n > 1}
    keep = _recursive_defs(defs) | (shared & set(defs))

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name not in keep and name in defs:
                merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
                return walk(merged)
        out = {k: walk(v) for k, v in node.items() if k not in ("title", "$defs", "properties")}
        if out.get("additionalProperties") is True:  # the default
            del out["additionalProperties"]
        if isinstance(node.get("properties"), dict):
            out["properties"] = {name: walk(sub) for name, sub in node["properties"].items()}
        return out

    compact = walk(schema)
    if keep:
        compact["$defs"] = {name: walk(defs[name]) for name in sorted(keep)}
    return dict(compact)
