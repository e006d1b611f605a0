"""What `serve` does before it can answer `initialize` (issue 21 §6): no JWT library without
JWT authentication, no tool schema built before the first `tools/list`, and the listing then
the same as a server that built it first thing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.store.backends import Backend

PROBE = """
import json, pathlib, sys
import anyio
import pydantic
from mcp import Client
from memhub.cli.container import build_container
from memhub.core.settings import Settings
from memhub.mcp.toolkit import published_tool


def subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)


def built():
    return sorted(c.__qualname__ for c in set(subclasses(pydantic.BaseModel))
                  if c.__module__.startswith("memhub.services") and c.__pydantic_complete__)


async def main():
    home, db = sys.argv[1], sys.argv[2]
    settings = Settings(home=pathlib.Path(home), db=db, user="t", project="t", embedder="hash")
    container = build_container(settings)
    report = {"jwt": "jwt" in sys.modules, "built_before": built()}
    async with Client(container.server) as client:
        listed = await client.list_tools()
    report["listed"] = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]
    report["built_after"] = len(built())
    report["direct"] = [
        published_tool(spec).model_dump(mode="json", by_alias=True, exclude_none=True)
        for toolset in __import__("memhub.mcp.registry", fromlist=["REGISTRY"]).REGISTRY
        for spec in toolset.tools
    ]
    container.close()
    print(json.dumps(report))


anyio.run(main)
"""


def _python(code: str, *args: str) -> str:
    """What `python -c code args` prints, in a fresh interpreter on this test run's path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_no_jwt_and_no_schema_is_built_before_the_first_tools_list(tmp_path: Path, backend: Backend) -> None:
    report = json.loads(_python(PROBE, str(tmp_path), backend.url(tmp_path)).splitlines()[-1])
    assert report["jwt"] is False  # PyJWT is imported by a JWT verifier only
    assert report["built_before"] == []  # every tool model is built when first used
    assert report["built_after"] > 50
    # the listing made on demand is the one published_tool gives for every tool, in order
    assert report["listed"] == report["direct"]
    assert {t["name"] for t in report["listed"]} >= {"memory", "vault_read", "record_decision"}


def test_the_collector_is_paused_for_the_imports_only() -> None:
    """cli/main.py holds the garbage collector off while its imports run, then restores it
    and freezes what they made (no later full collection walks the process's modules)."""
    check = (
        "import gc, sys\n"
        "if sys.argv[1] == 'off': gc.disable()\n"
        "import memhub.cli.main\n"
        "print(gc.isenabled(), gc.get_freeze_count() > 10_000, gc.collect() >= 0)\n"
    )
    for before, after in (("on", "True"), ("off", "False")):
        assert _python(check, before).split() == [after, "True", "True"]


def test_the_sdks_models_are_built_when_first_used() -> None:
    """cli/main.py makes pydantic's `defer_build` the default while its imports run: the MCP
    SDK's models (every protocol version's) are built at their first use, not at import; a
    model defined afterwards is built as pydantic's own default says, and a deferred SDK model
    validates, serializes and publishes the JSON schema a built one does."""
    check = (
        "import json, sys, pydantic\n"
        "if sys.argv[1] == 'memhub': import memhub.cli.main\n"
        "import mcp_types\n"
        "models = [m for m in vars(mcp_types).values()\n"
        "          if isinstance(m, type) and issubclass(m, pydantic.BaseModel)]\n"
        "deferred = [m for m in models if not m.__pydantic_complete__]\n"
        "class Later(pydantic.BaseModel):\n"
        "    x: int\n"
        "request = mcp_types.ListToolsRequest.model_validate({'method': 'tools/list', 'params': {}})\n"
        "schemas = {m.__name__: m.model_json_schema() for m in (mcp_types.Tool, mcp_types.CallToolResult,\n"
        "           mcp_types.InitializeResult)}\n"
        "print(json.dumps({'models': len(models), 'deferred': len(deferred),\n"
        "    'default': dict(pydantic.BaseModel.model_config), 'later': Later.__pydantic_complete__,\n"
        "    'built': mcp_types.ListToolsRequest.__pydantic_complete__,\n"
        "    'dumped': request.model_dump(mode='json', exclude_none=True), 'schemas': schemas}))\n"
    )
    ours, plain = (json.loads(_python(check, how).splitlines()[-1]) for how in ("memhub", "sdk"))
    assert ours["models"] == plain["models"] > 100
    assert ours["deferred"] > 0.8 * ours["models"] and plain["deferred"] < 0.2 * plain["models"]
    assert ours["default"] == plain["default"] == {} and ours["later"] is True
    assert ours["built"] is True and ours["dumped"] == plain["dumped"]
    assert ours["dumped"]["method"] == "tools/list"
    assert ours["schemas"] == plain["schemas"]
