"""Who is calling: principals from the transport (local user on stdio, HTTP headers later)."""
