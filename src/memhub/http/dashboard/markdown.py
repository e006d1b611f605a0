"""A small Markdown renderer that cannot emit markup it was not written to emit.

Every piece of the note's text is HTML-escaped before any tag is added, so raw HTML in a note
(`<script>`, `<img onerror=…>`, `<a href="javascript:…">`) is shown as text. Supported:
ATX headings, paragraphs, `-`/`*`/`1.` lists, block quotes, fenced code, rules, inline
code, bold, italic, links and `[[wiki links]]`. Links stay inside the dashboard: a relative
link or a wiki link opens the vault note it names; anything else (http, mailto,
javascript, data) is shown as its text followed by the address, not as a link.
"""

from __future__ import annotations

import re
from html import escape
from urllib.parse import quote

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*[-*+]\s+(.*)$")
_NUMBERED = re.compile(r"^\s*\d{1,9}[.)]\s+(.*)$")
_RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE = re.compile(r"`([^`]+)`")
_WIKI = re.compile(r"\[\[([^\[\]|]+)(?:\|([^\[\]]+))?\]\]")
_LINK = re.compile(r"\[([^\[\]]+)\]\(([^()\s]+)\)")
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"(?<![*\w])\*([^*\s][^*]*?)\*(?![*\w])")
NOTE_URL = "/ui/vault/note?path="


def note_href(target: str, base_dir: str = "") -> str | None:
    """The dashboard address of a vault note a link names, or None for anything else."""
    target = target.split("#", 1)[0].strip()
    if not target or ":" in target or target.startswith(("/", "\\")) or "\\" in target:
        return None
    parts = [p for p in f"{base_dir}/{target}".split("/") if p and p != "."]
    resolved: list[str] = []
    for part in parts:
        if part == "..":
            if not resolved:
                return None
            resolved.pop()
        else:
            resolved.append(part)
    path = "/".join(resolved)
    if not path:
        return None
    if "." not in resolved[-1]:
        path += ".md"
    return NOTE_URL + quote(path, safe="")


def _inline(text: str, base_dir: str) -> str:
    """One line of text with inline markup; everything from the note is escaped."""
    out: list[str] = []
    pos = 0
    for match in _CODE.finditer(text):
        out.append(_spans(text[pos : match.start()], base_dir))
        out.append(f"<code>{escape(match.group(1))}</code>")
        pos = match.end()
    out.append(_spans(text[pos:], base_dir))
    return "".join(out)


def _spans(text: str, base_dir: str) -> str:
    pieces: list[str] = []
    pos = 0
    pattern = re.compile(f"{_WIKI.pattern}|{_LINK.pattern}")
    for match in pattern.finditer(text):
        pieces.append(_emphasis(escape(text[pos : match.start()])))
        wiki, wiki_label, label, target = match.groups()
        if wiki is not None:
            label, target = wiki_label or wiki, wiki
        href = note_href(target, base_dir)
        shown = _emphasis(escape(label))
        if href is not None:
            pieces.append(f'<a href="{escape(href)}">{shown}</a>')
        else:
            pieces.append(f'{shown} <span class="muted">({escape(target)})</span>')
        pos = match.end()
    pieces.append(_emphasis(escape(text[pos:])))
    return "".join(pieces)


def _emphasis(escaped: str) -> str:
    escaped = _BOLD.sub(r"<strong>\1</strong>", escaped)
    return _ITALIC.sub(r"<em>\1</em>", escaped)


def render(markdown: str, base_dir: str = "") -> str:
    """HTML for `markdown` (a vault note in folder `base_dir`). Safe to insert unescaped."""
    html: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []
    list_tag = ""
    code: list[str] | None = None

    def flush() -> None:
        nonlocal list_tag
        if paragraph:
            html.append("<p>" + " ".join(_inline(p, base_dir) for p in paragraph) + "</p>")
            paragraph.clear()
        if items:
            html.append(f"<{list_tag}>" + "".join(f"<li>{i}</li>" for i in items) + f"</{list_tag}>")
            items.clear()
            list_tag = ""

    for line in markdown.splitlines():
        if code is not None:
            if _FENCE.match(line):
                html.append("<pre><code>" + escape("\n".join(code)) + "</code></pre>")
                code = None
            else:
                code.append(line)
            continue
        if _FENCE.match(line):
            flush()
            code = []
            continue
        if not line.strip():
            flush()
            continue
        heading = _HEADING.match(line)
        bullet, numbered = _BULLET.match(line), _NUMBERED.match(line)
        if heading:
            flush()
            level = len(heading.group(1))
            html.append(f"<h{level}>{_inline(heading.group(2), base_dir)}</h{level}>")
        elif _RULE.match(line):
            flush()
            html.append("<hr>")
        elif bullet or numbered:
            tag = "ul" if bullet else "ol"
            if paragraph or (items and list_tag != tag):
                flush()
            list_tag = tag
            items.append(_inline((bullet or numbered).group(1), base_dir))  # type: ignore[union-attr]
        elif line.lstrip().startswith(">"):
            flush()
            html.append(f"<blockquote>{_inline(line.lstrip()[1:].strip(), base_dir)}</blockquote>")
        else:
            if items:
                flush()
            paragraph.append(line.strip())
    if code is not None:
        html.append("<pre><code>" + escape("\n".join(code)) + "</code></pre>")
    flush()
    return "\n".join(html)
