"""The dashboard's Markdown renderer: notes are shown, never run."""

from __future__ import annotations

import re

from memhub.http.dashboard.markdown import note_href, render
from tests.http.dashboard_site import HOSTILE_NOTE

TAGS = re.compile(r"<(/?)([a-z0-9]+)([^>]*)>")
EMITTED = {"h1", "h2", "h3", "h4", "h5", "h6", "p", "ul", "ol", "li", "pre", "code", "strong", "em", "a",
           "span", "blockquote", "hr"}  # fmt: skip


def test_raw_html_in_a_note_is_text() -> None:
    out = render(HOSTILE_NOTE, "guides")
    for tag, name, attrs in ((m.group(1), m.group(2), m.group(3)) for m in TAGS.finditer(out)):
        assert name in EMITTED, (tag, name)
        assert "on" not in re.sub(r'(href|class)="[^"]*"', "", attrs), attrs
    assert "&lt;script&gt;" in out and "&lt;img src=x onerror=alert(1)&gt;" in out
    assert "&lt;b&gt;code stays text&lt;/b&gt;" in out
    assert 'href="javascript' not in out and 'href="data' not in out
    assert '<a href="/ui/vault/note?path=index.md">the index</a>' in out
    assert "<strong>one</strong>" in out


def test_links_stay_inside_the_vault() -> None:
    assert note_href("guides/hostile") == "/ui/vault/note?path=guides%2Fhostile.md"
    assert note_href("../index.md", "guides") == "/ui/vault/note?path=index.md"
    for outside in ("../../etc/passwd", "/etc/passwd", "https://example.com/x.md", "javascript:alert(1)",
                    "C:\\x.md", "mailto:a@b.c", ""):  # fmt: skip
        assert note_href(outside) is None, outside
    assert 'href="/ui/vault/note?path=a%2Fb.md"' in render("[[a/b]]")
    assert "<a" not in render("[x](https://example.com)") and "https://example.com" in render(
        "[x](https://example.com)"
    )


def test_markdown_basics() -> None:
    out = render("# 見出し\n\ntext *em* `<code>`\n\n1. one\n2. two\n\n---\n> quote")
    assert "<h1>見出し</h1>" in out and "<em>em</em>" in out and "<code>&lt;code&gt;</code>" in out
    assert (
        "<ol><li>one</li><li>two</li></ol>" in out
        and "<hr>" in out
        and "<blockquote>quote</blockquote>" in out
    )
