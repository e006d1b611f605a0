"""A `memhub serve --transport stdio` subprocess spoken to in raw JSON-RPC lines (bytes)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.helpers import stdio_params

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


def call_line(request_id: int, tool: str, arguments: dict[str, Any]) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    return json.dumps(message).encode() + b"\n"


class RawServer:
    def __init__(self, db: str | Path, *extra: str, embedder: str = "none") -> None:
        params = stdio_params(db, "alice", *extra)
        env = {**(params.env or {}), "MEMHUB_EMBEDDER": embedder}
        # a file, not a pipe: a chatty server never blocks on a full pipe (an unnamed one: `db`
        # may be a URL, with no folder to write beside)
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        self.proc = subprocess.Popen(
            [params.command, *params.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self._out = self.proc.stdout.fileno()
        self._buffer = b""
        self.send(json.dumps(INIT).encode() + b"\n")
        assert "result" in self.reply(0)
        self.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def next_message(self, timeout: float = 20.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._out], [], [], max(left, 0))
            assert ready, f"no answer within {timeout} s"
            chunk = os.read(self._out, 1 << 20)
            assert chunk, "the server closed stdout"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def reply(self, request_id: int | str | None, timeout: float = 20.0) -> dict[str, Any]:
        """The next message answering `request_id` (None: an error with id null); others are skipped
        (they must still be JSON-RPC)."""
        while True:
            message = self.next_message(timeout)
            if message.get("id", "absent") == request_id and ("result" in message or "error" in message):
                return message

    def call(self, request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.send(call_line(request_id, tool, arguments))
        return self.reply(request_id)

    def close(self) -> str:
        """Close stdin, wait for a clean exit; returns stderr."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=20)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self._stderr.seek(0)
        stderr = self._stderr.read().decode("utf-8", errors="replace")
        self._stderr.close()
        assert code == 0, stderr[-3000:]
        return stderr


def tool_error(reply: dict[str, Any]) -> dict[str, Any]:
    """The toolset error body of a tools/call reply that must be an isError result."""
    assert "result" in reply, reply
    result = reply["result"]
    assert result["isError"] is True, result
    body = result.get("structuredContent") or json.loads(result["content"][0]["text"])
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    return error
