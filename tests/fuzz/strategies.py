"""Hypothesis strategies built from a tool's published JSON input schema (as `tools/list` gives it).

Nothing here knows a tool by name except `EXCLUDED`: a toolset added later is fuzzed as soon as it
is listed. Values are mostly plausible (enums, ids that exist, lengths near the limits) so calls
get past validation into the services, with a steady share of wrong types, missing and unknown
properties, invalid unicode, NUL, boundary numbers and deeply nested JSON.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import strategies as st

# Actions never fuzzed: they take a file system path from the caller (`admin backup` writes it,
# `restore` replaces the database from it). Path confinement belongs to the ops service refactor;
# until then a fuzzer must not write or read arbitrary paths of the machine it runs on.
EXCLUDED: dict[tuple[str, str], set[str]] = {("admin", "action"): {"backup", "restore"}}

# Ids that exist in the seeded store, and ones that do not.
ID_TEXT = ["proj_1", "mem_1", "sess_1", "alice", "bob", "mem_zzz", "proj_0", "", "0", "-1"]
TRICKY_TEXT = [
    "bad\ud800text",  # a lone surrogate (what invalid UTF-8 becomes on stdio)
    "bad\udcffbytes",
    "nul\x00here",
    "設計方針とWALモード",
    "😀 emoji",
    " ",
    "\n\t",
    '"',
    "*",
    "NEAR(",
    'a" OR "b',
    "AND NOT",
    "col:val",
    "%_",
    "'; DROP TABLE items; --",
    "2026-01-01T00:00:00Z",
    "2000-01-01",
    "not-a-date",
    "https://example.com/x",
    "../../etc/passwd",
    "\u202e\u200b",
]
WRONG_TYPES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2**63,
    -(2**63) - 1,
    1.5,
    -0.0,
    1e308,
    "",
    "5",
    "true",
    [],
    {},
    [1],
    {"a": 1},
]

_text = st.text(
    alphabet=st.characters(codec=None, exclude_categories=()), max_size=40
)  # includes surrogates and NUL


def nested_json(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    _text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)),
    max_leaves=12,
)
free_json = st.one_of(
    st.dictionaries(st.text(max_size=10), json_values, max_size=6),
    st.sampled_from([10, 30, 199]).map(lambda d: {"deep": nested_json(d)}),
    st.integers(250, 400).map(lambda n: {f"k{i}": i for i in range(n)}),
)


def _types(schema: dict[str, Any]) -> list[str]:
    kind = schema.get("type")
    if isinstance(kind, list):
        return [str(k) for k in kind]
    if isinstance(kind, str):
        return [kind]
    return []


def for_schema(
    schema: dict[str, Any], defs: dict[str, Any], tool: str = "", name: str = ""
) -> st.SearchStrategy[Any]:
    """Values for one schema node: mostly of its type, sometimes any other JSON value."""
    if "$ref" in schema:
        schema = {
            **defs[schema["$ref"].rsplit("/", 1)[-1]],
            **{k: v for k, v in schema.items() if k != "$ref"},
        }
    options: list[st.SearchStrategy[Any]] = []
    if "anyOf" in schema:
        options += [for_schema(branch, defs, tool, name) for branch in schema["anyOf"]]
    if "enum" in schema:
        allowed = [v for v in schema["enum"] if v not in EXCLUDED.get((tool, name), set())]
        options.append(st.sampled_from(allowed or ["x"]))
    else:
        for kind in _types(schema):
            options.append(_typed(kind, schema, defs, tool))
    if not options:
        options.append(json_values)
    typed = st.one_of(*options)
    return st.one_of(typed, typed, typed, typed, typed, typed, typed, typed, st.sampled_from(WRONG_TYPES))


def _typed(kind: str, schema: dict[str, Any], defs: dict[str, Any], tool: str) -> st.SearchStrategy[Any]:
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        low, high = schema.get("minimum", -(2**63)), schema.get("maximum", 2**63 - 1)
        near_low = max(low, -5)
        return st.one_of(
            st.integers(near_low, max(min(high, 5), near_low)),
            st.sampled_from([low, high, low - 1, high + 1]),
            st.integers(low, high),
        )
    if kind == "number":
        low, high = schema.get("minimum", -1e9), schema.get("maximum", 1e9)
        return st.one_of(
            st.floats(low, high), st.sampled_from([low, high, low - 0.01, high + 0.01, 0, 1]), st.floats()
        )
    if kind == "string":
        most = schema.get("maxLength", 10_000)
        least = schema.get("minLength", 0)
        return st.one_of(
            st.sampled_from(ID_TEXT),
            st.sampled_from(TRICKY_TEXT),
            _text,
            st.sampled_from([most, most + 1, max(least - 1, 0)]).map(lambda n: "x" * n),
        )
    if kind == "array":
        item = for_schema(schema.get("items", {}), defs, tool)
        most = schema.get("maxItems", 8)
        return st.one_of(
            st.lists(item, max_size=min(most, 4)),
            # one over the limit (a list hypothesis can build; past ~1,000 items a bare list of
            # the same length makes the point)
            st.lists(st.just("a"), min_size=most + 1, max_size=most + 1)
            if most < 1_000
            else st.just(["a"] * (most + 1)),
        )
    if kind == "object":
        if "properties" in schema:
            return object_strategy(schema, defs, tool)
        return free_json
    return json_values


def object_strategy(
    schema: dict[str, Any], defs: dict[str, Any], tool: str = ""
) -> st.SearchStrategy[dict[str, Any]]:
    """An object of the schema: required properties usually present, optional ones sometimes,
    now and then a required one missing or an unknown one added."""
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    values = {name: for_schema(sub, defs, tool, name) for name, sub in properties.items()}

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, strategy in values.items():
            present = draw(st.integers(0, 19)) != 0 if name in required else draw(st.integers(0, 2)) == 0
            if present:
                out[name] = draw(strategy)
        if draw(st.integers(0, 29)) == 0:
            out[draw(st.sampled_from(["unknown", "__proto__", "id", "ACTION"]))] = 1
        return out

    return build()


def examples(default: int) -> int:
    """How many examples a fuzz test runs: MEMHUB_FUZZ_EXAMPLES (make fuzz), else `default` (CI)."""
    return int(os.environ.get("MEMHUB_FUZZ_EXAMPLES", default))
