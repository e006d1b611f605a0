"""The vault toolset's services (seed 001): Markdown notes in a folder, read and written safely."""
