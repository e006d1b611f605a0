"""Command line: `memhub serve`, `memhub doctor`."""
