"""HTTP surface: streamable HTTP (/mcp), SSE (/sse), health."""
