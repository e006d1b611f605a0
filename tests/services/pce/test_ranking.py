"""Pure functions of the pce toolset: ranking (docs/ranking.md), policy parsing and matching, errors."""

from __future__ import annotations

import math

import pytest

from memhub.core.errors import CallContext, ErrorKind, MemhubError, Unauthorized
from memhub.policy.model import (
    DEFAULT_DOC,
    allowed_classes,
    diff,
    next_version,
    parse,
    tag_matches,
    ttl_seconds,
)
from memhub.search.fusion import FusedHit
from memhub.services.pce import errors, ranking


def test_components_scale_each_side_by_its_best() -> None:
    hits = [FusedHit(1, 0, 10.0, 0.8), FusedHit(2, 0, 5.0, None), FusedHit(3, 0, None, -0.2)]
    parts = ranking.components(hits, alpha=0.65)
    assert (parts[1].text, parts[1].vector) == (1.0, 1.0) and parts[1].combined == pytest.approx(1.0)
    assert parts[2].text == 0.5 and parts[2].combined == pytest.approx(0.35 * 0.5)
    assert parts[3].vector == 0.0 and parts[3].combined == 0.0  # negative cosine counts 0
    text_only = ranking.components([FusedHit(1, 0, 4.0, None), FusedHit(2, 0, 2.0, None)], alpha=0.65)
    assert text_only[2].combined == 0.5  # no vector hits at all: text weighs 1


def test_recency_quality_g_and_score() -> None:
    assert ranking.recency(0, 30) == 1.0 and ranking.recency(30, 30) == 0.5 and ranking.recency(-5, 30) == 1.0
    assert ranking.recency(60, 14) == pytest.approx(0.5 ** (60 / 14))
    assert ranking.quality_factor(0.0, True) == 0.5 and ranking.quality_factor(1.0, True) == 1.0
    assert ranking.quality_factor(-1.0, True) == 0.0 and ranking.quality_factor(-1.0, False) == 1.0
    assert ranking.g(0.5, 0.5, True) == pytest.approx(0.375)
    rows = [(0.5, "2025-01-01", 1), (0.5, "2025-02-01", 2), (0.9, "2024-01-01", 3), (0.5, "2025-02-01", 4)]
    ordered = sorted(rows, key=lambda r: ranking.sort_key(*r))
    assert [r[2] for r in ordered] == [3, 4, 2, 1]  # score desc, then newer, then higher id


def test_quality_update_rule() -> None:
    assert ranking.update_quality(0.0, "helpful", None) == 0.3
    assert ranking.update_quality(0.0, "harmful", None) == -0.3
    assert ranking.update_quality(0.0, "outdated", None) == pytest.approx(-0.18)
    assert ranking.update_quality(0.0, "duplicate", None) == pytest.approx(-0.09)
    assert ranking.update_quality(0.0, "helpful", 0.5) == 0.15  # a score is the signal's value
    q = 0.0
    for _ in range(50):
        q = ranking.update_quality(q, "helpful", None)
    assert 0.99 < q <= 1.0


def test_token_estimate() -> None:
    assert ranking.estimate_tokens("abcdefgh") == 2 and ranking.estimate_tokens("解約API") == 3


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


def test_error_codes_and_http_status() -> None:
    ctx = CallContext("pce.memory.upsert", "pce", "r1", "t1", "0.1.0")
    storage = errors.render(MemhubError(ErrorKind.STORAGE, "disk full"), ctx)
    assert storage["error"]["code"] == "UPSERT_FAILED" and storage["error"]["details"]["http"] == 500
    assert (
        storage["request_id"] == "r1" and storage["trace_id"] == "t1" and storage["policy_version"] == "0.1.0"
    )
    internal = errors.render(MemhubError(ErrorKind.INTERNAL, "bug"), ctx)
    assert internal["error"]["code"] == "INTERNAL"
    failed = {"pce.memory.activate": "ACTIVATE_FAILED", "pce.memory.feedback": "FEEDBACK_FAILED",
              "pce.memory.boundary.validate": "BOUNDARY_ERROR", "pce.memory.search": "INTERNAL"}  # fmt: skip
    for tool, code in failed.items():
        body = errors.render(MemhubError(ErrorKind.TIMEOUT, "slow"), CallContext(tool, "pce", "r", "t"))
        assert body["error"]["code"] == code and body["error"]["details"]["reason"] == "timeout"
        assert body["policy_version"] == "0.0.0"
    unauthorized = errors.render(Unauthorized("no key"), ctx)
    assert unauthorized["error"]["details"] == {"http": 401}


def test_a_caller_without_a_key_is_unauthorized() -> None:
    from types import SimpleNamespace

    from memhub.auth.identity import Identity
    from memhub.core.models import Principal

    with pytest.raises(MemhubError) as raised:
        Identity(Principal("local"), require_key=True)(SimpleNamespace(state=SimpleNamespace()))
    body = errors.render(raised.value, CallContext("pce.memory.search", "pce", "", ""))
    assert body["error"]["code"] == "UNAUTHORIZED" and body["error"]["details"]["http"] == 401


def test_the_example_of_docs_ranking() -> None:
    parts = ranking.components([FusedHit(1, 0, 0.8, 0.6), FusedHit(2, 0, 1.0, 1.0)], alpha=0.65)
    assert parts[1].combined == pytest.approx(0.67)
    g = ranking.g(0.9, ranking.recency(60, 120), use_quality=False)
    assert parts[1].combined * g == pytest.approx(0.4738, abs=1e-4)
