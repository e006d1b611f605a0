"""memhub: a local-first MCP memory server for coding agents."""

__version__ = "0.1.0"
