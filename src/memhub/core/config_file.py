"""The config file: JSON or TOML in the shape of seed 003 (§4.2.2 transports, §6.3 authentication).

    {"transports": {"stdio": {"enabled": true},
                    "http": {"enabled": true, "port": 8000, "host": "localhost",
                             "cors": {"allowed_origins": [...], "allowed_methods": [...]}},
                    "sse": {"enabled": true, "port": 8001, "max_connections": 100,
                            "heartbeat_interval": 30}},
     "authentication": {"http": {"type": "api_key", "header": "X-API-Key",
                                 "jwt_secret": "${JWT_SECRET}"}},
     "memhub": {"<any setting>": value}}

`read_config` flattens it into setting names; `${NAME}` in a string is read from the
environment. Unknown keys are errors, so a typo never silently changes nothing.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_AUTH_TYPES = {"none": "none", "api_key": "apikey", "apikey": "apikey", "jwt": "jwt"}


def _expand(value: Any, environ: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        return _VAR.sub(lambda m: environ.get(m.group(1), ""), value)
    if isinstance(value, list):
        return [_expand(v, environ) for v in value]
    return value


def _section(data: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ValueError(f"{where}.{key} must be an object")
    return value


def _only(section: Mapping[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(section) - allowed)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}")


def _transports(section: dict[str, Any], out: dict[str, Any]) -> None:
    _only(section, {"stdio", "http", "sse"}, "transports")
    enabled = []
    for name in ("stdio", "http", "sse"):
        part = _section(section, name, "transports")
        if not part:
            continue
        common = {"enabled", "port", "host"}
        extra = {"http": {"cors"}, "sse": {"max_connections", "heartbeat_interval"}, "stdio": set()}[name]
        _only(part, common | extra, f"transports.{name}")
        if part.get("enabled", True):
            enabled.append(name)
        if "port" in part and name != "stdio":
            out[f"{name}_port"] = part["port"]
        if "host" in part and "host" not in out:
            out["host"] = part["host"]
    if enabled:
        out["transports"] = enabled
    http = _section(section, "http", "transports")
    cors = _section(http, "cors", "transports.http")
    _only(cors, {"allowed_origins", "allowed_methods"}, "transports.http.cors")
    out.update(cors)
    sse = _section(section, "sse", "transports")
    if "max_connections" in sse:
        out["sse_max_connections"] = sse["max_connections"]
    if "heartbeat_interval" in sse:
        out["sse_heartbeat_s"] = sse["heartbeat_interval"]


def _authentication(section: dict[str, Any], out: dict[str, Any]) -> None:
    _only(section, {"stdio", "http", "sse"}, "authentication")
    stdio = _section(section, "stdio", "authentication")
    if stdio.get("type", "none") != "none":
        raise ValueError("authentication.stdio.type can only be none (stdio is the local user)")
    http = _section(section, "http", "authentication")
    _only(http, {"type", "header", "jwt_secret"}, "authentication.http")
    if "type" in http:
        kind = _AUTH_TYPES.get(str(http["type"]))
        if kind is None:
            raise ValueError("authentication.http.type must be none, api_key or jwt")
        out["auth"] = kind
    if str(http.get("header", "X-API-Key")).lower() != "x-api-key":
        raise ValueError("authentication.http.header: only X-API-Key is supported")
    if http.get("jwt_secret"):
        out["jwt_secret"] = http["jwt_secret"]
    sse = _section(section, "sse", "authentication")
    _only(sse, {"type", "timeout"}, "authentication.sse")
    if sse.get("type", "session") != "session":
        raise ValueError(
            "authentication.sse.type can only be session (the stream is opened with HTTP's credentials)"
        )


def read_config(path: Path, environ: Mapping[str, str]) -> dict[str, Any]:
    """Setting name -> raw value. Raises ValueError on an unreadable or malformed file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"config file {path} is not valid: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"config file {path} must hold an object")
    _only(data, {"transports", "authentication", "memhub"}, str(path))
    out: dict[str, Any] = {}
    _transports(_section(data, "transports", "config"), out)
    _authentication(_section(data, "authentication", "config"), out)
    out.update(_section(data, "memhub", "config"))
    return {name: _expand(value, environ) for name, value in out.items()}
