"""The toolsets memhub can serve. Adding a toolset is one entry in `REGISTRY`: its tools,
instructions, resources and background hooks travel with its `Toolset` declaration."""

from __future__ import annotations

from collections.abc import Sequence

from memhub.mcp import assoc, decisions, discussion, pce, vault
from memhub.mcp.toolkit import Toolset

REGISTRY: tuple[Toolset, ...] = (
    discussion.TOOLSET,
    assoc.TOOLSET,
    vault.TOOLSET,
    decisions.TOOLSET,
    pce.TOOLSET,
)

PREAMBLE = (
    "memhub is durable memory for coding work, shared by every session and agent that uses this server."
)


def names(registry: Sequence[Toolset] = REGISTRY) -> tuple[str, ...]:
    return tuple(toolset.name for toolset in registry)


def select(chosen: Sequence[str] | None, registry: Sequence[Toolset] = REGISTRY) -> list[Toolset]:
    """The toolsets named in `chosen` (every registered one when it is empty or None), in
    registry order. Raises ValueError naming the unknown ones."""
    known = {toolset.name: toolset for toolset in registry}
    unknown = sorted(set(chosen or ()) - set(known))
    if unknown:
        raise ValueError(f"unknown toolset(s) {unknown}; available: {', '.join(known)}")
    wanted = set(chosen or known)
    return [toolset for toolset in registry if toolset.name in wanted]


def instructions(served: Sequence[Toolset]) -> str:
    """The server's `instructions`: what is actually served, toolset by toolset."""
    parts = [PREAMBLE]
    parts += [f"[{toolset.name}] {toolset.instructions}" for toolset in served if toolset.instructions]
    return "\n".join(parts)
