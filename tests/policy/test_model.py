"""Policies as pure code: allow-tag matching, the classes a caller may see, parsing, versions and diffs."""

from __future__ import annotations

import math

import pytest

from memhub.core.errors import MemhubError
from memhub.policy.model import (
    DEFAULT_DOC,
    allowed_classes,
    diff,
    next_version,
    parse,
    tag_matches,
    ttl_seconds,
)


def test_tag_matching_and_allowed_classes() -> None:
    assert tag_matches("*", "anything") and tag_matches("tool:*", "tool:contact-lookup")
    assert not tag_matches("tool:*", "tool:") and not tag_matches("tool:*", "answer:task")
    assert not tag_matches("answer:task", "answer:task2")
    assert allowed_classes(DEFAULT_DOC, []) == {"public"}
    assert allowed_classes(DEFAULT_DOC, ["answer:task"]) == {"public", "internal"}
    assert allowed_classes(DEFAULT_DOC, ["tool:contact-lookup"]) == {"public", "internal", "pii"}


def test_policy_parsing_versions_and_diff() -> None:
    doc = parse("version: 0.1\nscopes: {session: {ttl: '12h', max_tokens: 10}}\nboundary_classes: {}")
    assert doc.version == "0.1" and doc.scope("session").max_tokens == 10
    assert doc.scope("project") == DEFAULT_DOC.scope("project")  # unnamed scopes keep the defaults
    assert doc.boundary("internal").allow == ()  # unnamed classes are allowed to nobody
    assert ttl_seconds("12h") == 43200 and ttl_seconds("inf") == math.inf
    assert next_version("0.1", []) == "0.1.0" and next_version("0.1", ["0.1.0", "0.1.4", "0.2.0"]) == "0.1.5"
    assert next_version("1.2.3", ["0.1.0"]) == "1.2.3"
    with pytest.raises(MemhubError):
        next_version("1.2.3", ["1.2.3"])
    changes = diff(DEFAULT_DOC, doc)
    assert "scopes.session.ttl: '7d' -> '12h'" in changes
