"""Stable hashes for content and for the audit chain."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_hash(*parts: str | None) -> str:
    """Hash of an item's text, for de-duplication (seed 000's content_hash)."""
    return "sha256:" + sha256_hex("\x1f".join(p or "" for p in parts))


GENESIS_HASH = "0" * 64


def event_hash(prev_hash: str, at: str, principal: str, tool: str, outcome: str, detail: Any) -> str:
    """The audit chain link: covers the previous link and every field of the event."""
    return sha256_hex(canonical_json([prev_hash, at, principal, tool, outcome, detail]))
