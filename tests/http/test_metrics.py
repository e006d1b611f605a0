"""/metrics parses as Prometheus text: every family has HELP and the right TYPE."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families

from memhub.http.metrics import STATE, Metrics
from tests.helpers import error, http_server, ok
from tests.store.backends import Backend

pytestmark = pytest.mark.anyio


def _families(text: str) -> dict[str, tuple[str, str]]:
    """name -> (type, help) as the official parser reads them."""
    return {f.name: (f.type, f.documentation) for f in text_string_to_metric_families(text)}


def test_every_metric_has_help_and_counters_are_counters() -> None:
    metrics = Metrics()
    metrics.observe("get-logs", "ok", 0.003)
    metrics.observe("get-logs", "NOT_FOUND", 0.2)
    text = metrics.render({name: 1234567.0 for name in STATE} | {"something_new": 0.5})
    families = _families(text)
    assert families["memhub_tool_calls"][0] == "counter"  # the parser drops a counter's _total
    assert families["memhub_tool_call_seconds"][0] == "histogram"
    for name, (kind, _) in STATE.items():
        family = name.removesuffix("_total") if kind == "counter" else name
        assert families[f"memhub_{family}"][0] == kind, name
        assert (kind == "counter") == name.endswith("_total"), name
    assert all(help_text for _, help_text in families.values()), families
    assert "memhub_store_bytes 1234567\n" in text  # no precision lost to exponent notation


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, backend: Backend) -> Iterator[str]:
    with http_server(backend.url(tmp_path_factory.mktemp("metrics"), "m.db"), "--embedder", "hash") as base:
        yield base


async def test_served_metrics_parse(server: str) -> None:
    async with Client(f"{server}/mcp") as client:
        await ok(client, "get-projects")
        await error(client, "get-logs", {"topic_id": 10**6})
    with urllib.request.urlopen(f"{server}/metrics", timeout=5) as response:
        families = _families(response.read().decode())
    assert families["memhub_tool_calls"][0] == "counter"
    assert families["memhub_backfill_embedded"][0] == "counter"  # with an embedder, its state too
    assert families["memhub_store_bytes"][0] == "gauge"
    undocumented = [name for name, (_, help_text) in families.items() if not help_text]
    assert not undocumented, undocumented
