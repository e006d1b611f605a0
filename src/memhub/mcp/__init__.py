"""MCP interface: thin, typed toolsets over the services, and the server composition."""
