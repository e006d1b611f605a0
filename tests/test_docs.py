"""The docs are part of the product: their examples run, their tables are complete."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memhub.cli.container import build_container
from memhub.core.settings import setting_docs
from tests.conftest import make_settings
from tests.helpers import error_body
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio
DOCS = Path(__file__).resolve().parents[1] / "docs"
README = DOCS.parent / "README.md"


def _examples(path: Path) -> list[dict[str, Any]]:
    blocks = re.findall(r"```json\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)
    return [parsed for block in blocks if "tool" in (parsed := json.loads(block))]


def _contains(actual: Any, expected: Any) -> bool:
    """`expected` is a sub-tree of `actual` (dict keys may be omitted; lists compare item-wise)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and _contains(actual[k], v) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(_contains(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return bool(actual == expected)


@pytest.mark.parametrize("doc", ["discussion.md", "assoc.md", "vault.md", "decisions.md", "pce.md"])
async def test_doc_examples_run(doc: str, tmp_path: Path, backend: Backend) -> None:
    examples = _examples(DOCS / doc)
    assert examples, f"{doc} has no runnable examples"
    toolset = doc.removesuffix(".md")
    container = build_container(make_settings(tmp_path, backend, embedder="hash", toolsets=(toolset,)))
    async with Client(container.server) as client:
        for example in examples:
            result = await client.call_tool(example["tool"], example["arguments"])
            body = error_body(result) if result.is_error else result.structured_content
            if "error" in example:
                assert result.is_error and _contains(body, {"error": example["error"]}), (example, body)
            elif "error_body" in example:  # a toolset whose error body is not an {"error": ...} envelope
                assert result.is_error and _contains(body, example["error_body"]), (example, body)
            else:
                assert not result.is_error and _contains(body, example["result"]), (example, body)
    container.close()


def test_every_setting_is_documented() -> None:
    table = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for name, (env, _help) in setting_docs().items():
        assert f"| {name} | `{env}` |" in table, name


def test_readme_quick_start() -> None:
    text = README.read_text(encoding="utf-8")
    assert "make run" in text and "make test" in text


def test_security_doc_lists_every_tools_limits() -> None:
    from memhub.mcp import registry

    text = (DOCS / "security.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| (\w+) \| `([\w.-]+)` \| (\w+) \| (\d+) \| (\d+) \|$", text, flags=re.M))
    declared = {
        (toolset.name, spec.name, spec.limit_class, str(spec.max_payload), f"{spec.timeout_s:g}")
        for toolset in registry.REGISTRY
        for spec in toolset.tools
    }
    assert rows == declared
