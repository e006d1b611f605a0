"""Building blocks the toolsets' models share: safe text, bounded ids, strict inputs."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

from memhub.core.ids import MAX_ID

# Free-form JSON parameters (metadata, filter criteria): readers (the SDK client's JSON parser among
# them) must never meet data deeper or larger than this.
JSON_MAX_DEPTH = 8  # the value itself is level 1
JSON_MAX_NODES = 256  # keys and array items, all levels together
JSON_MAX_BYTES = 64 * 1024  # serialised as UTF-8 JSON
JSON_MAX_KEY_CHARS = 200


def _clean_text(value: str) -> str:
    """Reject text SQLite cannot store faithfully: lone surrogates (bad UTF-16) and NUL."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("contains invalid unicode (a lone surrogate)") from None
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def json_depth(value: Any, limit: int) -> int:
    """How deeply `value` nests (a scalar is 0, `{}` is 1), counted without recursion; stops past `limit`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth) for child in children)
    return deepest


def bounded_json(value: Any) -> Any:
    """Free-form JSON a reader can always load: shallow, small, valid text, finite 64-bit numbers."""
    if json_depth(value, JSON_MAX_DEPTH) > JSON_MAX_DEPTH:
        raise ValueError(f"is nested too deeply (at most {JSON_MAX_DEPTH} levels)")
    nodes = 0
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            nodes += len(node)
            for key, child in node.items():
                if len(_clean_text(key)) > JSON_MAX_KEY_CHARS:
                    raise ValueError(f"keys must have at most {JSON_MAX_KEY_CHARS} characters")
                stack.append(child)
        elif isinstance(node, list):
            nodes += len(node)
            stack.extend(node)
        elif isinstance(node, str):
            _clean_text(node)
        elif isinstance(node, bool) or node is None:
            pass
        elif isinstance(node, int):
            if not -MAX_ID - 1 <= node <= MAX_ID:
                raise ValueError("integers must fit in the 64-bit range")
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise ValueError("numbers must be finite")
        else:
            raise ValueError(f"must be JSON (not {type(node).__name__})")
        if nodes > JSON_MAX_NODES:
            raise ValueError(f"has too many keys and items (at most {JSON_MAX_NODES} in all)")
    size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    if size > JSON_MAX_BYTES:
        raise ValueError(f"is too large ({size} bytes as JSON; at most {JSON_MAX_BYTES} bytes)")
    return value


def json_text(limit: int, inspect: Callable[[Any], None] | None = None) -> AfterValidator:
    """A validator for text holding a JSON document (an import): at most `limit` levels deep, every
    string and key valid text, numbers finite; `inspect` may check the parsed document further
    (raising ValueError). Text that is not JSON passes: the service reports where it breaks."""

    def check(text: str) -> str:
        try:
            parsed = json.loads(text)
        except RecursionError:
            raise ValueError(f"is nested too deeply (at most {limit} levels)") from None
        except ValueError:
            return text
        if json_depth(parsed, limit) > limit:
            raise ValueError(f"is nested too deeply (at most {limit} levels)")
        stack: list[Any] = [parsed]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                for key in node:
                    _clean_text(key)
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
            elif isinstance(node, str):
                _clean_text(node)
            elif isinstance(node, float) and not math.isfinite(node):
                raise ValueError("numbers must be finite")
        if inspect is not None:
            inspect(parsed)
        return text

    return AfterValidator(check)


SafeText = Annotated[str, AfterValidator(_clean_text)]
RequiredText = Annotated[str, AfterValidator(_clean_text), AfterValidator(_not_blank)]
# The bounds are enforced but not published (an id is a positive integer; JSON clients
# cannot even represent 2**63 - 1 exactly, and tools/list is read in every agent turn).
ItemId = Annotated[int, Field(ge=1, le=MAX_ID), WithJsonSchema({"type": "integer"})]


def optional_means_absent(schema: dict[str, Any]) -> None:
    """`json_schema_extra`: publish a property whose default is null without its null branch.

    For a tool input, omitting the property is how a caller says "none" (the server still
    accepts an explicit null); for an output dumped with `exclude_none`, null never appears.
    `{"type": "string"}` instead of `anyOf: [{type: string}, {type: null}], default: null`
    is shorter and portable to clients that map schemas onto a single-`type` dialect.
    """
    for prop in schema.get("properties", {}).values():
        if "default" not in prop or prop["default"] is not None or "anyOf" not in prop:
            continue
        branches = [b for b in prop["anyOf"] if b != {"type": "null"}]
        if len(branches) == len(prop["anyOf"]):
            continue
        del prop["default"], prop["anyOf"]
        if len(branches) == 1:
            prop.update({**branches[0], **prop})
        else:
            prop["anyOf"] = branches


def input_schema(schema: dict[str, Any]) -> None:
    """`json_schema_extra` for tool inputs: optional means absent, and no `additionalProperties`.

    Unknown properties are still rejected (with a message naming them); publishing that on
    every object costs `tools/list` more than it tells a caller who reads `properties`.
    """
    optional_means_absent(schema)
    schema.pop("additionalProperties", None)


# A free-form JSON object parameter (metadata, filter criteria...): bounded in depth, size and content.
JsonObject = Annotated[dict[str, Any], AfterValidator(bounded_json)]


class StrictInput(BaseModel):
    """Tool input: unknown properties and silently coerced types are errors, not guesses."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=input_schema, defer_build=True)


def open_output(schema: dict[str, Any]) -> None:
    """`json_schema_extra` for results: no `additionalProperties: false` in the published schema.

    The server never sends unknown fields (the models forbid them), but a schema that forbids
    them costs every object in `tools/list` and would turn a later additive field into a
    validation failure in clients holding an older schema.
    """
    if schema.get("additionalProperties") is False:
        del schema["additionalProperties"]


def _shallow(prop: dict[str, Any]) -> dict[str, Any]:
    out = {"description": prop["description"]} if "description" in prop else {}
    if "anyOf" in prop:
        out["anyOf"] = [_shallow(branch) for branch in prop["anyOf"]]
    elif "$ref" in prop:
        out["type"] = "object"
    elif "type" in prop:
        out["type"] = prop["type"]
    return out


def envelope_only(schema: dict[str, Any]) -> None:
    """`json_schema_extra` for a tool's result model: publish its envelope, not the records in it.

    The published `outputSchema` keeps the top-level fields, their JSON types and
    descriptions; the records inside (topics, memories, ...) are described
    by the tool and its documentation. That keeps `tools/list` lean (output schemas were
    more than half of it) while clients still validate the result's shape. The server
    itself checks every result against the full model.
    """
    schema["properties"] = {name: _shallow(prop) for name, prop in schema["properties"].items()}
    schema.pop("required", None)  # which fields are always there: the tool's description says it


def _envelope(schema: dict[str, Any]) -> None:
    open_output(schema)
    envelope_only(schema)


class Output(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra=open_output, defer_build=True)


class Envelope(Output):
    """A tool's result model: its published schema is the envelope (see `envelope_only`)."""

    model_config = ConfigDict(json_schema_extra=_envelope)
