"""Compose the MCP server: the chosen toolsets over one Runtime."""

from __future__ import annotations

from collections.abc import Sequence

from mcp.server import MCPServer

from memhub import __version__
from memhub.mcp import assoc, discussion, vault
from memhub.mcp.toolkit import CallObserver, IdentityResolver, Toolset, build_tools
from memhub.services.runtime import Runtime

TOOLSETS: dict[str, Toolset] = {
    discussion.TOOLSET.name: discussion.TOOLSET,
    assoc.TOOLSET.name: assoc.TOOLSET,
    vault.TOOLSET.name: vault.TOOLSET,
}

INSTRUCTIONS = (
    "memhub is durable memory for coding work. Use the discussion tools to keep projects, "
    "topic trees, the log of each exchange and the decisions that closed them; search before "
    "asking the user something that may already be decided."
)


def build_mcp_server(
    runtime: Runtime,
    toolsets: Sequence[str],
    identity: IdentityResolver,
    observe: CallObserver | None = None,
) -> MCPServer:
    chosen = [TOOLSETS[name] for name in toolsets]
    return MCPServer(
        "memhub",
        version=__version__,
        instructions=INSTRUCTIONS,
        tools=build_tools(chosen, runtime, identity, observe),
        log_level="WARNING",
    )
