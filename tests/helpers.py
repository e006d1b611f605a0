"""Small helpers shared by the tests."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from mcp import StdioServerParameters

from tests.store.backends import rows, selected

REPO = Path(__file__).resolve().parents[1]
MEMHUB = str(Path(sys.executable).with_name("memhub"))
SHARED = Path(os.environ.get("MEMHUB_SHARED") or REPO.parent / "shared")  # the seeds and tools

FTS_TRICKS = ['"', "*", "NEAR(", "OR", 'a" OR "b', "AND NOT", "-x", "col:val", "^start", "(((", "'", "%_"]


async def ok(client: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    # the text content mirrors the structured content
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def error_body(result: Any) -> dict[str, Any]:
    """The JSON error body of an `isError` result: it travels in the text content only.

    An error carries no structuredContent: that would have to match the tool's outputSchema
    (the TypeScript SDK client rejects a result whose structuredContent does not).
    """
    assert result.is_error, result.structured_content
    assert result.structured_content is None, result.structured_content
    body: dict[str, Any] = json.loads(result.content[0].text)
    return body


async def error(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The seed-004 error body {"code", "message"} of a call that must fail."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    body = error_body(result)
    assert set(body) == {"error"}, body
    assert body["error"]["message"]
    return body["error"]


def counts(db: str | Path) -> dict[str, int]:
    """Row counts of every user-data table of the store at `db` (the audit log is allowed to grow)."""
    tables = ("items", "projects", "project_members", "links", "vectors", *selected().text_tables)
    return {t: rows(db, f"SELECT count(*) FROM {t}")[0][0] for t in tables}


def store_arg(db: str | Path) -> str:
    """`db` as a server's `--db`: on a backend other than SQLite a file path is a harness bug
    (the server would quietly run on a SQLite file); tests pass `backend.url(...)`."""
    text = str(db)
    if selected().name != "sqlite" and "://" not in text:
        raise AssertionError(f"--db {Path(text).name}: a file on {selected().name}; pass backend.url(...)")
    return text


def stdio_params(db: str | Path, user: str = "alice", *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=MEMHUB,
        args=[
            *("--db", store_arg(db), "--user", user, "--project", "demo"),
            *("serve", "--transport", "stdio", *extra),
        ],
        # PYTHONPATH: the server imports this checkout's source, whichever one the venv installed
        env={
            "MEMHUB_EMBEDDER": "none",
            "OMP_NUM_THREADS": "1",
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(REPO / "src"),
        },
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(
    url: str, proc: subprocess.Popen[bytes], deadline_s: float = 20.0, context: ssl.SSLContext | None = None
) -> dict[str, Any]:
    """Poll until the server answers (bounded; no fixed sleep)."""
    end = time.monotonic() + deadline_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1, context=context) as response:
                return dict(json.loads(response.read()))
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


@contextmanager
def http_server(
    db: str | Path,
    *extra: str,
    env: dict[str, str] | None = None,
    context: ssl.SSLContext | None = None,
    port: int | None = None,
    stderr: Any = subprocess.DEVNULL,
) -> Iterator[str]:
    """A real `memhub serve --transport http,sse` on a free 127.0.0.1 port; yields its base URL
    (https when `context` is given: the client's TLS context; its stderr goes to `stderr`)."""
    port = port or free_port()
    proc = subprocess.Popen(
        [
            MEMHUB,
            "--db",
            store_arg(db),
            "--user",
            "alice",
            "--project",
            "demo",
            "serve",
            "--transport",
            "http,sse",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--embedder",
            "none",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env={**os.environ, **(env or {})},
    )
    base = f"{'https' if context else 'http'}://127.0.0.1:{port}"
    try:
        wait_http(f"{base}/health", proc, context=context)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def check_bad_inputs(client: Any, db: str | Path, project_id: int, topic_id: int) -> None:
    """Every discussion tool's bad-input table through `client`: the seed's code, nothing written."""
    from tests.services.discussion.test_tools import _bad_inputs

    before = counts(db)
    for tool, arguments, code in _bad_inputs(project_id, topic_id):
        if any("\ud800" in str(value) for value in arguments.values()):
            continue  # a client cannot serialise a lone surrogate; test_stdio sends it raw
        assert (await error(client, tool, arguments))["code"] == code, (tool, arguments)
    assert counts(db) == before


def run_bench_script(tmp_path: Path, script: Path, *args: str) -> tuple[dict[str, Any], str]:
    """Run a bench/ script with `--out` in `tmp_path`; its JSON report and its printed output."""
    out = tmp_path / "report.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    done = subprocess.run(
        [sys.executable, str(script), *args, "--out", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return report, done.stdout + done.stderr


class FixedClock:
    """A clock that reads `at` until a test moves it (the runtime's `clock`): no sleeps."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at
