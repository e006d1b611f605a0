"""What the web dashboard (http/dashboard/) shows, read through the same services, access
rules and visibility filter as the tools: overview figures, search across the toolsets with
the engine's explanation, item details, decision timelines, proposals, discussions."""
