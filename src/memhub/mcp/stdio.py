"""memhub's own stdio transport: every line gets an answer, none is dropped.

The SDK's `mcp.server.stdio.stdio_server()` decodes stdin with `errors="replace"` (invalid UTF-8
silently becomes U+FFFD), and a line its JSON parser refuses (a `\\ud800` escape, nesting past
~200 levels, a truncated line) goes to the session as an exception that nobody answers: the
client waits forever. This module yields the same `(read_stream, write_stream)` pair, but:

* stdin is read as bytes, one line at a time, at most `MAX_LINE_BYTES` per line (a longer line is
  skipped to its end and answered with an error, memory stays bounded);
* bytes that are not UTF-8 become lone surrogates (`errors="surrogateescape"`): inside a JSON
  string they reach the tool, whose text validation rejects them in the toolset's vocabulary
  (INVALID_PARAMETER / invalid_parameter); elsewhere the line is not JSON;
* a line the fast parser refuses is parsed again with Python's `json` (which keeps lone surrogates
  and nests ~1000 levels); what is still not JSON is answered `-32700` (id null), what is JSON but
  not a JSON-RPC message, or nests deeper than `MAX_MESSAGE_DEPTH`, is answered `-32600` with the
  request's id when it can be recovered (so the client's pending request ends);
* an outgoing message that cannot be encoded (a lone surrogate echoed in an error) is written
  with the bad characters replaced instead of killing the writer.

Like the SDK, fd 0 and fd 1 are pointed at /dev/null and stderr while serving, so a stray
`print` or a child process cannot corrupt the JSON-RPC stream; both are restored on exit.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, BinaryIO

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server import Server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from memhub.services.common import json_depth

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 32 * 1024 * 1024  # one JSON-RPC message; a 16M-character import fits
MAX_MESSAGE_DEPTH = 64  # far above any tool's needs (free-form JSON parameters allow 8 levels)
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_SCAN_CHARS = 64 * 1024  # how much of a bad line's head and tail is searched for its id
_CHUNK = 1024 * 1024

ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]


@asynccontextmanager
async def stdio_transport(
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """Serve MCP over stdin/stdout (or the given binary streams); yields `(read_stream, write_stream)`."""
    restores: list[Callable[[], None]] = []
    try:
        if stdin is None:
            stdin = _claim(0, sys.stdin, "rb", lambda: os.open(os.devnull, os.O_RDONLY), restores)
        if stdout is None:
            stdout = _claim(1, sys.stdout, "wb", lambda: os.dup(2), restores)
        reader_in, reader_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        writer_in, writer_out = anyio.create_memory_object_stream[SessionMessage](0)
        out = _Output(stdout)

        async def read_lines() -> None:
            async with reader_in:
                while True:
                    line = await anyio.to_thread.run_sync(
                        _read_line, stdin, max_line_bytes, abandon_on_cancel=True
                    )
                    if line is None:
                        return
                    message = _decode(line, max_line_bytes)
                    if isinstance(message, SessionMessage):
                        try:
                            await reader_in.send(message)
                        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                            return
                    elif message is not None:
                        with anyio.CancelScope(shield=True):
                            await out.write(message)

        async def write_messages() -> None:
            async with writer_out:
                async for session_message in writer_out:
                    with anyio.CancelScope(shield=True):  # a line, once taken, is written whole
                        await out.write(session_message.message)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_lines)
            tg.start_soon(write_messages)
            try:
                yield reader_out, writer_in
            finally:
                # The session is over: what it sent is written (the write is shielded), a read
                # still waiting on stdin is abandoned.
                await writer_in.aclose()
                tg.cancel_scope.cancel()
    finally:
        for restore in reversed(restores):
            restore()


async def serve_stdio(server: Server[Any]) -> None:
    """Run `server` over this transport until the client closes stdin."""
    async with stdio_transport() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


# -- reading -------------------------------------------------------------------------------------


class _Line:
    """One stdin line: its bytes, or (when over the limit) its head and tail and its true size."""

    def __init__(self, data: bytes, size: int, tail: bytes = b"") -> None:
        self.data, self.size, self.tail = data, size, tail

    @property
    def oversized(self) -> bool:
        return bool(self.tail) or self.size != len(self.data)


def _read_line(stream: BinaryIO, limit: int) -> _Line | None:
    """The next line (None at EOF). A line over `limit` bytes is read to its end in chunks,
    keeping only its head and tail."""
    data = stream.readline(limit + 1)
    if not data:
        return None
    if len(data) <= limit or data.endswith(b"\n"):  # (limit bytes and the newline: still fits)
        return _Line(data, len(data))
    head, tail, size = data[:_SCAN_CHARS], data[-_SCAN_CHARS:], len(data)
    while not data.endswith(b"\n"):
        data = stream.readline(_CHUNK)
        if not data:
            break
        size += len(data)
        tail = (tail + data)[-_SCAN_CHARS:]
    return _Line(head, size, tail)


def _decode(line: _Line, limit: int) -> SessionMessage | types.JSONRPCError | None:
    """A message for the session, an error to answer the line with, or None (a blank line)."""
    if line.oversized:
        text = line.data.decode("utf-8", "surrogateescape")
        tail = line.tail.decode("utf-8", "surrogateescape")
        return _error(
            _find_id(text, tail), INVALID_REQUEST, f"message too large ({line.size} bytes; at most {limit})"
        )
    if not line.data.strip():
        return None  # blank lines carry no message
    if b"NaN" not in line.data and b"Infinity" not in line.data:  # the fast parser accepts those
        try:
            fast = types.jsonrpc_message_adapter.validate_json(line.data, by_name=False)
        except ValidationError:
            pass  # the fast path refused it: find out why, and keep what is still a request
        else:  # the envelope is 1 level, params 1 more: the same limit as on the slow path
            params = getattr(fast, "params", None)
            if json_depth(params, MAX_MESSAGE_DEPTH) <= MAX_MESSAGE_DEPTH - 1:
                return SessionMessage(fast)
            return _too_deep(getattr(fast, "id", None))
    text = line.data.decode("utf-8", "surrogateescape")
    try:
        parsed = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        return _too_deep(_find_id(text))
    except ValueError as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        return _error(None, PARSE_ERROR, f"parse error: {reason}")
    request_id = _id_of(parsed)
    if json_depth(parsed, MAX_MESSAGE_DEPTH) > MAX_MESSAGE_DEPTH:
        return _too_deep(request_id)
    try:
        message = types.jsonrpc_message_adapter.validate_python(parsed, by_name=False)
    except ValidationError:
        return _error(request_id, INVALID_REQUEST, "invalid request: not a JSON-RPC 2.0 message")
    return SessionMessage(message)


def _too_deep(request_id: types.RequestId | None) -> types.JSONRPCError:
    message = f"message nested too deeply (at most {MAX_MESSAGE_DEPTH} levels)"
    return _error(request_id, INVALID_REQUEST, message)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _error(request_id: types.RequestId | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


def _id_of(parsed: Any) -> types.RequestId | None:
    if isinstance(parsed, dict):
        value = parsed.get("id")
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
    return None


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NUMBER = re.compile(r"-?\d+(?![\d.eE])")
_TAIL_ID = re.compile(r'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$')


def _find_id(head: str, tail: str = "") -> types.RequestId | None:
    """The top-level `"id"` of a line that cannot be parsed whole, if it is findable.

    Scans the head as JSON tokens, tracking the nesting level, until the text breaks off; then
    looks for `"id": X}` closing the line (the last `}` of a complete line closes the top level).
    """
    text = head[:_SCAN_CHARS]
    depth, pos, key, expect_key = 0, 0, None, False
    while pos < len(text):
        char = text[pos]
        if char in " \t\r\n,":
            if char == ",":
                expect_key = depth == 1
            pos += 1
        elif char in "{[":
            depth += 1
            expect_key = depth == 1 and char == "{"
            pos += 1
        elif char in "}]":
            depth -= 1
            pos += 1
        elif char == ":":
            pos += 1
            if depth == 1 and key == "id":
                return _id_value(text, pos)
        elif char == '"':
            match = _STRING.match(text, pos)
            if match is None:
                break
            if depth == 1 and expect_key:
                with suppress(ValueError):
                    key = json.loads(match.group())
                expect_key = False
            pos = match.end()
        else:
            pos += 1
    match = _TAIL_ID.search((tail or head)[-_SCAN_CHARS:])
    return _id_value(match.group(1), 0) if match else None


def _id_value(text: str, pos: int) -> types.RequestId | None:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    if (match := _STRING.match(text, pos)) is not None:
        with suppress(ValueError):
            value = json.loads(match.group())
            return value if isinstance(value, str) else None
        return None
    if (number := _NUMBER.match(text, pos)) is not None:
        return int(number.group())
    return None


# -- writing -------------------------------------------------------------------------------------


class _Output:
    """Writes whole JSON-RPC lines; the session's messages and the transport's own errors
    interleave line by line, never inside a line."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = anyio.Lock()
        self._broken = False

    async def write(self, message: types.JSONRPCMessage) -> None:
        line = _encode(message)
        async with self._lock:
            if self._broken:
                return
            try:
                await anyio.to_thread.run_sync(self._write, line)
            except OSError as exc:  # the client went away: nothing left to tell it
                self._broken = True
                log.warning("stdout closed (%s): dropping further output", exc)

    def _write(self, line: bytes) -> None:
        self._stream.write(line)
        self._stream.flush()


def _encode(message: types.JSONRPCMessage) -> bytes:
    try:
        text = message.model_dump_json(by_alias=True, exclude_unset=True)
    except ValueError:  # a lone surrogate (echoed from the request) cannot be UTF-8 encoded
        data = message.model_dump(mode="json", by_alias=True, exclude_unset=True)
        text = json.dumps(_scrub(data), ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8") + b"\n"


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {_scrub(k): _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


# -- the process's standard streams --------------------------------------------------------------


def _claim(
    fd: int, stream: Any, mode: str, diversion: Callable[[], int], restores: list[Callable[[], None]]
) -> BinaryIO:
    """A private duplicate of `fd` for the wire; `fd` itself points at `diversion()` until restored.

    When the descriptors cannot be moved (no real fd behind the stream), the stream's buffer is
    served in place.
    """
    try:
        if stream.buffer.fileno() != fd:
            return stream.buffer  # type: ignore[no-any-return]
        private = os.dup(fd)  # not inheritable, and above 2 while 0-2 are open
        if private <= 2:  # cannot happen while 0-2 are open; never hand out a standard fd
            os.close(private)
            return stream.buffer  # type: ignore[no-any-return]
    except (AttributeError, OSError, ValueError):
        return stream.buffer  # type: ignore[no-any-return]
    try:
        moved = diversion()
        try:
            os.dup2(moved, fd)
        finally:
            os.close(moved)
    except OSError:
        pass  # serve the wire from the duplicate all the same; fd keeps pointing at it
    else:
        restores.append(lambda: _restore(private, fd))
    # closefd=False: a reader thread may still block on it after we return (as in the SDK)
    return os.fdopen(private, mode, closefd=False)  # type: ignore[return-value]


def _restore(private: int, fd: int) -> None:
    with suppress(OSError):
        os.dup2(private, fd)
