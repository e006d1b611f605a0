"""The composition root: settings in, wired objects out. Nothing else builds services."""

from __future__ import annotations

from dataclasses import dataclass

from mcp.server import MCPServer

from memhub.auth.identity import LocalIdentity
from memhub.core.models import Principal
from memhub.core.settings import Settings
from memhub.mcp.server import build_mcp_server
from memhub.services.runtime import Runtime
from memhub.store.sqlite import SqliteStore


@dataclass
class Container:
    settings: Settings
    runtime: Runtime
    server: MCPServer

    def close(self) -> None:
        self.runtime.store.close()


def build_container(settings: Settings) -> Container:
    store = SqliteStore(settings.db_path)
    with store.transaction(write=True) as tx:
        tx.ensure_principal(settings.user)
    runtime = Runtime(store=store)
    principal = Principal(id=settings.user, via="mcp", default_project=settings.project)
    server = build_mcp_server(runtime, settings.toolsets, LocalIdentity(principal))
    return Container(settings=settings, runtime=runtime, server=server)
