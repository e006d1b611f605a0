"""What a newcomer sees from `memhub serve`: the embedders in --help, one ready line on stderr."""

from __future__ import annotations

import select
import subprocess
from pathlib import Path

from memhub.search.embedders import EMBEDDER_NAMES
from tests.helpers import MEMHUB, free_port, wait_http
from tests.store.backends import Backend


def test_serve_help_lists_every_embedder() -> None:
    out = subprocess.run([MEMHUB, "serve", "--help"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0
    text = " ".join(out.stdout.split())  # argparse wraps lines
    for name in EMBEDDER_NAMES:
        assert name in text, name
    assert "default auto" in text and "e5+use when both models are" in text


def test_serve_prints_one_ready_line_with_url_store_toolsets_and_embedder(
    tmp_path: Path, backend: Backend
) -> None:
    port = free_port()
    db = backend.url(tmp_path, "m.db")
    serve = ["serve", "--transport", "http,sse", "--port", str(port), "--embedder", "none"]
    proc = subprocess.Popen(
        [MEMHUB, "--db", str(db), "--user", "alice", *serve],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health", proc)
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], 10)
        assert ready, "no ready line on stderr"
        line = proc.stderr.readline().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert line.startswith("memhub ") and " ready: " in line, line
    assert f"http://127.0.0.1:{port}/mcp" in line and f"http://127.0.0.1:{port}/sse" in line
    assert str(db) in line
    assert "toolsets discussion, assoc" in line
    assert "embedder none (text search only)" in line
