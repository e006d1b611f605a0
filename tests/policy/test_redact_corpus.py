"""Precision and recall of the redaction detectors (policy/redact.py) on a corpus of
Japanese, English and mixed text: positives (full-width, glued to kana, spaced,
parenthesised) and near-misses (order numbers, dates, versions, prices, ISBNs, git SHAs,
UUIDs, postal codes, times).

A finding is a true positive only when its kind and its span are exactly the expected ones;
any other finding is a false positive, any expected span not found a false negative.

    .venv/bin/python -m pytest tests/policy/test_redact_corpus.py -q -s
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memhub.policy.redact import PII_KINDS, SECRET_KINDS, classify, normalised, redact, redact_secrets, scan

CORPUS = Path(__file__).parent / "data" / "redaction_corpus.json"
ALL_KINDS = (*SECRET_KINDS, *PII_KINDS)


def _corpus() -> dict[str, Any]:
    return dict(json.loads(CORPUS.read_text(encoding="utf-8")))


def _expected(sample: dict[str, Any]) -> set[tuple[str, int, int]]:
    spans, after = set(), 0
    for kind, part in sample["find"]:
        start = sample["text"].index(part, after)
        spans.add((kind, start, start + len(part)))
        after = start + len(part)
    return spans


def test_corpus_size() -> None:
    corpus = _corpus()
    assert len(corpus["positives"]) >= 100 and len(corpus["near_misses"]) >= 100
    assert all(s["find"] for s in corpus["positives"]) and not any(s["find"] for s in corpus["near_misses"])
    for group in ("positives", "near_misses"):
        assert {s["lang"] for s in corpus[group]} == {"ja", "en", "mixed"}


def test_precision_and_recall_at_least_098() -> None:
    corpus = _corpus()
    tp = fp = fn = 0
    misses: list[str] = []
    for sample in corpus["positives"] + corpus["near_misses"]:
        want = _expected(sample)
        got = {(f.kind, f.start, f.end) for f in scan(sample["text"])}
        tp += len(want & got)
        fp += len(got - want)
        fn += len(want - got)
        if want != got:
            misses.append(f"{sample['text']!r}: expected {sorted(want - got)}, extra {sorted(got - want)}")
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    samples = len(corpus["positives"]) + len(corpus["near_misses"])
    print(
        f"\nredaction corpus: {len(corpus['positives'])} positives, {len(corpus['near_misses'])} near-misses,"
        f" {samples} samples; spans tp={tp} fp={fp} fn={fn}; precision={precision:.3f} recall={recall:.3f}"
    )
    assert precision >= 0.98 and recall >= 0.98, "\n".join(misses)


@pytest.mark.parametrize("group", ["positives", "near_misses"])
def test_redaction_masks_exactly_the_found_spans(group: str) -> None:
    """The mask replaces the found spans of the original text (not of its normalised view),
    is idempotent, and the output filter's secret-only pass agrees with the full scan."""
    for sample in _corpus()[group]:
        text = sample["text"]
        assert len(normalised(text)) == len(text)
        findings = scan(text)
        safe, counts = redact(text, ALL_KINDS)
        assert sum(counts.values()) == len(findings)
        assert redact(safe, ALL_KINDS)[0] == safe, text
        secrets = redact(text, SECRET_KINDS, findings)[0]
        assert redact_secrets(text) == secrets, text
        needed = classify(findings)
        assert needed == ("internal" if group == "near_misses" else needed)
        for finding in findings:
            assert f"[REDACTED:{finding.kind}]" in safe
