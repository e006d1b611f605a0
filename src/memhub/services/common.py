"""Building blocks the toolsets' models share: safe text, bounded ids, strict inputs."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, WithJsonSchema

MAX_ID = 2**63 - 1  # SQLite INTEGER; larger values would overflow the driver


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


class StrictInput(BaseModel):
    """Tool input: unknown properties and silently coerced types are errors, not guesses."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra=input_schema)


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
    model_config = ConfigDict(extra="forbid", json_schema_extra=open_output)


class Envelope(Output):
    """A tool's result model: its published schema is the envelope (see `envelope_only`)."""

    model_config = ConfigDict(json_schema_extra=_envelope)
