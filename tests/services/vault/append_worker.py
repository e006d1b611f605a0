"""One process of the two-process vault append race (test_processes.py): a real container with
its own store, the real in-memory MCP client, `vault_write(mode=append)` N times on one note.

    python -m tests.services.vault.append_worker HOME VAULT NOTE NAME COUNT [LOCK_MODE]

Prints "ready", waits for a line on stdin (so both processes start together), appends
`- NAME i` for i in 0..COUNT-1 and prints one JSON line: the entries acknowledged and the
error codes of the calls that were refused.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from mcp import Client

from memhub.cli.container import build_container
from memhub.core.settings import Settings


async def main(home: Path, vault: Path, note: str, name: str, count: int, lock: str) -> None:
    settings = Settings(
        home=home,
        user="alice",
        project="demo",
        embedder="none",
        vault=vault,
        toolsets=("vault",),
        vault_lock=lock,
    )
    container = build_container(settings)
    acked: list[str] = []
    refused: list[str] = []
    try:
        async with Client(container.server) as client:
            print("ready", flush=True)
            sys.stdin.readline()
            for i in range(count):
                entry = f"- {name} {i}"
                result = await client.call_tool(
                    "vault_write", {"path": note, "content": entry, "mode": "append"}
                )
                if result.is_error:
                    refused.append(str(json.loads(result.content[0].text)["error"]["code"]))
                else:
                    acked.append(entry)
    finally:
        container.close()
    print(json.dumps({"acked": acked, "refused": refused}), flush=True)


if __name__ == "__main__":
    home, vault, note, name, count = sys.argv[1:6]
    anyio.run(main, Path(home), Path(vault), note, name, int(count), (sys.argv[6:] or ["auto"])[0])
